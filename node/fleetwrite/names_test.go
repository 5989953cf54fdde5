package fleetwrite

import (
	"context"
	"slices"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// Every change's serial bump names the fleet key it wrote or deleted (never the audit
// record), so a node one bump behind reads just that key.
func TestEveryBumpNamesTheKeyItAnnounces(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	names := func() []string {
		t.Helper()
		_, _, got, err := store.ParseSerialNames([]byte(f.serial(t)))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	check := func(what string, want ...string) {
		t.Helper()
		if got := names(); !slices.Equal(got, want) {
			t.Errorf("%s: the serial names %q, want %q", what, got, want)
		}
	}
	f.app(t, "shop", "acme")
	check("app.put", fleet.AppKey("shop"))
	claim(t, f.w, "shop", "shop.example.com")
	check("domain.claim", fleet.ClaimKey("shop.example.com"))
	if _, _, err := f.w.PublishPaths(ctx, admin, "shop", "shop.example.com", map[string]string{"a": "b.example.com"}, ""); err != nil {
		t.Fatal(err)
	}
	check("paths.put", fleet.ClaimKey("shop.example.com"))
	tok, err := f.w.IssueToken(ctx, admin, "acme", "shop", []string{"publish"})
	if err != nil {
		t.Fatal(err)
	}
	check("token.create", fleet.TokenKey(tok.ID))
	if err := f.w.RevokeToken(ctx, admin, tok.ID); err != nil {
		t.Fatal(err)
	}
	check("token.revoke", fleet.TokenKey(tok.ID))
	if err := f.w.Release(ctx, admin, "shop", "shop.example.com", ""); err != nil {
		t.Fatal(err)
	}
	check("domain.release", fleet.ClaimKey("shop.example.com"))
	if err := f.w.DeleteApp(ctx, admin, "shop", ""); err != nil {
		t.Fatal(err)
	}
	check("app.delete", fleet.AppKey("shop"))
}
