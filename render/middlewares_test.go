package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// middlewaresDoc is sampleDoc(nPrefixes) with operator middlewares: shop (a custom
// wildcard and a platform host) lists two, tito-go one; tito-classic (ti.to, whose path
// map selects go.tito.io and eu.tito.io) and tito-eu none. The wildcard has a path map
// too, selecting go.tito.io.
func middlewaresDoc(nPrefixes int) *routing.Document {
	d := sampleDoc(nPrefixes)
	for i := range d.Routes {
		r := &d.Routes[i]
		switch r.Application {
		case "shop":
			r.Middlewares = []string{"ip-allow@file", "compress@file"}
		case "tito-go":
			r.Middlewares = []string{"auth@file"}
		}
		if r.Host == "*.shop.example.org" {
			r.Paths = map[string]string{"tito": "go.tito.io"}
		}
	}
	d.Seal()
	return d
}

// routerMWs renders doc with opt and returns every router's middlewares by router name.
func routerMWs(t *testing.T, doc *routing.Document, opt Options) map[string][]string {
	t.Helper()
	out := mustTraefik(t, doc, opt)
	cfg := decodeStrict(t, out)
	checkRetry(t, opt, cfg)
	m := map[string][]string{}
	for name, r := range cfg.HTTP.Routers {
		m[name] = r.Middlewares
	}
	if _, ok := cfg.HTTP.Middlewares["auth"]; ok || len(cfg.HTTP.Middlewares) > 1 {
		t.Errorf("http.middlewares %v: the render defines no operator middleware", cfg.HTTP.Middlewares)
	}
	return m
}

// TestMiddlewaresGoOnEveryRouterOfTheApplicationInOrder: every host router of an
// application (its exact hosts and its custom wildcard) lists the application's
// middlewares in the document's order, then the retry middleware (absent when retries
// are off); the routers of other applications, the API apex's and the path guards list
// none of them.
func TestMiddlewaresGoOnEveryRouterOfTheApplicationInOrder(t *testing.T) {
	for _, opt := range []Options{{}, {RetryAttempts: 1}} {
		retry := []string{RetryMiddleware}
		if opt.RetryAttempts == 1 {
			retry = nil
		}
		mw := routerMWs(t, middlewaresDoc(3), opt)
		want := map[string][]string{
			hostRouterName("*.shop.example.org"):    append([]string{"ip-allow@file", "compress@file"}, retry...),
			hostRouterName("shop.apps.example.com"): append([]string{"ip-allow@file", "compress@file"}, retry...),
			hostRouterName("go.tito.io"):            append([]string{"auth@file"}, retry...),
			hostRouterName("ti.to"):                 retry,
			hostRouterName("eu.tito.io"):            retry,
			apiRouterName("apps.example.com"):       retry,
			guardRouterName("ti.to"):                nil,
			guardRouterName("*.shop.example.org"):   nil,
		}
		for name, w := range want {
			got, ok := mw[name]
			if !ok {
				t.Fatalf("retry %v: no router %s (have %v)", retry, name, mw)
			}
			if !slices.Equal(got, w) {
				t.Errorf("retry %v: router %s lists %v, want %v", retry, name, got, w)
			}
		}
	}
}

// TestPathRoutersCarryTheSelectedApplicationsMiddlewares: a prefix selects a route and
// the route supplies everything else: each path router (per prefix, and the grouped
// PathRegexp form) lists the middlewares of the application it selects, never those of
// the host's own application; on an exact host and on a custom wildcard.
func TestPathRoutersCarryTheSelectedApplicationsMiddlewares(t *testing.T) {
	for _, threshold := range []int{0, 1} { // per-prefix routers; grouped above one prefix
		mw := routerMWs(t, middlewaresDoc(3), Options{PathGroupThreshold: threshold})
		n := 0
		for name, got := range mw {
			var want []string
			switch {
			case strings.HasPrefix(name, kindPath+"ti_to.acct"), name == pathsRouterName("ti.to", "go.tito.io"),
				name == pathRouterName("*.shop.example.org", "tito"), name == pathsRouterName("*.shop.example.org", "go.tito.io"):
				want = []string{"auth@file", RetryMiddleware} // tito-go's
			case strings.HasPrefix(name, kindPath+"ti_to."), name == pathsRouterName("ti.to", "eu.tito.io"):
				want = []string{RetryMiddleware} // tito-eu lists none
			default:
				continue
			}
			n++
			if !slices.Equal(got, want) {
				t.Errorf("threshold %d: path router %s lists %v, want %v", threshold, name, got, want)
			}
		}
		if wantN := map[int]int{0: 6, 1: 3}[threshold]; n != wantN {
			t.Errorf("threshold %d: %d path routers checked, want %d (%v)", threshold, n, wantN, mw)
		}
	}
}
