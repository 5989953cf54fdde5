package publish

// The traefik.* settings: the render options the publisher renders with, their
// defaults, checks and the render.Options they make.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/routing"
)

// TraefikConfig are the render options (the node's traefik.* settings). The check that
// involves another section (acme.dns01.platform) is the node's (node/config_acme.go).
type TraefikConfig struct {
	EntryPoints           []string          `description:"Entry points every router listens on." json:"entryPoints,omitempty"`
	CertResolver          string            `description:"certResolver for every router (TLS when set)." json:"certResolver,omitempty"`
	PlatformWildcardCerts bool              `description:"Ask for one wildcard certificate per platform domain." json:"platformWildcardCerts,omitempty"`
	HealthCheck           HealthCheckConfig `description:"Active health checks of upstream leaves." json:"healthCheck"`
	PathGroupThreshold    int               `description:"Above this many prefixes per (host, target), one PathRegexp router replaces per-prefix routers." json:"pathGroupThreshold,omitempty"`
	Retry                 RetryConfig       `description:"Traefik's retry middleware on every application and API router: a request whose connection the upstream refused (an in-place restart, a dead instance not yet taken out) is tried again; one whose headers reached an upstream never is." json:"retry"`
	Front                 bool              `description:"A layer-4 front (scafo-node front) routes passthrough names by their exact name in front of every Traefik: the render writes no TCP router for them (docs/passthrough.md)." json:"front,omitempty"`
	// Middlewares are the operator's own Traefik middlewares, defined in their
	// ingresses (a file provider, say), that an application may list (its admin-set
	// middlewares field): the fleet references them by name and defines none.
	Middlewares []string `description:"Traefik middlewares defined in your ingresses that applications may list, as name@provider (e.g. auth@file); the fleet defines none, and refuses an application naming any other." json:"middlewares,omitempty"`
}

// RetryConfig is Traefik's retry middleware on application routers (render.Options
// RetryAttempts, RetryInitialInterval). Attempts counts tries, the first included, as
// Traefik's attempts does: 1 turns retries off. The defaults, 12 tries from 200ms,
// wait 3.1s in all (1.5s at the least, by Traefik's randomized backoff:
// render.RetryWaits), enough for a process that restarts in about a second.
type RetryConfig struct {
	Attempts        int             `description:"Tries per request, the first included (Traefik's retry attempts); 1 turns retries off." json:"attempts,omitempty"`
	InitialInterval ptypes.Duration `description:"First wait between tries; Traefik grows the waits to just under twice this by the last, each randomized by 50%." json:"initialInterval,omitempty"`
}

// HealthCheckConfig times active health checks. An Interval of 0 (the default) is
// automatic: 5s, lengthened with the number of checked leaves so one Traefik sends at
// most render.HealthCheckBudget checks a second; a set value is used as it is.
type HealthCheckConfig struct {
	Interval ptypes.Duration `description:"Health check interval; 0 (default) sizes it for the fleet: 5s, or longer so one Traefik sends at most 200 checks/s." json:"interval,omitempty"`
	Timeout  ptypes.Duration `description:"Health check timeout." json:"timeout,omitempty"`
}

// minHealthCheckInterval: a set Traefik health check interval shorter than this makes
// every Traefik check every checked leaf more than ten times a second.
const minHealthCheckInterval = 100 * time.Millisecond

// defaultRetryInitialInterval is render.DefaultRetryInitialInterval as a duration.
var defaultRetryInitialInterval, _ = time.ParseDuration(render.DefaultRetryInitialInterval)

// TraefikDefaults are the traefik.* defaults.
func TraefikDefaults() TraefikConfig {
	return TraefikConfig{
		EntryPoints:        []string{"web"},
		HealthCheck:        HealthCheckConfig{Timeout: ptypes.Duration(2 * time.Second)}, // Interval 0: automatic
		PathGroupThreshold: 64,
		Retry:              RetryConfig{Attempts: render.DefaultRetryAttempts, InitialInterval: ptypes.Duration(defaultRetryInitialInterval)},
	}
}

// Validate lists what is wrong with c (nil when it is valid). It reports and changes
// nothing. The render's own bounds are checked where the options are made
// (RenderOptions, render.Options.Validate).
func (c TraefikConfig) Validate() []error {
	var errs []error
	if len(c.EntryPoints) == 0 {
		errs = append(errs, errors.New("traefik.entryPoints: at least one entry point (every router listens on them)"))
	}
	for i, ep := range c.EntryPoints {
		if strings.TrimSpace(ep) == "" {
			errs = append(errs, fmt.Errorf("traefik.entryPoints[%d]: empty", i))
		}
	}
	// The render reads 0 as its default; here the defaults are already set, so a 0 is
	// someone's explicit value, and it means nothing (1 is off).
	if c.Retry.Attempts < 1 {
		errs = append(errs, fmt.Errorf("traefik.retry.attempts %d: at least 1 (1 turns retries off)", c.Retry.Attempts))
	}
	if iv := time.Duration(c.HealthCheck.Interval); iv < 0 || (iv > 0 && iv < minHealthCheckInterval) {
		errs = append(errs, fmt.Errorf("traefik.healthCheck.interval %s: at least %s (0 sizes it for the fleet)", iv, minHealthCheckInterval))
	}
	for i, m := range c.Middlewares {
		field := fmt.Sprintf("traefik.middlewares[%d]", i)
		if err := routing.ValidateMiddleware(field, m); err != nil {
			errs = append(errs, err)
		} else if j := slices.Index(c.Middlewares, m); j < i {
			errs = append(errs, fmt.Errorf("%s %q: declared twice (as traefik.middlewares[%d])", field, m, j))
		}
	}
	return errs
}

// RenderOptions are the render's options for these settings and the platform domains,
// checked by the render (an error names what it refused).
func (c TraefikConfig) RenderOptions(platformDomains []string) (render.Options, error) {
	ropts := render.Options{
		EntryPoints:           c.EntryPoints,
		CertResolver:          c.CertResolver,
		PlatformWildcardCerts: c.PlatformWildcardCerts,
		PlatformDomains:       platformDomains,
		HealthCheckInterval:   c.HealthCheck.RenderInterval(),
		HealthCheckTimeout:    time.Duration(c.HealthCheck.Timeout).String(),
		PathGroupThreshold:    c.PathGroupThreshold,
		RetryAttempts:         c.Retry.Attempts,
		RetryInitialInterval:  time.Duration(c.Retry.InitialInterval).String(),
		Front:                 c.Front,
	}
	if err := ropts.Validate(); err != nil {
		return render.Options{}, fmt.Errorf("traefik render options: %w", err)
	}
	return ropts, nil
}

// RenderInterval is the render's interval setting: "" (automatic, sized for the fleet)
// for the default 0, the configured duration otherwise.
func (h HealthCheckConfig) RenderInterval() string {
	if h.Interval == 0 {
		return ""
	}
	return time.Duration(h.Interval).String()
}
