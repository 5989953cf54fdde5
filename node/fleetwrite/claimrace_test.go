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

// TestAClaimAnswered201WhileItsApplicationWasDeletedIsWithdrawnByTheDelete: the other
// ordering. A claim that read the application before its delete, was written after the
// delete listed no claims, and re-read the application before the delete landed is
// answered 201 (its own re-read still saw the application). The delete then finds it
// and withdraws it, audited as a release and announced with the delete; before, it held
// its host for scafo-unowned until the admin released it (hostile review 3, F4).
func TestAClaimAnswered201WhileItsApplicationWasDeletedIsWithdrawnByTheDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	other := New(f.w.cfg, f.st, f.id, f.w.inst, f.w.log) // another node's writer, one store
	const host = "shop.example.org"
	ran := false
	f.w.afterClaimsListed = func() {
		ran = true
		if _, _, created, err := other.Claim(ctx, admin, "shop", host); err != nil || !created {
			t.Fatalf("the claim in the middle of the delete: created=%v err=%v, want 201", created, err)
		}
	}
	if err := f.w.DeleteApp(ctx, admin, "shop", ""); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if !ran {
		t.Fatal("the claim did not run in the middle of the delete")
	}
	if _, err := f.st.Get(ctx, fleet.ClaimKey(host)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the claim is stored (%v): it holds its host with no application", err)
	}
	recs, err := f.w.Audit(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	for _, r := range recs {
		released = released || (r.Action == "domain.release" && r.Host == host && r.App == "shop")
	}
	if !released {
		t.Errorf("audit %+v: want the withdrawn claim recorded as a release", recs)
	}

	// A claim of a new incarnation created after the delete is the new one's: kept.
	f.app(t, "shop", "acme")
	if _, _, _, err := f.w.Claim(ctx, admin, "shop", host); err != nil {
		t.Fatal(err)
	}
	if got := f.w.withdrawRacedClaims(ctx, "shop"); len(got) != 0 {
		t.Fatalf("withdrew %+v of an application that exists", got)
	}
	if _, err := f.st.Get(ctx, fleet.ClaimKey(host)); err != nil {
		t.Fatalf("the new incarnation's claim: %v", err)
	}
}
