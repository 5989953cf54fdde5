package fleet

import (
	"slices"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// TestAnApplicationsMiddlewaresGoOnEveryRouteOfIt: every route of an application with
// middlewares (its platform host, its claims) carries its list in order; no other
// route does; the document passes Validate.
func TestAnApplicationsMiddlewaresGoOnEveryRouteOfIt(t *testing.T) {
	st := sampleState()
	mw := []string{"auth@file", "www-redirect@file"}
	st.Apps[2].Middlewares = mw // tito-go
	d, _ := Derive(st, opts())
	if err := d.Validate(); err != nil {
		t.Fatalf("derived document invalid: %v", err)
	}
	for _, r := range d.Routes {
		want := []string(nil)
		if r.Application == "tito-go" {
			want = mw
		}
		if !slices.Equal(r.Middlewares, want) {
			t.Errorf("%s (%s): middlewares %v, want %v", r.Host, r.Application, r.Middlewares, want)
		}
	}
	if r := routeFor(t, d, "go.tito.io"); r == nil || len(r.Middlewares) != 2 {
		t.Fatalf("go.tito.io: %+v", r)
	}
}

// TestAStoredSettingTheAPIRefusesSkipsTheApplication: a list the API refuses (a bad
// reference, a name twice, middlewares on a passthrough application), written to the
// store by hand, skips the application and reports it: its hosts are held by nobody
// (claims: scafo-unowned, 503) rather than served without what the list asked for, and
// the document stays valid. So does a PROXY protocol setting the instance cannot expect
// (other than 2, or without passthrough): a PROXY header it does not expect breaks every
// connection, so the application is skipped rather than guessed.
func TestAStoredSettingTheAPIRefusesSkipsTheApplication(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*App)
		reason string
	}{
		{"bad reference", func(a *App) { a.Middlewares = []string{"auth"} }, "name@provider"},
		{"twice", func(a *App) { a.Middlewares = []string{"auth@file", "auth@file"} }, "listed twice"},
		{"passthrough", func(a *App) { a.Middlewares, a.Passthrough, a.Health = []string{"auth@file"}, true, nil }, "passthrough"},
		{"proxy protocol 1", func(a *App) { a.Passthrough, a.ProxyProtocol, a.Health = true, 1, nil }, "proxyProtocol"},
		{"proxy protocol 3", func(a *App) { a.Passthrough, a.ProxyProtocol, a.Health = true, 3, nil }, "proxyProtocol"},
		{"proxy protocol without passthrough", func(a *App) { a.ProxyProtocol = 2 }, "proxyProtocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sampleState()
			st.Claims[0].Paths = nil // ti.to's prefixes target go.tito.io
			tc.edit(&st.Apps[2])
			d, sk := Derive(st, opts())
			if err := d.Validate(); err != nil {
				t.Fatalf("derived document invalid: %v", err)
			}
			requireSkipped(t, sk, AppKey("tito-go"), tc.reason)
			for _, r := range d.Routes {
				if r.Application == "tito-go" || len(r.Middlewares) > 0 {
					t.Fatalf("%s routed: %+v", r.Host, r)
				}
			}
			if r := routeFor(t, d, "go.tito.io"); r == nil || len(r.Upstreams) != 0 || r.Application != routing.UnownedApplication {
				t.Fatalf("go.tito.io = %+v: want held by %s with no upstream (fail closed)", r, routing.UnownedApplication)
			}
		})
	}
}
