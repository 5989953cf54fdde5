package fleetcerts

import (
	"slices"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// TestFleetCertificatesNeverNameAPassthroughHost: the application of a passthrough
// route holds its own certificate (the client verifies it, not the ingress's), so no
// policy orders one for its hosts: not Names, not the DNS-01 policy (whose platform
// wildcard a passthrough platform host alone must not order).
func TestFleetCertificatesNeverNameAPassthroughHost(t *testing.T) {
	ups := []routing.Upstream{{Node: "vps-a", Address: "10.83.0.1:24000", APIPort: 7400}}
	doc := &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "db.apps.example.com", Application: "db", Upstreams: ups, Passthrough: true},
		{Host: "db.example.org", Application: "db", Upstreams: ups, Passthrough: true},
		{Host: "web.example.org", Application: "web", Upstreams: ups},
	}}
	names, _ := Names(doc, []string{"apps.example.com"}, false)
	if !slices.Equal(names, []string{"web.example.org"}) {
		t.Fatalf("Names = %v, want only web.example.org", names)
	}
	for _, d := range []*DNS01{nil, {Platform: true}} {
		m := &Manager{opt: Options{PlatformDomains: []string{"apps.example.com"}, DNS01: d}}
		if p := m.policy(doc); !slices.Equal(p.names, []string{"web.example.org"}) {
			t.Fatalf("DNS01 %+v: policy names = %v, want only web.example.org", d, p.names)
		}
	}
}
