package render

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/traefik/genconf/dynamic"
)

// retryRouterKinds says, by router kind (names.go), whether a router must carry the
// retry middleware: every router to an application or to the API does; the routers
// to the deny service (no servers: nothing to retry) and the ACME challenge router do
// not.
var retryRouterKinds = map[string]bool{
	kindHost: true, kindPath: true, kindPaths: true, kindAPI: true,
	kindGuard: false, kindDeny: false, "acme-": false,
}

// checkRetry holds cfg, rendered with opt, to the retry rules: the one middleware in
// http.middlewares with the resolved settings (none when retries are off), and on
// exactly the application and API routers.
func checkRetry(t *testing.T, opt Options, cfg Configuration) {
	t.Helper()
	o, err := opt.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP == nil {
		return
	}
	if o.retry == nil {
		if cfg.HTTP.Middlewares != nil {
			t.Errorf("retries off, but http.middlewares is %+v", cfg.HTTP.Middlewares)
		}
	} else {
		m := cfg.HTTP.Middlewares
		if len(m) != 1 || m[RetryMiddleware] == nil || m[RetryMiddleware].Retry == nil || *m[RetryMiddleware].Retry != *o.retry {
			t.Errorf("http.middlewares %+v, want only %s: %+v", m, RetryMiddleware, *o.retry)
		}
	}
	referenced := false
	for name, r := range cfg.HTTP.Routers {
		kind, _, _ := strings.Cut(name, "-")
		want, known := retryRouterKinds[kind+"-"]
		if !known {
			t.Errorf("router %s: kind %q unknown to the retry rules", name, kind)
			continue
		}
		var wantMW []string
		if want {
			wantMW = o.middlewares
		}
		// An application's own middlewares (routing.Route.Middlewares) come first;
		// the retry middleware is last, and nowhere else.
		own := r.Middlewares[:len(r.Middlewares)-min(len(wantMW), len(r.Middlewares))]
		if !slices.Equal(r.Middlewares[len(own):], wantMW) || slices.Contains(own, RetryMiddleware) || (!want && len(own) > 0) {
			t.Errorf("router %s: middlewares %v, want its application's then %v", name, r.Middlewares, wantMW)
		}
		referenced = referenced || len(r.Middlewares) > 0
	}
	if o.retry != nil && len(cfg.HTTP.Routers) > 0 && !referenced {
		t.Error("the retry middleware is written but no router references it")
	}
}

// TestRetryIsOnEveryApplicationRouterAndNotOnTheChallengeRouter: a fleet-certificate
// render (ACME challenge router, deny and guard routers) with retries on by default,
// with other settings and off (then nothing of the middleware is written). Every golden
// case: TestEveryCaseSatisfiesTheChainInvariants; path maps in both router forms, on and
// off: TestEveryRouterListsItsApplicationsMiddlewaresThenRetry.
func TestRetryIsOnEveryApplicationRouterAndNotOnTheChallengeRouter(t *testing.T) {
	for _, opt := range []Options{{}, {RetryAttempts: 3, RetryInitialInterval: "1s"}, {RetryAttempts: 1}} {
		out := mustTraefikFleet(t, acmeDoc(), opt, acmeCerts())
		cfg := decodeStrict(t, out)
		checkRetry(t, opt, cfg)
		if opt.RetryAttempts == 1 && bytes.Contains(out, []byte("middlewares")) {
			t.Errorf("retries off, but the render mentions middlewares: %s", out)
		}
		if r := cfg.HTTP.Routers[routerACMEChallenge]; r == nil || len(r.Middlewares) != 0 {
			t.Errorf("%+v: challenge router %+v: want one, without middlewares", opt, r)
		}
	}
}

// TestRetryWaitsFollowTraefiksBackoff: the sums of Traefik's backoff (retry.go,
// newBackOff: multiplier 2^(1/(attempts-1)), ±50%), computed by hand; and the zero
// Options resolve to the defaults, which by that backoff wait at least 1.5 s in all
// (a one-second restart) even when every wait is drawn at the low end, and at most 5 s.
func TestRetryWaitsFollowTraefiksBackoff(t *testing.T) {
	o, err := Options{}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	want := dynamic.Retry{Attempts: DefaultRetryAttempts, InitialInterval: DefaultRetryInitialInterval}
	if o.retry == nil || *o.retry != want || !slices.Equal(o.middlewares, []string{RetryMiddleware}) {
		t.Fatalf("zero Options resolve to retry %+v, middlewares %v; want %+v on %s", o.retry, o.middlewares, want, RetryMiddleware)
	}
	iv, _ := time.ParseDuration(DefaultRetryInitialInterval)
	if least, _, most := RetryWaits(DefaultRetryAttempts, iv); least < 1500*time.Millisecond || most > 5*time.Second {
		t.Errorf("the defaults %d × %s wait %s to %s: want at least 1.5s, at most 5s", DefaultRetryAttempts, iv, least, most)
	}
	for _, tc := range []struct {
		attempts int
		initial  time.Duration
		nominal  time.Duration // initial / (2^(1/(attempts-1)) - 1)
	}{
		{1, time.Second, 0}, // one try: no wait
		{2, 100 * time.Millisecond, 100 * time.Millisecond}, // one retry: the initial wait
		{3, 100 * time.Millisecond, 241421356 * time.Nanosecond},
		{5, 100 * time.Millisecond, 528482 * time.Microsecond}, // not 1.5s: the waits do not double
		{12, 200 * time.Millisecond, 3074999 * time.Microsecond},
	} {
		least, nominal, most := RetryWaits(tc.attempts, tc.initial)
		if d := nominal - tc.nominal; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("%d × %s: nominal %s, want %s", tc.attempts, tc.initial, nominal, tc.nominal)
		}
		if near := func(a, b time.Duration) bool { return a-b <= 1 && b-a <= 1 }; !near(least, nominal/2) || !near(most, nominal*3/2) {
			t.Errorf("%d × %s: least %s, most %s, want half and one and a half of %s", tc.attempts, tc.initial, least, most, nominal)
		}
	}
	if _, n, _ := RetryWaits(5, 0); n != 0 {
		t.Errorf("a zero interval (Traefik: no wait) waits %s", n)
	}
}
