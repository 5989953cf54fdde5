package render

import (
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// TestFleetWildcardCertificateIsDeliveredToTheGroupsOfTheHostsItCovers: a platform
// wildcard certificate (*.apps.example.com, no route of that name) goes to a group
// that routes a host one label under it, and not to a group that routes none.
func TestFleetWildcardCertificateIsDeliveredToTheGroupsOfTheHostsItCovers(t *testing.T) {
	doc := &routing.Document{V: routing.Version, Routes: []routing.Route{
		{Host: "a.apps.example.com", Application: "a", Upstreams: []routing.Upstream{}, Group: "g1"},
		{Host: "b.example.org", Application: "b", Upstreams: []routing.Upstream{}, Group: "g2"},
	}}
	fc := &FleetCerts{Managed: map[string]bool{"a.apps.example.com": true},
		Certificates: []Certificate{{Names: []string{"*.apps.example.com"}, CertFile: "WILDCARD-CERT", KeyFile: "WILDCARD-KEY"}}}
	for _, c := range []struct {
		group string
		want  bool
	}{{"g1", true}, {"g2", false}} {
		b, err := TraefikGroups(doc, Options{PlatformDomains: []string{"apps.example.com"}}, []string{c.group}, fc)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(b), "WILDCARD-CERT"); got != c.want {
			t.Fatalf("group %s: wildcard delivered %v, want %v", c.group, got, c.want)
		}
	}
}
