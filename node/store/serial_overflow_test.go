package store_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/scafo/ingress/node/store"
)

// TestASerialNeverWrapsToZero: a serial at the counter's last value (a corrupt
// <stateDir>/served-serial that an adopt advances past, or a corrupt serial object) is
// never bumped nor advanced to 0, which every node that saw a serial of that epoch would
// read as a store restored from an old copy (foreign fleet-wide); the bump or the
// advance is refused and the serial stays (hostile review 3: Advance past
// math.MaxUint64 wrote "0 <epoch>", and a bump from math.MaxUint64 did too).
func TestASerialNeverWrapsToZero(t *testing.T) {
	ctx := context.Background()
	st := newDir(t)
	var id store.Identity
	for range 3 {
		if _, err := id.Bump(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	id.Reset() // the operator's adopt
	o, err := id.Observe(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		t.Helper()
		obj, err := st.Get(ctx, store.SerialKey)
		if err != nil {
			t.Fatal(err)
		}
		return string(obj.Value)
	}
	before := serial()
	if got, err := id.Advance(ctx, st, o, o.Epoch, math.MaxUint64); err == nil || got.Serial == 0 || serial() != before {
		t.Fatalf("advance past the counter's last value: %+v %v, store %q (was %q)", got, err, serial(), before)
	}
	o2, err := id.Advance(ctx, st, o, o.Epoch, math.MaxUint64-1)
	if err != nil || o2.Serial != math.MaxUint64 {
		t.Fatalf("advance to the counter's last value: %+v %v", o2, err)
	}
	id.Commit(o2)
	at := serial()
	if n, err := id.Bump(ctx, st); !errors.Is(err, store.ErrUnavailable) || serial() != at {
		t.Fatalf("bump from the counter's last value: %d %v, store %q (was %q)", n, err, serial(), at)
	}
	if n, err := store.BumpSerial(ctx, st); !errors.Is(err, store.ErrUnavailable) || serial() != at {
		t.Fatalf("BumpSerial from the counter's last value: %d %v, store %q (was %q)", n, err, serial(), at)
	}
}
