package scafo

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/scafo/ingress/internal/fakenode"
	"github.com/scafo/ingress/internal/follow"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

// The poller's loop is internal/follow's, tested there (the long-poll, the next node on
// a failure, the last document through 503s and outages, never an older serial, no spin
// on a node without ETags, the state file, ?group=). These tests are of what the Caddy
// module makes of it: the table and its group, the report as a plugin, the permission
// that reads the table, and a state file read back into a table.

// hostsDoc routes each host to one application.
func hostsDoc(hosts ...string) *routing.Document {
	d := &routing.Document{V: 1}
	for _, h := range hosts {
		d.Routes = append(d.Routes, routing.Route{Host: h, Application: "app", Upstreams: ups("10.0.0.1:1")})
	}
	d.Seal()
	return d
}

func routes(host string) func(*Table) bool {
	return func(tab *Table) bool { return tab.Lookup(host, "/").Kind == KindRoute }
}

// startTestPoller polls n (never started when n is nil: the test hands documents to
// apply, as the follower does).
func startTestPoller(t *testing.T, n *fakenode.Node, cfg PollerConfig) *Poller {
	t.Helper()
	cfg.Endpoints, cfg.Token, cfg.Name = []string{"http://127.0.0.1:1"}, fakenode.Token, "caddy-test"
	if n != nil {
		cfg.Endpoints = []string{n.URL()}
	}
	p, err := NewPoller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n != nil {
		p.Start()
		t.Cleanup(p.Stop)
	}
	return p
}

// A flip reaches the table through a long-poll: with the retry interval at an hour,
// only a held request that the node answers when its revision moves can deliver it.
// The table carries the node's ETag and serial; the poller reports itself as a plugin
// and asks for its group (?group=; hostsDoc's routes are of the default group).
func TestPollerAppliesAFlipWithinOneLongPoll(t *testing.T) {
	n := fakenode.New(t, "")
	n.SetDoc(t, 1, hostsDoc("shop.apps.example.com"))
	p := startTestPoller(t, n, PollerConfig{Wait: 20 * time.Second, Interval: time.Hour, Group: routing.DefaultGroup})
	waitTable(t, p, "shop", routes("shop.apps.example.com"))
	n.SetDoc(t, 2, hostsDoc("shop.apps.example.com", "bob.apps.example.com"))
	tab := waitTable(t, p, "bob", routes("bob.apps.example.com"))
	if tab.ETag == "" || !tab.HasSerial || tab.Serial != 2 {
		t.Fatalf("table without the node's ETag or serial: %+v", tab)
	}
	for _, r := range n.Requests() {
		if r.Ingress != "caddy-test" || r.Kind != api.KindPlugin || r.Via != "scafo-caddy" || r.Group != routing.DefaultGroup {
			t.Fatalf("poll %+v: want the ingress report of plugin caddy-test, for group default", r)
		}
	}
}

// A Caddy restarted with no node answering routes from the state file.
func TestAPollerWithNoNodeAnsweringRoutesFromTheStateFile(t *testing.T) {
	n := fakenode.New(t, "")
	n.SetDoc(t, 2, hostsDoc("shop.apps.example.com", "bob.apps.example.com"))
	cfg := PollerConfig{StateFile: filepath.Join(t.TempDir(), "routes.json")}
	p := startTestPoller(t, n, cfg)
	waitTable(t, p, "bob", routes("bob.apps.example.com"))
	p.Stop()
	n.Srv.Close()
	tab := startTestPoller(t, nil, cfg).Table()
	if tab == nil || !routes("bob.apps.example.com")(tab) || !routes("shop.apps.example.com")(tab) || tab.Serial != 2 {
		t.Fatalf("restarted with no node: table from the state file = %+v, want shop and bob at serial 2", tab)
	}
}

// The permission module answers from the document held by the poller, exactly, and
// follows the current document: a name whose route is gone is refused from the next
// document on.
func TestPermissionFollowsTheCurrentDocumentExactly(t *testing.T) {
	doc := func(hosts ...string) *follow.Held {
		d := &routing.Document{V: 1, API: &routing.API{Hosts: []string{"apps.example.com"}, Upstreams: ups("10.0.0.9:7400"), Denied: routing.DeniedAPIPrefixes}}
		for _, h := range hosts {
			d.Routes = append(d.Routes, routing.Route{Host: h, Application: "shop", Upstreams: ups("10.0.0.1:1")})
		}
		d.Seal()
		return &follow.Held{Doc: d}
	}
	p := startTestPoller(t, nil, PollerConfig{})
	perm := &Permission{app: &App{poller: p}}
	p.apply(doc("*.shop.example.org", "shop.apps.example.com", "shop.example.org"))

	ctx := context.Background()
	for _, name := range []string{"shop.example.org", "shop.apps.example.com", "apps.example.com"} {
		if err := perm.CertificateAllowed(ctx, name); err != nil {
			t.Errorf("CertificateAllowed(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"a.shop.example.org", "*.shop.example.org", "SHOP.example.org", "shop.example.org.",
		"shop.example.org:443", "127.0.0.1", "[::1]", "::1", "x.shop.apps.example.com", "", "shop.example.org\x00"} {
		if err := perm.CertificateAllowed(ctx, name); !errors.Is(err, caddytls.ErrPermissionDenied) {
			t.Errorf("CertificateAllowed(%q) = %v, want ErrPermissionDenied", name, err)
		}
	}

	p.apply(doc("*.shop.example.org", "shop.apps.example.com"))
	if err := perm.CertificateAllowed(ctx, "shop.example.org"); !errors.Is(err, caddytls.ErrPermissionDenied) {
		t.Fatalf("a name whose claim was removed: CertificateAllowed = %v, want ErrPermissionDenied", err)
	}
}

// A Caddy of one ingress group routes only that group's hosts. A group's document
// (?group=) also carries the routes its path maps target in other groups, for their
// upstreams only: Traefik renders no router for them ("their hosts are another
// group's"), and neither may Caddy route their host nor approve a certificate for it.
// The path map still reaches the target.
func TestGroupCaddyNeverRoutesAnotherGroupsHost(t *testing.T) {
	doc := euDoc()
	if routeOf(doc, "go.tito.io") == nil {
		t.Fatal("the group document does not carry the path target; the test proves nothing")
	}
	p := startTestPoller(t, nil, PollerConfig{Group: "eu"})
	p.apply(&follow.Held{Doc: doc})
	tab := p.Table()
	if sel := tab.Lookup("go.tito.io", "/"); sel.Kind != KindNone {
		t.Errorf("go.tito.io (group us) routed by the eu Caddy: %+v", sel)
	}
	if tab.Allowed("go.tito.io") {
		t.Error("on-demand TLS approves go.tito.io, a host of group us")
	}
	if sel := tab.Lookup("ti.to", "/paulca/x"); sel.Target != "go.tito.io" || len(sel.Dials) != 1 || sel.Dials[0] != "10.0.0.1:4" {
		t.Errorf("ti.to/paulca: %+v, want the target go.tito.io", sel)
	}
	if sel := tab.Lookup("ti.to", "/"); sel.Kind != KindRoute || sel.Application != "tito-classic" {
		t.Errorf("ti.to: %+v", sel)
	}
	if !tab.Allowed("ti.to") {
		t.Error("ti.to not approved")
	}
}

// euDoc is group eu's document (?group=eu) of a fleet where ti.to (eu) maps /paulca to
// go.tito.io (us), beside other.example.org (us).
func euDoc() *routing.Document {
	full := &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "go.tito.io", Application: "tito-go", Group: "us", Upstreams: ups("10.0.0.1:4")},
		{Host: "other.example.org", Application: "other", Group: "us", Upstreams: ups("10.0.0.1:5")},
		{Host: "ti.to", Application: "tito-classic", Group: "eu", Upstreams: ups("10.0.0.1:3"),
			Paths: map[string]string{"paulca": "go.tito.io"}},
	}}
	full.Seal()
	return routing.ForGroups(full, []string{"eu"})
}
