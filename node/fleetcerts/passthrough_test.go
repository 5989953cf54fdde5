package fleetcerts

import (
	"maps"
	"slices"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// TestAWildcardOrderedForHTTPHostsIsTheOnlyFleetCertificateOverAPassthroughHost: the
// mixed document (an HTTP application and a passthrough application, both with a
// platform host, the passthrough one with a custom domain too, under the HTTP
// application's custom wildcard of the same account). The documented exception
// (docs/design.md §10, "Passthrough names and wildcards"): a wildcard the fleet orders
// for HTTP names (the platform wildcard by DNS-01, a custom wildcard by delegation) is
// valid for the passthrough names one label under it, and is ordered exactly as
// without the passthrough application; the passthrough names themselves are never
// ordered, never covered (no bridge certificate of their own), and a wildcard never
// ordered for them alone: no policy orders anything for the passthrough application
// without the HTTP one (the application of a passthrough route holds its own
// certificate, which the client verifies).
func TestAWildcardOrderedForHTTPHostsIsTheOnlyFleetCertificateOverAPassthroughHost(t *testing.T) {
	ups := []routing.Upstream{{Node: "vps-a", Address: "10.83.0.1:24000", APIPort: 7400}}
	pds := []string{"apps.example.com"}
	mixed := &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "*.example.org", Application: "site", Upstreams: ups},
		{Host: "db.apps.example.com", Application: "db", Upstreams: ups, Passthrough: true},
		{Host: "db.example.org", Application: "db", Upstreams: ups, Passthrough: true},
		{Host: "web.apps.example.com", Application: "web", Upstreams: ups},
	}}
	httpOnly := &routing.Document{V: 1, Routes: []routing.Route{mixed.Routes[0], mixed.Routes[3]}}
	passthroughOnly := &routing.Document{V: 1, Routes: []routing.Route{mixed.Routes[1], mixed.Routes[2]}}
	for _, tc := range []struct {
		name    string
		opt     Options
		names   []string
		covered []string
	}{
		{"HTTP-01 only", Options{}, []string{"web.apps.example.com"}, nil},
		{"traefik.platformWildcardCerts", Options{PlatformWildcard: true}, nil, nil},
		{"dns01 platform and delegation", Options{DNS01: &DNS01{Platform: true, DelegationZone: "acme.fleet.example"}},
			[]string{"*.apps.example.com", "*.example.org"}, []string{"web.apps.example.com"}},
	} {
		tc.opt.PlatformDomains = pds
		m := &Manager{opt: tc.opt}
		p := m.policy(mixed)
		if !slices.Equal(p.names, tc.names) {
			t.Errorf("%s: names %v, want %v", tc.name, p.names, tc.names)
		}
		if got := slices.Sorted(maps.Keys(p.covered)); !slices.Equal(got, tc.covered) {
			t.Errorf("%s: covered %v, want %v (a passthrough host is never covered)", tc.name, got, tc.covered)
		}
		if want := m.policy(httpOnly); !slices.Equal(p.names, want.names) || !maps.Equal(p.dns, want.dns) {
			t.Errorf("%s: the passthrough application changed what is ordered: %v %v, without it %v %v", tc.name, p.names, p.dns, want.names, want.dns)
		}
		for _, n := range p.names {
			if n == "db.apps.example.com" || n == "db.example.org" {
				t.Errorf("%s: the fleet orders passthrough host %s", tc.name, n)
			}
		}
		if alone := m.policy(passthroughOnly); len(alone.names) != 0 {
			t.Errorf("%s: the passthrough application alone orders %v", tc.name, alone.names)
		}
		want := []string{"web.apps.example.com"}
		if tc.opt.PlatformWildcard {
			want = nil // left to the wildcard Traefik's resolver orders
		}
		if names, _ := Names(mixed, pds, tc.opt.PlatformWildcard); !slices.Equal(names, want) {
			t.Errorf("%s: Names %v, want %v", tc.name, names, want)
		}
	}
}
