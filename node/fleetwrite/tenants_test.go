package fleetwrite

// A tenant's token against another account's budget (against another application and
// the control plane: writer_test.go's TestPublishPathsRefusesOtherCredentialsAndHosts),
// and the warnings an application's write carries.

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// TestATenantCannotSpendAnotherAccountsRoutingBudget: every write of the write domain
// mallory's token can aim at alice's application (claims are the admin's: the route
// table's groupAdmin, node/httpapi) is refused before it is charged (never with the budget's
// error), alice's budget object is never created, and alice keeps her whole burst.
func TestATenantCannotSpendAnotherAccountsRoutingBudget(t *testing.T) {
	ctx := context.Background()
	bf := newBudgetFixture(t, 1, 3, 0.01)
	w := bf.ws[0]
	evil, _, _, err := w.PutApp(ctx, admin, "evil", fleet.App{Account: "mallory"}, "")
	if err != nil {
		t.Fatal(err)
	}
	shop, _, _, err := w.PutApp(ctx, admin, "shop", fleet.App{Account: "alice"}, "")
	if err != nil {
		t.Fatal(err)
	}
	claim(t, w, "shop", "shop.example.org")
	alice, mallory := tokenFor(shop, fleet.RoleInstance, fleet.RolePublish), tokenFor(evil, fleet.RoleInstance, fleet.RolePublish)
	allocate(t, w, alice, "shop")
	paths := map[string]string{"x": "evil.apps.example.com"}
	for i, attempt := range []func() error{
		func() error { _, err := w.SetInstance(ctx, mallory, "shop", nil, false); return err },
		func() error { _, _, err := w.AllocateInstance(ctx, mallory, "shop"); return err },
		func() error { return w.ReleaseInstance(ctx, mallory, "shop") },
		func() error {
			_, _, err := w.PublishPaths(ctx, mallory, "shop", "shop.example.org", paths, "")
			return err
		},
		func() error {
			_, _, err := w.PublishPaths(ctx, mallory, "evil", "shop.example.org", paths, "")
			return err
		},
	} {
		if err := attempt(); err == nil || isBudget(err) {
			t.Errorf("mallory's write %d on alice's application: %v, want a refusal that is not the budget's", i, err)
		}
	}
	if _, err := bf.st.Get(ctx, RouteBudgetKey("alice")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("mallory's writes created or spent alice's budget object: %v", err)
	}
	for i := range 3 {
		if _, err := w.SetInstance(ctx, alice, "shop", nil, i%2 == 0); err != nil {
			t.Fatalf("alice's change %d of her burst of 3: %v", i+1, err)
		}
	}
	if _, err := w.SetInstance(ctx, alice, "shop", nil, false); !isBudget(err) {
		t.Fatalf("alice's fourth change: %v, want the budget's refusal", err)
	}
}

// TestAnAppInAGroupWithoutAPlatformDomainIsWarnedAtItsWrite: an application whose
// ingress group no platform domain is in gets no platform host, and its write is warned
// so, naming the group; an application of a group a platform domain is in is not.
func TestAnAppInAGroupWithoutAPlatformDomainIsWarnedAtItsWrite(t *testing.T) {
	f := newFixture(t)
	f.w.cfg.DomainGroups = map[string]string{"apps.example.com": "eu-1"}
	for _, tc := range []struct {
		group string // "": the default group
		want  []string
	}{
		{"eu-1", nil},
		{"", []string{`"default"`, "no platform host"}},
		{"us-2", []string{`"us-2"`, "no platform host"}},
	} {
		a := fleet.App{Name: "shop", Account: "acme"}
		if tc.group != "" {
			a.Ingress = &fleet.Ingress{Group: tc.group}
		}
		warn := f.w.AppWarnings(a)
		if len(warn) != min(len(tc.want), 1) {
			t.Errorf("group %q: warnings %q, want %d", tc.group, warn, min(len(tc.want), 1))
			continue
		}
		for _, s := range tc.want {
			if !strings.Contains(warn[0], s) {
				t.Errorf("group %q: warning %q does not say %s", tc.group, warn[0], s)
			}
		}
	}
}
