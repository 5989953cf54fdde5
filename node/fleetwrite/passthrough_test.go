package fleetwrite

import (
	"context"
	"errors"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// wantInvalid fails unless err is an *ErrInvalid naming field, and the store's serial
// did not move (bad input changes nothing).
func wantInvalid(t *testing.T, f *fixture, serial string, err error, field string) {
	t.Helper()
	var inv *ErrInvalid
	if !errors.As(err, &inv) || inv.Field != field {
		t.Fatalf("got %v, want a 400 naming %s", err, field)
	}
	if got := f.serial(t); got != serial {
		t.Fatalf("a refused write moved the serial %q -> %q", serial, got)
	}
}

// TestPassthroughHostsAreExactAndPathless: a wildcard claim of a passthrough
// application is a 400 naming host; a path map on its host is a 400 naming paths; a
// prefix of another claim targeting its claim or its platform host is a 400 naming that
// prefix; turning passthrough on for an application that holds a wildcard, has a path
// map, or is a path map's target is a 400 naming passthrough.
func TestPassthroughHostsAreExactAndPathless(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	putApp(t, f.w, "db", fleet.App{Account: "acme", Passthrough: true}, "")
	f.app(t, "web", "acme")
	serial := f.serial(t)
	_, _, _, err := f.w.Claim(ctx, admin, "db", "*.db.example.org")
	wantInvalid(t, f, serial, err, "host")

	for _, h := range []string{"db.example.org", "www.example.org"} {
		app := map[string]string{"db.example.org": "db", "www.example.org": "web"}[h]
		if _, _, _, err := f.w.Claim(ctx, admin, app, h); err != nil {
			t.Fatalf("exact claim %s: %v", h, err)
		}
	}
	serial = f.serial(t)
	_, _, err = f.w.PublishPaths(ctx, admin, "db", "db.example.org", map[string]string{"x": "www.example.org"}, "")
	wantInvalid(t, f, serial, err, "paths")
	_, _, err = f.w.PublishPaths(ctx, admin, "web", "www.example.org", map[string]string{"a": "web.apps.example.com", "db": "db.example.org"}, "")
	wantInvalid(t, f, serial, err, `paths["db"]`)
	_, _, err = f.w.PublishPaths(ctx, admin, "web", "www.example.org", map[string]string{"db": "db.apps.example.com"}, "")
	wantInvalid(t, f, serial, err, `paths["db"]`)
	if _, _, err := f.w.PublishPaths(ctx, admin, "db", "db.example.org", nil, ""); err != nil {
		t.Fatalf("clearing a passthrough host's (empty) path map: %v", err)
	}

	// Turning passthrough on: web is a path target, then has a path map, then a wildcard.
	f.app(t, "api", "acme")
	claim(t, f.w, "api", "api.example.org")
	if _, _, err := f.w.PublishPaths(ctx, admin, "web", "www.example.org", map[string]string{"v1": "api.example.org"}, ""); err != nil {
		t.Fatal(err)
	}
	serial = f.serial(t)
	_, _, _, err = f.w.PutApp(ctx, admin, "api", fleet.App{Account: "acme", Passthrough: true}, "")
	wantInvalid(t, f, serial, err, "passthrough")
	_, _, _, err = f.w.PutApp(ctx, admin, "web", fleet.App{Account: "acme", Passthrough: true}, "")
	wantInvalid(t, f, serial, err, "passthrough")
	f.app(t, "shop", "acme")
	claim(t, f.w, "shop", "*.shop.example.org")
	serial = f.serial(t)
	_, _, _, err = f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Passthrough: true}, "")
	wantInvalid(t, f, serial, err, "passthrough")
}

// TestPassthroughChecksStayInsideTheAccount: the passthrough checks count only the
// application's own account. A tenant's path map aimed at another account's hosts (a
// passthrough claim, a passthrough platform host, an HTTP host about to turn
// passthrough) is accepted like a map naming a host nobody holds, before and after
// passthrough is turned on, and never answers with a name of the other account; it
// does not keep the admin from turning passthrough on for that other application.
// Derivation drops such entries whatever the writes accepted ("target belongs to
// another account", render/fleet TestPathMapsStayWithinOneAccount), so nothing of
// mallory's is ever routed into acme's hosts.
func TestPassthroughChecksStayInsideTheAccount(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	putApp(t, f.w, "db", fleet.App{Account: "acme", Passthrough: true}, "")
	f.app(t, "api", "acme")
	evil := f.app(t, "evil", "mallory")
	for host, app := range map[string]string{"db.example.org": "db", "api.example.org": "api", "evil.example.org": "evil"} {
		if _, _, _, err := f.w.Claim(ctx, admin, app, host); err != nil {
			t.Fatalf("claim %s: %v", host, err)
		}
	}
	tok := Actor{Token: fleet.TokenRecord{ID: "0123456789abcdef", Account: "mallory", App: "evil", AppID: evil.ID, Roles: []string{fleet.RolePublish}}}
	publish := func(paths map[string]string) {
		t.Helper()
		c, _, err := f.w.PublishPaths(ctx, tok, "evil", "evil.example.org", paths, "")
		if err != nil {
			t.Errorf("mallory's map %v: %v; want it accepted as one naming hosts nobody holds (no name of acme's)", paths, err)
			return
		}
		if len(c.Paths) != len(paths) {
			t.Errorf("mallory's map stored %v, want %v", c.Paths, paths)
		}
	}
	// mallory's map targets both of api's hosts: the admin still turns passthrough on.
	publish(map[string]string{"api": "api.example.org", "apip": "api.apps.example.com"})
	if _, _, _, err := f.w.PutApp(ctx, admin, "api", fleet.App{Account: "acme", Passthrough: true}, ""); err != nil {
		t.Errorf("turning passthrough on for acme's api, which only another account's map targets: %v", err)
	}
	// The answer for another account's passthrough hosts is the answer for a host that
	// routes nothing: accepted, the same warning at the API (node/httpapi pathWarnings).
	publish(map[string]string{"none": "nothing.example.org"})
	publish(map[string]string{"none": "nothing.example.org", "db": "db.example.org", "dbp": "db.apps.example.com"})
	publish(map[string]string{"none": "nothing.example.org", "db": "db.example.org", "dbp": "db.apps.example.com",
		"api": "api.example.org", "apip": "api.apps.example.com"})

	// Inside the account the checks still bite: acme's own map on api's host is refused.
	f.app(t, "web", "acme")
	claim(t, f.w, "web", "www.example.org")
	serial := f.serial(t)
	_, _, err := f.w.PublishPaths(ctx, admin, "web", "www.example.org", map[string]string{"api": "api.example.org"}, "")
	wantInvalid(t, f, serial, err, `paths["api"]`)
}
