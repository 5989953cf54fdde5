package scafo

import (
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/scafo/ingress/render/routing"
)

// TestApplicationsWithMiddlewaresFailClosedAndAreLogged: this Caddy cannot apply a
// Traefik middleware (routing.Route.Middlewares), and one may be the application's
// authentication, so an application that lists any is never served here without
// them: its hosts answer 503 (a route without dials; no covering wildcard takes them),
// a prefix that selects it answers 503 rather than falling through to the host's own
// application, and its names stay approved for certificates (the 503 is delivered over
// HTTPS). The poller logs the applications once per change: a WARN naming each with
// its middlewares, an INFO when none is left.
func TestApplicationsWithMiddlewaresFailClosedAndAreLogged(t *testing.T) {
	mw := []string{"auth@file", "www-redirect@file"}
	doc := decoded(t, &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "*.example.org", Application: "shop", Upstreams: ups("10.0.0.1:1")},
		{Host: "secure.example.org", Application: "secure", Upstreams: ups("10.0.0.1:7"), Middlewares: mw},
		{Host: "ti.to", Application: "legacy", Upstreams: ups("10.0.0.1:3"),
			Paths: map[string]string{"paulca": "secure.example.org", "bob": "shop.apps.example.com"}},
		{Host: "shop.apps.example.com", Application: "shop", Upstreams: ups("10.0.0.1:1")},
	}})
	tbl := NewTable(doc)
	for _, c := range []struct {
		host, path, app string
		dials           int
	}{
		{"secure.example.org", "/", "secure", 0},
		{"Secure.Example.org:443", "/admin", "secure", 0},
		{"ti.to", "/paulca/x", "secure", 0},
		{"ti.to", "/x/../paulca/x", "secure", 0},
		{"ti.to", "/bob", "shop", 1},
		{"ti.to", "/other", "legacy", 1},
		{"other.example.org", "/", "shop", 1},
	} {
		sel := tbl.Lookup(c.host, c.path)
		if sel.Kind != KindRoute || sel.Application != c.app || len(sel.Dials) != c.dials {
			t.Errorf("Lookup(%q, %q) = %+v, want application %s with %d dials", c.host, c.path, sel, c.app, c.dials)
		}
	}
	if !tbl.Allowed("secure.example.org") {
		t.Error("secure.example.org not approved for a certificate: its 503 would be a TLS failure")
	}
	want := []string{"secure (auth@file, www-redirect@file)"}
	if got := tbl.Unapplied(); !slices.Equal(got, want) {
		t.Fatalf("Unapplied() = %q, want %q", got, want)
	}

	core, logs := observer.New(zap.InfoLevel)
	p := &Poller{log: zap.New(core)}
	p.warnUnapplied(nil, tbl)
	p.warnUnapplied(tbl, NewTable(doc)) // the same applications: nothing new
	plain := &routing.Document{V: 1, Routes: doc.Routes[3:]}
	plain.Seal()
	p.warnUnapplied(tbl, NewTable(plain))
	entries := logs.All()
	if len(entries) != 2 || entries[0].Level != zapcore.WarnLevel || entries[1].Level != zapcore.InfoLevel {
		t.Fatalf("logged %+v, want one WARN then one INFO", entries)
	}
	if got, ok := entries[0].ContextMap()["applications"].([]interface{}); !ok || len(got) != 1 || got[0] != want[0] {
		t.Fatalf("the WARN names %v, want %q", entries[0].ContextMap()["applications"], want)
	}
}
