package fleetwrite

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// ctxStore answers the serial's reads with the error of the context they are made
// under, once it has ended (a store that hangs until then answers just that).
type ctxStore struct{ store.Store }

func (s ctxStore) Get(ctx context.Context, key string) (store.Object, error) {
	if key == fleet.KeySerial && ctx.Err() != nil {
		return store.Object{}, ctx.Err()
	}
	return s.Store.Get(ctx, key)
}

// TestAnnouncePendingEndsWithTheHeartbeatsContext: the heartbeat's announcement of a
// change whose bump failed runs under the heartbeat's context (bounded by
// reconcile.PassTimeout, cancelled at the node's stop), not under one that never ends
// as a write's own announcement does: a hung store must not hold the heartbeat, nor the
// stop, past that bound (hostile review 3: AnnouncePending called settle, whose
// context.WithoutCancel dropped the deadline; a store hanging on the serial held
// AnnouncePending for as long as the store hung).
func TestAnnouncePendingEndsWithTheHeartbeatsContext(t *testing.T) {
	d, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := OpenRegistry(filepath.Join(t.TempDir(), "instances.json"), 24000, 24009, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w := New(Config{Node: "vps-a", PlatformDomains: []string{"apps.example.com"}, APIPort: 7400},
		ctxStore{d}, &store.Identity{}, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	if _, _, _, err := w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme"}, ""); err != nil {
		t.Fatal(err)
	}
	good, err := d.Get(ctx, fleet.KeySerial)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(ctx, fleet.KeySerial, []byte("not a counter"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Placement: []string{"vps-b"}}, ""); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write whose bump fails: %v, want ErrUnavailable", err)
	}
	if _, err := d.Put(ctx, fleet.KeySerial, good.Value, store.Condition{}); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.AnnouncePending(ended); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AnnouncePending under an ended context: %v, want ErrUnavailable (the bump did not outlive it)", err)
	}
	if now, err := d.Get(ctx, fleet.KeySerial); err != nil || string(now.Value) != string(good.Value) {
		t.Fatalf("the serial moved under an ended context: %q (%v)", now.Value, err)
	}
	if err := w.AnnouncePending(ctx); err != nil {
		t.Fatalf("the next beat: %v", err)
	}
	if now, _ := d.Get(ctx, fleet.KeySerial); string(now.Value) == string(good.Value) {
		t.Fatal("the next beat announced nothing")
	}
}
