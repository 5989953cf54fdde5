package fleetwrite

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// beforePut runs a hook before each Put that reaches the store (another write lands
// there, between a write's reads and its write).
type beforePut struct {
	store.Store
	hook func(key string)
}

func (s beforePut) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	if s.hook != nil {
		s.hook(key)
	}
	return s.Store.Put(ctx, key, v, c)
}

// TestAClaimNeverOutlivesADeleteOfItsApplicationThatLandedBeforeItsWrite: an
// application's delete that lands between a claim's read of the application and its
// write (the delete saw no claim, so it answered 200) leaves no claim behind: the claim
// withdraws what it wrote and answers 404, as for an application that does not exist.
// And so for a delete and a re-create (another incarnation) in between. Before, the claim
// answered 201 and held its host for scafo-unowned until the admin released it
// (fleetsim: a claim answered 201 after its application's delete answered 200).
func TestAClaimNeverOutlivesADeleteOfItsApplicationThatLandedBeforeItsWrite(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		f := newFixture(t)
		ctx := context.Background()
		f.app(t, "shop", "acme")
		var st beforePut
		st.Store = f.st
		w := New(f.w.cfg, &st, f.id, f.w.inst, f.w.log)
		landed := false
		st.hook = func(key string) {
			if key != fleet.ClaimKey("shop.example.org") || landed {
				return
			}
			landed = true
			if err := f.w.DeleteApp(ctx, admin, "shop", ""); err != nil {
				t.Fatalf("the delete that lands in the middle: %v", err)
			}
			if recreate {
				f.app(t, "shop", "acme")
			}
		}
		_, _, _, err := w.Claim(ctx, admin, "shop", "shop.example.org")
		if !landed {
			t.Fatal("the delete did not land in the middle of the claim")
		}
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("recreate %v: a claim whose application was deleted before its write: %v, want ErrNotFound (404)", recreate, err)
		}
		if _, err := f.st.Get(ctx, fleet.ClaimKey("shop.example.org")); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("recreate %v: the claim is stored (%v): it holds its host with no application", recreate, err)
		}
		if recreate && !strings.Contains(err.Error(), "created again") {
			t.Errorf("recreate: %v, want it to say the application was created again", err)
		}
	}
}
