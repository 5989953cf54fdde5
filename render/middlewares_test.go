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

// TestEveryRouterListsItsApplicationsMiddlewaresThenRetry: every router to an
// application lists that application's middlewares in the document's order, then the
// retry middleware (absent when retries are off). A host router (an exact host, a custom
// wildcard) lists its own application's; a path router, per prefix or in the grouped
// PathRegexp form, on an exact host or a custom wildcard, those of the application its
// prefix selects (the route supplies everything else), never the host's own; the API
// apex's and the path guards' none of them.
func TestEveryRouterListsItsApplicationsMiddlewaresThenRetry(t *testing.T) {
	shop, titoGo := []string{"ip-allow@file", "compress@file"}, []string{"auth@file"}
	for _, opt := range []Options{{}, {RetryAttempts: 1}, {PathGroupThreshold: 1}} {
		retry := []string{RetryMiddleware}
		if opt.RetryAttempts == 1 {
			retry = nil
		}
		with := func(mw []string) []string { return append(slices.Clone(mw), retry...) }
		want := map[string][]string{
			hostRouterName("*.shop.example.org"): with(shop), hostRouterName("shop.apps.example.com"): with(shop),
			hostRouterName("go.tito.io"): with(titoGo), hostRouterName("ti.to"): retry, hostRouterName("eu.tito.io"): retry,
			apiRouterName("apps.example.com"): retry, guardRouterName("ti.to"): nil, guardRouterName("*.shop.example.org"): nil,
			pathRouterName("*.shop.example.org", "tito"): with(titoGo),
		}
		if opt.PathGroupThreshold == 1 { // grouped above one prefix
			want[pathsRouterName("ti.to", "go.tito.io")], want[pathsRouterName("ti.to", "eu.tito.io")] = with(titoGo), retry
		} else {
			for _, p := range []string{"acct0000", "acct0001", "acct0002"} {
				want[pathRouterName("ti.to", p)] = with(titoGo)
			}
			want[pathRouterName("ti.to", "j.smith")], want[pathRouterName("ti.to", "x~y")] = retry, retry // tito-eu lists none
		}
		mw := routerMWs(t, middlewaresDoc(3), opt)
		for name, w := range want {
			if got, ok := mw[name]; !ok || !slices.Equal(got, w) {
				t.Errorf("%+v: router %s lists %v (present %v), want %v", opt, name, got, ok, w)
			}
		}
		for name := range mw {
			if _, ok := want[name]; !ok && (strings.HasPrefix(name, kindPath) || strings.HasPrefix(name, kindPaths)) {
				t.Errorf("%+v: path router %s not checked", opt, name)
			}
		}
	}
}
