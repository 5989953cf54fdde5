package render

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/scafo/ingress/render/routing"
)

// Defaults of Options.
const (
	DefaultEntryPoint = "web"
	// DefaultHealthCheckInterval is the shortest interval of the automatic setting
	// (Options.HealthCheckInterval empty): see AutoHealthCheckInterval.
	DefaultHealthCheckInterval = "5s"
	DefaultHealthCheckTimeout  = "2s"
	DefaultPathGroupThreshold  = 64
)

// ErrOptions matches every error Options.Validate returns: a misconfigured node, not a
// bad document.
var ErrOptions = errors.New("invalid render options")

// Options are the node-config choices of the Traefik render (DESIGN §7, the
// --traefik.* settings). The zero value is valid and means every default.
type Options struct {
	// EntryPoints every router is attached to. Default ["web"].
	EntryPoints []string
	// CertResolver, when set, gives every router tls.certResolver. Empty means no tls
	// section at all (TLS, if any, is the entry point's business).
	CertResolver string
	// PlatformWildcardCerts asks for one certificate per platform domain, the apex plus
	// its wildcard (tls.domains main=apex, sans=["*.apex"]), on every router of a host
	// directly under (or equal to) a platform domain. Needs CertResolver and
	// PlatformDomains. A wildcard certificate never creates a wildcard route.
	PlatformWildcardCerts bool
	// PlatformDomains are the fleet's platform domains ("apps.example.com"); used only
	// for PlatformWildcardCerts.
	PlatformDomains []string
	// HealthCheckInterval and HealthCheckTimeout of every active health check, as Go
	// durations. An explicit interval is used as it is; empty means automatic: 5s, or
	// longer when the configuration has more checked leaves than HealthCheckBudget
	// checks per second allow (AutoHealthCheckInterval). Timeout default "2s".
	HealthCheckInterval string
	HealthCheckTimeout  string
	// PathGroupThreshold is the most prefixes of one (host, target) pair rendered as one
	// router per prefix; above it the pair gets one router with an anchored PathRegexp
	// alternation. Default 64.
	PathGroupThreshold int
}

// resolved is Options after defaults and validation, in the form the render emits.
type resolved struct {
	entryPoints     []string
	certResolver    string
	wildcardCerts   bool
	platformDomains []string
	interval        string // "" when automatic
	timeout         string
	groupThreshold  int
}

// Validate reports the first invalid setting, naming it. The node calls it at startup
// so that a bad flag fails there rather than on every poll; Traefik calls it too.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

func optErr(setting, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrOptions, setting, fmt.Sprintf(format, args...))
}

func (o Options) resolve() (resolved, error) {
	r := resolved{
		entryPoints:     o.EntryPoints,
		certResolver:    o.CertResolver,
		wildcardCerts:   o.PlatformWildcardCerts,
		platformDomains: o.PlatformDomains,
		groupThreshold:  o.PathGroupThreshold,
	}
	if len(r.entryPoints) == 0 {
		r.entryPoints = []string{DefaultEntryPoint}
	}
	seen := make(map[string]bool, len(r.entryPoints))
	for i, ep := range r.entryPoints {
		field := "entryPoints[" + strconv.Itoa(i) + "]"
		switch {
		case ep == "":
			return r, optErr(field, "must not be empty")
		case strings.ContainsAny(ep, "@ \t\r\n"):
			return r, optErr(field, "%q must not contain '@' or whitespace", ep)
		case seen[ep]:
			return r, optErr(field, "%q is listed twice", ep)
		}
		seen[ep] = true
	}
	if strings.ContainsAny(r.certResolver, "@ \t\r\n") {
		return r, optErr("certResolver", "%q must not contain '@' or whitespace", r.certResolver)
	}
	for i, pd := range r.platformDomains {
		if err := routing.ValidateHost("platformDomains["+strconv.Itoa(i)+"]", pd); err != nil {
			return r, fmt.Errorf("%w: %w", ErrOptions, err)
		}
	}
	if r.wildcardCerts {
		if r.certResolver == "" {
			return r, optErr("platformWildcardCerts", "needs certResolver (the certificates come from an ACME resolver)")
		}
		if len(r.platformDomains) == 0 {
			return r, optErr("platformWildcardCerts", "needs at least one platform domain")
		}
	}
	var err error
	if o.HealthCheckInterval != "" {
		if r.interval, err = duration("healthCheck.interval", o.HealthCheckInterval, DefaultHealthCheckInterval); err != nil {
			return r, err
		}
	}
	if r.timeout, err = duration("healthCheck.timeout", o.HealthCheckTimeout, DefaultHealthCheckTimeout); err != nil {
		return r, err
	}
	switch {
	case r.groupThreshold == 0:
		r.groupThreshold = DefaultPathGroupThreshold
	case r.groupThreshold < 0:
		return r, optErr("pathGroupThreshold", "%d must not be negative", r.groupThreshold)
	}
	return r, nil
}

// duration parses s (def when empty) and returns it in Go's canonical spelling, which
// Traefik's paerser Duration parses back exactly.
func duration(setting, s, def string) (string, error) {
	if s == "" {
		s = def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return "", optErr(setting, "%q is not a duration (\"5s\", \"500ms\")", s)
	}
	if d <= 0 {
		return "", optErr(setting, "%q must be positive (Traefik silently replaces a non-positive value with its own default)", s)
	}
	return d.String(), nil
}

// HealthCheckBudget is the most active health checks per second the automatic interval
// lets one Traefik send: measured on Traefik v3.6.12, 400 checks/s cost 0.12 cores (and
// 10 000 applications at 5 s, 4 000 checks/s, cost 1.15 cores), so 200/s stays near
// 0.06 cores whatever the fleet's size.
const HealthCheckBudget = 200

// AutoHealthCheckInterval is the automatic interval for a configuration with checked
// active health checks: DefaultHealthCheckInterval (5s), or checked/HealthCheckBudget
// seconds rounded up to a whole second when that is longer, so Traefik's check rate
// stays at or under HealthCheckBudget per second.
func AutoHealthCheckInterval(checked int) time.Duration {
	floor, _ := time.ParseDuration(DefaultHealthCheckInterval)
	d := time.Duration((checked+HealthCheckBudget-1)/HealthCheckBudget) * time.Second
	return max(floor, d)
}
