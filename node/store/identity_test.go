package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/scafo/ingress/node/store"
)

// TestIdentityTurnsForeignAndRefusesBumps: a store whose serial vanished, changed epoch
// or went backwards since the identity committed it refuses its bump (nothing written,
// and not foreign yet: a read says so) and its next observation; a pass's recheck (the
// serial re-read after its object reads) fails against the observation the pass
// started from, and passes a concurrent bump. Both refusals are ErrForeign and
// ErrUnavailable.
func TestIdentityTurnsForeignAndRefusesBumps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(n uint64, epoch string) []byte // nil: delete the serial
		ok    bool                                // the store moved on, not swapped
	}{
		{"serial vanished", nil, false},
		{"epoch changed", func(n uint64, _ string) []byte { return store.FormatSerial(n+1, "00000000000000ff") }, false},
		{"serial went backwards", func(n uint64, e string) []byte { return store.FormatSerial(n-1, e) }, false},
		{"a concurrent bump", func(n uint64, e string) []byte { return store.FormatSerial(n+1, e) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := newDir(t)
			var id, pass store.Identity // pass: another process's pass, observed and not committed
			for range 3 {
				if _, err := id.Bump(ctx, st); err != nil {
					t.Fatal(err)
				}
			}
			obs, err := id.Observe(ctx, st)
			if err != nil || !obs.Changed || obs.Serial != 3 {
				t.Fatalf("observe: %+v %v", obs, err)
			}
			id.Commit(obs)
			if again, err := id.Observe(ctx, st); err != nil || again.Changed {
				t.Fatalf("an unchanged serial reads as changed: %+v %v", again, err)
			}
			started, err := pass.Observe(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if err := pass.Recheck(ctx, st, started); err != nil {
				t.Fatalf("recheck of an untouched store: %v", err)
			}
			if tc.after == nil {
				err = st.Delete(ctx, store.SerialKey, "")
			} else {
				_, err = st.Put(ctx, store.SerialKey, tc.after(obs.Serial, obs.Epoch), store.Condition{})
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.ok {
				if err := pass.Recheck(ctx, st, started); err != nil {
					t.Fatalf("recheck after a concurrent bump: %v", err)
				}
				return
			}
			before, _ := st.Get(ctx, store.SerialKey)
			if _, err := id.Bump(ctx, st); !errors.Is(err, store.ErrForeign) {
				t.Fatalf("bump: %v, want ErrForeign", err)
			}
			after, _ := st.Get(ctx, store.SerialKey)
			if string(before.Value) != string(after.Value) {
				t.Fatalf("a refused bump wrote %q over %q", after.Value, before.Value)
			}
			if id.Foreign() {
				t.Fatal("foreign before any observation said so")
			}
			if _, err := id.Observe(ctx, st); !errors.Is(err, store.ErrForeign) || !errors.Is(err, store.ErrUnavailable) || !id.Foreign() {
				t.Fatalf("observe: %v foreign=%v, want ErrForeign (and ErrUnavailable)", err, id.Foreign())
			}
			if err := pass.Recheck(ctx, st, started); !errors.Is(err, store.ErrForeign) || !errors.Is(err, store.ErrUnavailable) || !pass.Foreign() {
				t.Fatalf("recheck: %v foreign=%v, want ErrForeign (and ErrUnavailable)", err, pass.Foreign())
			}
		})
	}
}

// A restarted node seeds its identity from its state dir: the store is foreign until a
// read matches what it served (the same epoch, a serial at least as high), and only
// Reset (the operator's adoption) accepts a store that does not.
func TestIdentitySeededFromTheStateDir(t *testing.T) {
	const epoch = "00000000000000aa"
	for _, tc := range []struct {
		name    string
		serial  []byte // nil: no serial object
		foreign bool
	}{
		{"the same store, further on", store.FormatSerial(9, epoch), false},
		{"the same store, as served", store.FormatSerial(7, epoch), false},
		{"no serial", nil, true},
		{"another epoch", store.FormatSerial(9, "00000000000000bb"), true},
		{"a serial behind", store.FormatSerial(6, epoch), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := newDir(t)
			if tc.serial != nil {
				if _, err := st.Put(ctx, store.SerialKey, tc.serial, store.Condition{}); err != nil {
					t.Fatal(err)
				}
			}
			var id store.Identity
			id.Seed(7, epoch)
			if !id.Foreign() || id.ForeignReason() == "" {
				t.Fatal("a seeded identity accepts writes before any read of the store")
			}
			if _, err := id.Bump(ctx, st); tc.foreign && !errors.Is(err, store.ErrForeign) {
				t.Fatalf("bump: %v, want ErrForeign", err)
			}
			obs, err := id.Observe(ctx, st)
			if tc.foreign {
				if !errors.Is(err, store.ErrForeign) || !id.Foreign() || id.ForeignReason() == "" {
					t.Fatalf("observe: %v foreign=%v (%q), want ErrForeign", err, id.Foreign(), id.ForeignReason())
				}
				id.Reset() // the operator adopts it
				if id.Foreign() {
					t.Fatal("foreign after Reset")
				}
				if obs, err = id.Observe(ctx, st); err != nil {
					t.Fatalf("observe after Reset: %v", err)
				}
			} else if err != nil {
				t.Fatalf("observe: %v", err)
			}
			id.Commit(obs)
			if id.Foreign() || id.ForeignReason() != "" {
				t.Fatalf("foreign after a commit: %q", id.ForeignReason())
			}
			if _, err := id.Bump(ctx, st); err != nil {
				t.Fatalf("bump after a commit: %v", err)
			}
		})
	}
}

// TestIdentityKnowsTheSerialItCreated: a node's first write creates the store's serial
// (Bump before any serial was committed); until the reconcile loop commits it, a store
// wiped in between must still read as foreign, not as a fresh store whose emptiness
// is the fleet (the root cause of TestWipedStoreIsAnOutageNotAnEmptyFleet's flakes: a
// wipe landing between the heartbeat's first bump and the next committed pass).
func TestIdentityKnowsTheSerialItCreated(t *testing.T) {
	ctx := context.Background()
	st := newDir(t)
	var id store.Identity
	// The first pass finds no serial (a store being filled): accepted as it is.
	obs, err := id.Observe(ctx, st)
	if err != nil || !obs.Changed {
		t.Fatalf("observe an empty store: %+v %v", obs, err)
	}
	if err := id.Recheck(ctx, st, obs); err != nil {
		t.Fatalf("recheck an empty store: %v", err)
	}
	id.Commit(obs)
	if _, err := id.Bump(ctx, st, "nodes/vps-a.json"); err != nil {
		t.Fatal(err)
	}
	// Wiped before the next pass committed the serial.
	if err := st.Delete(ctx, store.SerialKey, ""); err != nil {
		t.Fatal(err)
	}
	if obs, err := id.Observe(ctx, st); !errors.Is(err, store.ErrForeign) || !id.Foreign() {
		t.Fatalf("observe a wiped store after this node created its serial: %+v %v, want ErrForeign", obs, err)
	}
	if _, err := id.Bump(ctx, st); !errors.Is(err, store.ErrForeign) {
		t.Fatalf("bump a wiped store: %v, want ErrForeign", err)
	}
	if _, err := st.Get(ctx, store.SerialKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the serial was recreated in the wiped store: %v", err)
	}
}
