package fleetwrite

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// TestAChangeStoredWithoutItsBumpIsAnnouncedAtTheNextBeat: a write whose change was
// stored and whose serial bump failed answers 503; with no retry and no other write
// through this node, AnnouncePending (the heartbeat's) announces it once the serial can
// be bumped again, naming the key, and then costs nothing. Before it, the change waited
// for the next write through this node (fleetsim: an application stored by a write
// answered 503 was announced by no bump until then). It runs under the heartbeat's
// context (bounded by reconcile.PassTimeout, cancelled at the node's stop), not under
// one that never ends as a write's own announcement does: a hung store must not hold
// the heartbeat, nor the stop, past that bound (hostile review 3: settle's
// context.WithoutCancel dropped the deadline).
func TestAChangeStoredWithoutItsBumpIsAnnouncedAtTheNextBeat(t *testing.T) {
	f := newFixture(t)
	f.w.st = ctxStore{f.st}
	ctx := context.Background()
	f.app(t, "shop", "acme")
	good := f.serial(t)
	if _, err := f.st.Put(ctx, fleet.KeySerial, []byte("not a counter"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Placement: []string{"vps-b"}}, ""); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write whose bump fails: %v, want ErrUnavailable (503)", err)
	}
	if err := f.w.AnnouncePending(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("announcing while the serial cannot be bumped: %v, want ErrUnavailable", err)
	}
	if _, err := f.st.Put(ctx, fleet.KeySerial, []byte(good), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.w.AnnouncePending(ended); !errors.Is(err, store.ErrUnavailable) || f.serial(t) != good {
		t.Fatalf("AnnouncePending under an ended context: %v, serial %q; want ErrUnavailable and the serial unmoved (the bump did not outlive it)", err, f.serial(t))
	}
	if err := f.w.AnnouncePending(ctx); err != nil {
		t.Fatal(err)
	}
	announced := f.serial(t)
	_, _, names, err := store.ParseSerialNames([]byte(announced))
	if err != nil || announced == good || !strings.Contains(strings.Join(names, " "), fleet.AppKey("shop")) {
		t.Fatalf("after AnnouncePending: serial %q names %v (%v), want a bump naming %s", announced, names, err, fleet.AppKey("shop"))
	}
	if err := f.w.AnnouncePending(ctx); err != nil || f.serial(t) != announced {
		t.Fatalf("AnnouncePending with nothing pending bumped (%v)", err)
	}
}

// ctxStore answers the serial's reads with the error of the context they are made
// under, once it has ended (a store that hangs until then answers just that).
type ctxStore struct{ store.Store }

func (s ctxStore) Get(ctx context.Context, key string) (store.Object, error) {
	if key == fleet.KeySerial && ctx.Err() != nil {
		return store.Object{}, ctx.Err()
	}
	return s.Store.Get(ctx, key)
}
