package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

func TestIdentityTurnsForeignAndRefusesBumps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(n uint64, epoch string) []byte // nil: delete the serial
	}{
		{"serial vanished", nil},
		{"epoch changed", func(n uint64, _ string) []byte { return store.FormatSerial(n+1, "00000000000000ff") }},
		{"serial went backwards", func(n uint64, e string) []byte { return store.FormatSerial(n-1, e) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := dir.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var id store.Identity
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
			if tc.after == nil {
				err = st.Delete(ctx, store.SerialKey, "")
			} else {
				_, err = st.Put(ctx, store.SerialKey, tc.after(obs.Serial, obs.Epoch), store.Condition{})
			}
			if err != nil {
				t.Fatal(err)
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
		})
	}
}
