package fleetwrite

// Hostile review of port pairs (da09cbd): one tenant's application against another's
// pair, and a corrupt instances.json.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

func TestHostilePairChurnStaysBoundedAcrossReleaseAndReallocate(t *testing.T) {
	reg, err := OpenRegistry(filepath.Join(t.TempDir(), "instances.json"), 24000, 24099, 60e9)
	if err != nil {
		t.Fatal(err)
	}
	mustAllocate(t, reg, "shop", "id-shop")
	for round := 0; round < 10; round++ {
		for p := 24050; p < 24099; p++ {
			reg.Set("shop", "id-shop", &p, true) // churn errors expected beyond the bound
		}
		reg.Release("shop")
		reg.Allocate("shop", "id-shop")
	}
	held := len(quarantinedPorts(reg)) + 2
	if held > MaxQuarantinedPorts+4 {
		t.Errorf("one application holds %d ports after churn, release and reallocate, want at most %d", held, MaxQuarantinedPorts+4)
	}
}

// writeCorrupt writes an instances.json by hand (a corrupt or hand-edited file).
func writeCorrupt(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "instances.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPortTakenNamesNoOtherAccountsApplication: a token stepping through the node's
// port range learns which ports are taken, never by which application of another
// account (held, quarantined, the idle port of a pair, or left by an earlier
// incarnation of its own application's name in another account). A token of the
// holder's account, and the admin, are told the holder.
func TestPortTakenNamesNoOtherAccountsApplication(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.app(t, "shop", "acme")
	blog := f.app(t, "blog", "acme")
	evil := f.app(t, "evil", "mallory")
	f.app(t, "twin", "acme")
	for _, app := range []string{"shop", "twin"} {
		allocate(t, f.w, admin, app)
	}
	// shop: pair {24000, 24001}, then moved out (24000 quarantined, pair {24001, 24005}).
	if _, err := f.w.SetInstance(ctx, admin, "shop", ptr(24005), true); err != nil {
		t.Fatal(err)
	}
	// twin: pair {24002, 24003}, deleted in acme and recreated in mallory: its ports stay
	// quarantined, released by an incarnation of another account.
	if err := f.w.DeleteApp(ctx, admin, "twin", ""); err != nil {
		t.Fatal(err)
	}
	twin := f.app(t, "twin", "mallory")
	token := func(a fleet.App) Actor {
		return Actor{Token: fleet.TokenRecord{ID: "0123456789abcdef", Account: a.Account, App: a.Name, AppID: a.ID, Roles: []string{fleet.RoleInstance}}}
	}
	taken := 0
	for _, who := range []fleet.App{evil, twin} {
		for p := 24000; p <= 24009; p++ {
			_, err := f.w.SetInstance(ctx, token(who), who.Name, ptr(p), false)
			if err == nil {
				if err := f.w.ReleaseInstance(ctx, admin, who.Name); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if !errors.Is(err, ErrPortTaken) {
				continue // churn once its own quarantine fills: not about other accounts
			}
			// acme's ports (shop's pair and the port it left; the deleted twin's pair) read
			// as a bare "port taken"; a port mallory's own evil left may name evil.
			switch p {
			case 24000, 24001, 24002, 24003, 24005:
				taken++
				if want := fmt.Sprintf("%v: port %d", ErrPortTaken, p); err.Error() != want {
					t.Errorf("%s's token onto acme's port %d: %q, want %q", who.Name, p, err, want)
				}
			}
			for _, name := range []string{"shop", "blog", "twin", "acme", "incarnation"} {
				if strings.Contains(err.Error(), name) {
					t.Errorf("%s's token onto port %d: %q names %q", who.Name, p, err, name)
				}
			}
		}
	}
	if taken != 10 {
		t.Fatalf("%d of acme's ports answered taken to mallory's two tokens, want 5 each", taken)
	}
	// The holder's own account, and the admin, are told who holds the port.
	for _, who := range []Actor{token(blog), admin} {
		_, err := f.w.SetInstance(ctx, who, "blog", ptr(24001), false)
		if !errors.Is(err, ErrPortTaken) || !strings.Contains(err.Error(), "pair of shop") {
			t.Errorf("%+v onto shop's idle port: %v, want ErrPortTaken naming shop's pair", who, err)
		}
	}
}
