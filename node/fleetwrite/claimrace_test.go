package fleetwrite

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

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
		landed := false
		w := New(f.w.cfg, &hooks{Store: f.st, put: func(key string) error {
			if key != fleet.ClaimKey("shop.example.org") || landed {
				return nil
			}
			landed = true
			if err := f.w.DeleteApp(ctx, admin, "shop", ""); err != nil {
				t.Fatalf("the delete that lands in the middle: %v", err)
			}
			if recreate {
				f.app(t, "shop", "acme")
			}
			return nil
		}}, f.id, f.w.inst, f.w.log)
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
// and withdraws it, audited (domain.withdraw) and announced with the delete; before, it held
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
	withdrawn := false
	for _, r := range recs {
		withdrawn = withdrawn || (r.Action == "domain.withdraw" && r.Host == host && r.App == "shop")
	}
	if !withdrawn {
		t.Errorf("audit %+v: want the withdrawn claim recorded (domain.withdraw)", recs)
	}

	// A claim of a new incarnation created after the delete is the new one's: kept.
	f.app(t, "shop", "acme")
	claim(t, f.w, "shop", host)
	if got := f.w.withdrawRacedClaims(ctx, "shop", nil); len(got) != 0 {
		t.Fatalf("withdrew %+v of an application that exists", got)
	}
	if _, err := f.st.Get(ctx, fleet.ClaimKey(host)); err != nil {
		t.Fatalf("the new incarnation's claim: %v", err)
	}
}

// hookedStore runs hooks around a fleetwrite's store reads and deletes: another writer
// acts there, between two steps of a write.
type hookedStore struct {
	store.Store
	appGets  atomic.Int32
	afterApp func(n int32)             // after the n-th Get of apps/shop.json returned
	onDelete func(key string, n int32) // before the n-th Delete of key
	deletes  atomic.Int32
}

func (s *hookedStore) Get(ctx context.Context, key string) (store.Object, error) {
	o, err := s.Store.Get(ctx, key)
	if key == fleet.AppKey("shop") && s.afterApp != nil {
		s.afterApp(s.appGets.Add(1))
	}
	return o, err
}

func (s *hookedStore) Delete(ctx context.Context, key, ifMatch string) error {
	if s.onDelete != nil {
		s.onDelete(key, s.deletes.Add(1))
	}
	return s.Store.Delete(ctx, key, ifMatch)
}

// racedDelete sets up the raced claim of TestAClaimAnswered201WhileItsApplicationWasDeletedIsWithdrawnByTheDelete
// on a writer over hs, and returns it and another node's writer over the same store.
func racedDelete(t *testing.T, f *fixture, hs *hookedStore, host string) (w, other *Writer) {
	t.Helper()
	ctx := context.Background()
	f.app(t, "shop", "acme")
	other = New(f.w.cfg, f.st, f.id, f.w.inst, f.w.log)
	hs.Store = f.st
	w = New(f.w.cfg, hs, f.id, f.w.inst, f.w.log)
	w.afterClaimsListed = func() {
		if _, _, created, err := other.Claim(ctx, admin, "shop", host); err != nil || !created {
			t.Fatalf("the claim in the middle of the delete: created=%v err=%v, want 201", created, err)
		}
	}
	return w, other
}

// TestAClaimOfTheApplicationCreatedAgainIsNotWithdrawn: the delete's withdrawal checks
// that no application of the name exists, then deletes the claim. An application
// created again in between, whose admin claims the same host (answered 200 "already
// yours"), keeps it: the withdrawal sees the application after its delete and puts the
// claim back (hostile review 4, F1: before, the new application lost the claim it was
// told it holds).
func TestAClaimOfTheApplicationCreatedAgainIsNotWithdrawn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const host = "shop.example.org"
	var hs hookedStore
	w, other := racedDelete(t, f, &hs, host)
	told := false
	hs.afterApp = func(n int32) {
		if n != 2 { // 1: DeleteApp's read; 2: the withdrawal's check before its delete
			return
		}
		if _, _, _, err := other.PutApp(ctx, admin, "shop", fleet.App{Account: "acme"}, ""); err != nil {
			t.Fatalf("creating shop again: %v", err)
		}
		if _, _, _, err := other.Claim(ctx, admin, "shop", host); err != nil {
			t.Fatalf("the new shop's claim: %v", err)
		}
		told = true
	}
	if err := w.DeleteApp(ctx, admin, "shop", ""); err != nil {
		t.Fatal(err)
	}
	if !told {
		t.Fatal("shop was not created again in the middle of the withdrawal")
	}
	if c, _, err := other.loadClaim(ctx, host); err != nil || c.App != "shop" {
		t.Fatalf("the new shop was told it holds %s; after the old one's delete: %+v %v", host, c, err)
	}
	recs, err := f.w.Audit(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Action == "domain.withdraw" {
			t.Errorf("audit %+v: a claim kept is audited as withdrawn", r)
		}
	}
}

// TestTheWithdrawalSparesAClaimThatChangedHands: released and claimed by another
// application between the delete's listing and its withdrawal, the claim is not the
// deleted application's any more: it stays (hostile review 4, F2: the re-check of the
// claim's holder had no test).
func TestTheWithdrawalSparesAClaimThatChangedHands(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const host = "shop.example.org"
	f.app(t, "blog", "acme")
	var hs hookedStore
	w, other := racedDelete(t, f, &hs, host)
	hs.onDelete = func(key string, _ int32) {
		if key != fleet.ClaimKey(host) || hs.afterApp != nil {
			return
		}
		hs.afterApp = func(int32) {} // once
		if err := other.Release(ctx, admin, "shop", host, ""); err != nil {
			t.Fatalf("release: %v", err)
		}
		if _, _, _, err := other.Claim(ctx, admin, "blog", host); err != nil {
			t.Fatalf("blog's claim: %v", err)
		}
	}
	if err := w.DeleteApp(ctx, admin, "shop", ""); err != nil {
		t.Fatal(err)
	}
	if hs.afterApp == nil {
		t.Fatal("the claim did not change hands in the middle of the withdrawal")
	}
	if c, _, err := other.loadClaim(ctx, host); err != nil || c.App != "blog" {
		t.Fatalf("blog's claim after the delete of shop: %+v %v", c, err)
	}
}

// TestTheWithdrawalRetriesAClaimThatChangedUnderIt: a claim rewritten between the
// withdrawal's read and its delete (a path map published on it) is read again and
// withdrawn (hostile review 4, F3: one conditional delete left it held for nobody).
func TestTheWithdrawalRetriesAClaimThatChangedUnderIt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const host = "shop.example.org"
	var hs hookedStore
	w, _ := racedDelete(t, f, &hs, host)
	changed := false
	hs.onDelete = func(key string, _ int32) {
		if key != fleet.ClaimKey(host) || changed {
			return
		}
		changed = true
		obj, err := f.st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var c fleet.Claim
		if err := json.Unmarshal(obj.Value, &c); err != nil {
			t.Fatal(err)
		}
		c.Paths = map[string]string{"docs": host}
		b, _ := json.Marshal(c)
		if _, err := f.st.Put(ctx, key, b, store.Condition{IfMatch: obj.ETag}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.DeleteApp(ctx, admin, "shop", ""); err != nil {
		t.Fatal(err)
	}
	if !changed {
		t.Fatal("the claim did not change under the withdrawal")
	}
	if _, err := f.st.Get(ctx, fleet.ClaimKey(host)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the claim is stored (%v): it holds its host with no application", err)
	}
}
