// Regressions found by the second hostile-tenant review (each failed before its fix).

package fleetwrite

// Proof-of-concept tests from the second hostile review (branch attack2). Each one
// FAILS while the defect it names is present.

import (
	"context"
	"errors"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// TestTheSweepNeverReleasesANewIncarnationsInstance: SweepOrphans decides on the
// instance it saw (incarnation 1) and then calls Registry.Release(app), which releases
// whatever instance the name has *now*. When the application is recreated and its new
// instance allocated between the sweep's read and its release, the live instance of
// the new incarnation is released (its port quarantined, its route withdrawn) although
// it belongs to an application that exists.
// Expected: the new incarnation's instance survives the sweep. Actual: released.
// Fix: Registry.Release conditional on the incarnation (ReleaseIf(app, appID)), used by
// SweepOrphans with inst.AppID.
func TestTheSweepNeverReleasesANewIncarnationsInstance(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	if _, _, err := f.w.AllocateInstance(ctx, admin, "shop"); err != nil {
		t.Fatal(err)
	}
	// The sweep's confirming read of shop's object answers "not found" (deleted on
	// another node), after what happens in that instant: the admin recreates shop and
	// its supervisor allocates the new incarnation's instance on this node.
	var newInst Instance
	armed := true
	f.w.st = &hooks{Store: f.st, get: func(key string) error {
		if !armed || key != fleet.AppKey("shop") {
			return nil
		}
		armed = false
		if err := f.st.Delete(ctx, fleet.AppKey("shop"), ""); err != nil {
			t.Fatal(err)
		}
		a, _, _, err := f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme"}, "")
		if err != nil {
			t.Fatal(err)
		}
		inst, created, err := f.w.AllocateInstance(ctx, admin, "shop")
		if err != nil || !created {
			t.Fatalf("new incarnation %s: allocate %+v created=%v err=%v", a.ID, inst, created, err)
		}
		newInst = inst
		return store.ErrNotFound
	}}
	released, err := f.w.SweepOrphans(ctx, map[string]string{}) // a view without shop
	if err != nil {
		t.Fatal(err)
	}
	f.w.st = f.st
	if _, ok := f.w.inst.Get("shop"); !ok {
		t.Fatalf("the sweep released %v: the live instance of the recreated application (port %d) is gone", released, newInst.Port)
	}
}

// TestAPutOverAnUnreadableAppIsDeliberateAndANewIncarnation: PutApp decodes the current
// object to keep its id and its account; when that object is unreadable, old is the
// zero App, so the application is rewritten with id "" (no incarnation at all) and
// the account-change refusal is skipped. Every node then stops routing the app's
// instances (their appId is the old id), sweeps release them, its tokens stop working,
// and the empty id matches any instance or token record without an appId.
// Expected: an unreadable current object is treated as a new incarnation (a freshly
// minted id) or refused. Actual: id "".
func TestAPutOverAnUnreadableAppIsDeliberateAndANewIncarnation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	if _, err := f.st.Put(ctx, fleet.AppKey("shop"), []byte(`{"name":"shop","account":`), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	// Without If-Match, replacing an object whose account and incarnation are unknown
	// is refused; with it, the replacement is a new incarnation.
	var c *ErrConflict
	if _, _, _, err := f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "other"}, ""); !errors.As(err, &c) {
		t.Fatalf("a PUT over an unreadable app without If-Match: %v, want ErrConflict", err)
	}
	cur, err := f.st.Get(ctx, fleet.AppKey("shop"))
	if err != nil {
		t.Fatal(err)
	}
	a, _, _, err := f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "other"}, cur.ETag)
	if err != nil {
		t.Fatalf("repairing the unreadable app with If-Match: %v", err)
	}
	if a.ID == "" {
		t.Fatalf("the application rewritten over an unreadable object has no id: %+v", a)
	}
}

// TestAPublishRetryNeverWritesIntoAnotherAccountsClaim: PublishPaths authorizes once
// (claimForPaths: token scope, account, incarnation), then on a lost compare-and-swap
// re-reads the claim and retries checking only c.App == app. A claim that changed hands
// to a same-named application of another account in between gets the old token's path
// map written into it (account "other" kept, so the map then routes inside "other").
// Expected: the retry re-runs claimForPaths (404 / forbidden). Actual: written.
func TestAPublishRetryNeverWritesIntoAnotherAccountsClaim(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	if _, _, _, err := f.w.Claim(ctx, admin, "shop", "shop.example"); err != nil {
		t.Fatal(err)
	}
	it, err := f.w.IssueToken(ctx, admin, "acme", "shop", []string{"publish"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.w.LookupToken(ctx, it.Token)
	if err != nil {
		t.Fatal(err)
	}
	// The first conditional write of the claim loses a race: in between, the claim was
	// released and re-made for a new application of the same name in another account.
	swapped := false
	f.w.st = &hooks{Store: f.st, put: func(key string) error {
		if key != fleet.ClaimKey("shop.example") || swapped {
			return nil
		}
		swapped = true
		if _, err := f.st.Put(ctx, key, []byte(`{"host":"shop.example","account":"other","app":"shop"}`), store.Condition{}); err != nil {
			return err
		}
		return store.ErrPreconditionFailed
	}}
	_, _, err = f.w.PublishPaths(ctx, Actor{Token: tok}, "shop", "shop.example", map[string]string{"x": "victim.example"}, "")
	f.w.st = f.st
	c, _, _ := f.w.loadClaim(ctx, "shop.example")
	if err == nil && c.Account == "other" && len(c.Paths) > 0 {
		t.Fatalf("acme's token wrote %v into account other's claim %+v", c.Paths, c)
	}
}
