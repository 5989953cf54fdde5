package scafo

import (
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// TestPassthroughHostsAreNeverRoutedNorApproved: this Caddy has no layer-4 routing, so
// a passthrough route's host (an application that terminates TLS itself) is never
// routed over HTTP, in any spelling, not even by the custom wildcard that covers it (its
// own route fails closed: 404), and on-demand TLS is never approved for it
// (ApplicationOf, which tls.permission.scafo asks, refuses it).
func TestPassthroughHostsAreNeverRoutedNorApproved(t *testing.T) {
	doc := decoded(t, &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "*.example.org", Application: "shop", Upstreams: ups("10.0.0.1:1")},
		{Host: "db.apps.example.com", Application: "db", Upstreams: ups("10.0.0.1:5"), Passthrough: true, ProxyProtocol: 2},
		{Host: "db.example.org", Application: "db", Upstreams: ups("10.0.0.1:5"), Passthrough: true, ProxyProtocol: 2},
		{Host: "shop.apps.example.com", Application: "shop", Upstreams: ups("10.0.0.1:1")},
	}})
	for _, tbl := range []*Table{NewTable(doc), NewGroupTable(doc, []string{"default"})} {
		for _, h := range []string{"db.example.org", "DB.example.org", "db.example.org.", "db.example.org:443", "db.apps.example.com"} {
			if sel := tbl.Lookup(h, "/x"); sel.Kind != KindNone {
				t.Fatalf("Lookup(%q) = %+v, want nothing (404)", h, sel)
			}
		}
		for _, n := range []string{"db.example.org", "db.apps.example.com"} {
			if tbl.Allowed(n) {
				t.Fatalf("Allowed(%q): a passthrough host approved for a certificate", n)
			}
			if _, ok := tbl.ApplicationOf(n); ok {
				t.Fatalf("ApplicationOf(%q) ok: tls.permission.scafo would approve it", n)
			}
		}
		if sel := tbl.Lookup("other.example.org", "/"); sel.Application != "shop" {
			t.Fatalf("the wildcard stopped routing its other names: %+v", sel)
		}
		if !tbl.Allowed("shop.apps.example.com") {
			t.Fatal("an HTTP host lost its approval")
		}
	}
}
