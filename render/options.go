package render

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/traefik/genconf/dynamic"

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

	// DefaultRetryAttempts and DefaultRetryInitialInterval are the retry middleware's
	// defaults (see Options.RetryAttempts): 12 tries (11 retries) starting at 200ms. By
	// RetryWaits, Traefik waits 3.08s in all between the first try and the last,
	// 1.54s at the least (every wait at the low end of its randomization), so a
	// process that refuses connections for a one-second restart is always tried again
	// after it is back; 4.61s at the most, the longest a request to an instance that
	// stays dead is held before its 502.
	DefaultRetryAttempts        = 12
	DefaultRetryInitialInterval = "200ms"
	// MaxRetryAttempts and MaxRetryInitialInterval bound the settings: each try of a
	// refused request is a new dial, and each wait holds the request.
	MaxRetryAttempts        = 50
	MaxRetryInitialInterval = 10 * time.Second
)

// RetryMiddleware names the one retry middleware of the render, referenced by every
// application router (no '@': it resolves in the provider of the routers).
const RetryMiddleware = "scafo-retry"

// ErrOptions matches every error Options.Validate returns: a misconfigured node, not a
// bad document.
var ErrOptions = errors.New("invalid render options")

// Options are the node-config choices of the Traefik render (docs/design.md §7, the
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
	// RetryAttempts and RetryInitialInterval configure Traefik's retry middleware
	// (RetryMiddleware), on every application router (exact hosts, custom wildcards,
	// path prefixes) and on the API apex's: a request whose connection the upstream
	// refused (an in-place restart, a dead instance the passive check has not yet taken
	// out) is tried again instead of answering 502. Traefik retries only a request
	// whose headers were never written to a backend, so nothing is sent twice.
	//
	// RetryAttempts is Traefik's attempts: tries per request, the first one included.
	// 0 means DefaultRetryAttempts; 1 turns retries off (no middleware is rendered: a
	// one-try retry is a pass-through in Traefik); at most MaxRetryAttempts.
	// RetryInitialInterval (a Go duration, default DefaultRetryInitialInterval, at most
	// MaxRetryInitialInterval) is the first wait; Traefik grows each wait so that the
	// last is just under twice the first, and randomizes each by ±50% (RetryWaits).
	RetryAttempts        int
	RetryInitialInterval string
	// Front says a layer-4 front (node/front, `scafo-node front`) takes the fleet's TLS
	// port and routes passthrough names itself, by the exact name: the render then writes
	// no TCP router (and no TCP service) for a passthrough route, so Traefik, which folds
	// Unicode case and spaces (docs/passthrough.md), can never match a spelling of one.
	// The exclusions of passthrough hosts from covering wildcards and from the ACME
	// challenge router stay: a connection the front hands to Traefik for such a name
	// (never the exact name) still reaches no HTTP router.
	Front bool
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
	front           bool
	// retry is the retry middleware, nil when retries are off; middlewares is what
	// every application router lists (nil when off).
	retry       *dynamic.Retry
	middlewares []string
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
		front:           o.Front,
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
	if err := o.resolveRetry(&r); err != nil {
		return r, err
	}
	return r, nil
}

// resolveRetry fills r.retry and r.middlewares from the retry settings.
func (o Options) resolveRetry(r *resolved) error {
	attempts := o.RetryAttempts
	switch {
	case attempts == 0:
		attempts = DefaultRetryAttempts
	case attempts < 0:
		return optErr("retry.attempts", "%d must not be negative (1 turns retries off)", attempts)
	case attempts > MaxRetryAttempts:
		return optErr("retry.attempts", "%d is more than %d (every try of a refused request is a new connection)", attempts, MaxRetryAttempts)
	}
	iv := o.RetryInitialInterval
	if iv == "" {
		iv = DefaultRetryInitialInterval
	}
	d, err := time.ParseDuration(iv)
	switch {
	case err != nil:
		return optErr("retry.initialInterval", "%q is not a duration (\"200ms\", \"1s\")", iv)
	case d <= 0:
		// Traefik then retries at once: every attempt is spent within microseconds of a
		// refused connection, long before a restarting process listens again.
		return optErr("retry.initialInterval", "%q must be positive (Traefik retries without waiting otherwise)", iv)
	case d > MaxRetryInitialInterval:
		return optErr("retry.initialInterval", "%q is more than %s (each wait holds the request)", iv, MaxRetryInitialInterval)
	}
	if attempts == 1 {
		return nil // retries off
	}
	r.retry = &dynamic.Retry{Attempts: attempts, InitialInterval: d.String()}
	r.middlewares = []string{RetryMiddleware}
	return nil
}

// RetryWaits is what Traefik v3.6 waits in all, between the first try of a request
// and its last, with a retry middleware of attempts and initialInterval, when every try
// fails before the request reached the backend: at the least, nominally and at the
// most. From pkg/middlewares/retry/retry.go (newBackOff): a cenkalti/backoff/v4
// ExponentialBackOff with InitialInterval = initialInterval, Multiplier =
// 2^(1/(attempts-1)), the library's RandomizationFactor 0.5 and MaxInterval 60s; one
// wait before each of the attempts-1 retries. Wait k is initialInterval·m^k, drawn
// from ±50% of it, so the nominal sum is the geometric series
// initialInterval·(m^(attempts-1) - 1)/(m - 1) = initialInterval/(m - 1), the least is
// half of it and the most one and a half times it. One attempt, or a non-positive
// interval (Traefik's ZeroBackOff: retries at once), waits nothing.
func RetryWaits(attempts int, initialInterval time.Duration) (least, nominal, most time.Duration) {
	if attempts < 2 || initialInterval <= 0 {
		return 0, 0, 0
	}
	m := math.Pow(2, 1/float64(attempts-1))
	sum, cur := 0.0, float64(initialInterval)
	for range attempts - 1 {
		sum += math.Min(cur, float64(60*time.Second))
		cur *= m
	}
	return time.Duration(sum / 2), time.Duration(sum), time.Duration(sum * 3 / 2)
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
