package self

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// refusingStore refuses every write while refuse is set: a store that takes reads and
// not writes (a full disk, a revoked permission).
type refusingStore struct {
	store.Store
	refuse atomic.Bool
}

func (s *refusingStore) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	if s.refuse.Load() {
		return "", fmt.Errorf("put %s: %w: disk full", key, store.ErrUnavailable)
	}
	return s.Store.Put(ctx, key, v, c)
}

// TestAFailingHeartbeatSaysSinceWhen: while the record's writes fail, Err says why and
// FailingSince when the first of them failed (not the latest: a status page reads it as
// "unreachable since"); a success clears both.
func TestAFailingHeartbeatSaysSinceWhen(t *testing.T) {
	d, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &refusingStore{Store: d}
	r := New(Options{
		Store: st, Identity: &store.Identity{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		NodeID: "n1", Name: "vps-a", Address: "10.83.0.1", APIPort: 7400, NodeTTL: time.Minute,
		Settings: func() fleet.NodeSettings { return fleet.NodeSettings{} }, Instances: func() map[string]fleet.Instance { return nil },
		OnAnnounced: func() {},
	})
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r.Write(ctx)
	if e, since := r.Err(), r.FailingSince(); e != nil || !since.IsZero() {
		t.Fatalf("after a good write: Err %v, FailingSince %v; want neither", e, since)
	}
	st.refuse.Store(true)
	before := time.Now()
	r.Write(ctx)
	first := r.FailingSince()
	if e := r.Err(); e == nil || first.Before(before) || first.After(time.Now()) {
		t.Fatalf("after a failed write: Err %v, FailingSince %v (failed at %v)", e, first, before)
	}
	r.Write(ctx)
	if again := r.FailingSince(); !again.Equal(first) || r.Err() == nil {
		t.Fatalf("a second failure moved FailingSince from %v to %v", first, again)
	}
	st.refuse.Store(false)
	r.Write(ctx)
	if e, since := r.Err(), r.FailingSince(); e != nil || !since.IsZero() {
		t.Fatalf("after writes succeed again: Err %v, FailingSince %v; want neither", e, since)
	}
}
