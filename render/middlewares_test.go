package render

import (
	"bytes"
	"math/rand/v2"
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

// routerMWs renders doc with opt, checks that the incremental render writes the same
// bytes (fresh, then from cached fragments), and returns every router's middlewares
// by router name.
func routerMWs(t *testing.T, doc *routing.Document, opt Options) map[string][]string {
	t.Helper()
	out, err := Traefik(doc, opt)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := NewIncremental(opt)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := rendered(inc, Request{Doc: doc})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, out) {
			t.Fatalf("incremental render differs from the full render:\nfull: %s\ninc:  %s", out, got)
		}
	}
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

// TestARenderWithMiddlewaresIsByteStable: a document with middlewares renders the same
// bytes whatever the order of its routes and path maps, on every render, and the
// incremental render writes them too, from a cold cache and after other documents.
func TestARenderWithMiddlewaresIsByteStable(t *testing.T) {
	doc := middlewaresDoc(100)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, opt := range []Options{{}, {PathGroupThreshold: 10}} {
		want, err := Traefik(doc, opt)
		if err != nil {
			t.Fatal(err)
		}
		inc, err := NewIncremental(opt)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			s := shuffled(doc, rng)
			got, err := Traefik(s, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("a shuffled document with middlewares rendered different bytes")
			}
			if i%5 == 0 { // another document in between: its fragments are not these
				if _, err := rendered(inc, Request{Doc: sampleDoc(100)}); err != nil {
					t.Fatal(err)
				}
			}
			if got, err = rendered(inc, Request{Doc: s}); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("incremental render of a shuffled document differs (err %v)", err)
			}
		}
	}
}

// TestAMiddlewareChangeOfAPathTargetReachesTheRoutersThatSelectIt: when only the
// selected application's middlewares change, the path routers of another application's
// host (whose own inputs did not change) list the new ones: through the incremental
// render without a delta (its cached fragment of ti.to is not reused), and with a delta
// naming the changed routes (which renders in full: fleet.Deriver sends no delta for
// such a change).
func TestAMiddlewareChangeOfAPathTargetReachesTheRoutersThatSelectIt(t *testing.T) {
	before := middlewaresDoc(3)
	after := &routing.Document{V: before.V, API: before.API, Routes: slices.Clone(before.Routes)} // as a delta makes it
	var changed []int
	for i := range after.Routes {
		if after.Routes[i].Application == "tito-go" {
			after.Routes[i].Middlewares = []string{"www-redirect@file", "auth@file"}
			changed = append(changed, i)
		}
	}
	after.Seal()
	want, err := Traefik(after, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(want, []byte(`"`+pathRouterName("ti.to", "acct0000")+`":{"entryPoints":["web"],"middlewares":["www-redirect@file","auth@file","scafo-retry"]`)) {
		t.Fatalf("the full render's path router does not list the new middlewares: %s", want)
	}
	for _, delta := range []*routing.Delta{nil, {Base: before, Changed: changed}} {
		inc, err := NewIncremental(Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rendered(inc, Request{Doc: before}); err != nil {
			t.Fatal(err)
		}
		got, err := rendered(inc, Request{Doc: after, Delta: delta})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			i := firstDiff(got, want)
			t.Fatalf("delta %v: incremental render differs at byte %d\nfull: %s\ninc:  %s", delta != nil, i, excerpt(want, i), excerpt(got, i))
		}
	}
}
