package reconcile_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// TestARestartRefusesAStoreRestoredFromBeforeTheLastServedSerial: the state dir keeps the
// last serial the node served, not only the one its revision was first derived at, so a
// store restored from a backup taken between the two is foreign at a restart, and the
// node keeps serving what it served (fleetsim -restorecrash, seeds 3, 9 and 27 of 60:
// vps-c served serial 16, restarted, and served serial 12, another revision).
func TestARestartRefusesAStoreRestoredFromBeforeTheLastServedSerial(t *testing.T) {
	st := openDir(t, t.TempDir())
	n := newSteppedNode(t, st)
	nodetest.Put(t, st, fleet.AppKey("shop"), fleet.App{Name: "shop", Account: "acme", Placement: []string{}})
	n.step(t, st) // serial 1: the revision with shop
	first, epoch := n.id.Mark()
	for range 3 { // the serial moves on (heartbeats, instance changes elsewhere); the revision does not
		n.step(t, st)
	}
	last, _ := n.id.Mark()
	if last != first+3 {
		t.Fatalf("committed serial %d, want %d", last, first+3)
	}
	doc := n.pub.Current().Doc()

	// The store restored from a backup taken at the serial after the revision's first
	// (same epoch, behind the last served), and the node restarted over it.
	setSerial(t, st, first+1, epoch)
	if mem, _, err := reconcile.LoadServed(n.stateDir); err != nil || mem.Serial != last || mem.Epoch != epoch {
		t.Fatalf("the state dir remembers %+v (%v), want the last served, %d of %q", mem, err, last, epoch)
	}
	m := n.restarted(t, st)
	if err := m.pass(); !errors.Is(err, store.ErrForeign) {
		t.Fatalf("a restart over a store restored to serial %d (served up to %d): %v, want ErrForeign", first+1, last, err)
	}
	if !m.id.Foreign() {
		t.Fatal("the restored store was accepted")
	}
	if cur := m.pub.Current(); cur == nil || cur.Doc().Revision != doc.Revision {
		t.Fatalf("serving %v, want the remembered revision %q", cur, doc.Revision)
	}
	if n, _, _ := m.pub.Current().Mark(); n != last {
		t.Fatalf("the remembered document labelled serial %d, want the last served, %d", n, last)
	}
}

// setSerial puts st's serial back to n of epoch, as a restored backup does.
func setSerial(t *testing.T, st store.Store, n uint64, epoch string) {
	t.Helper()
	o, err := st.Get(context.Background(), store.SerialKey)
	if err == nil {
		_, err = st.Put(context.Background(), store.SerialKey, store.FormatSerial(n, epoch), store.Condition{IfMatch: o.ETag})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestAnAdoptedStoreBehindWhatWasServedHasItsSerialAdvanced: adopting a store restored
// from a backup (the same epoch, a serial behind the last one served) moves its serial
// past the last one served before anything is labelled with it, so no document this
// node serves carries a serial below one it served (ingresses keep the highest serial
// of an epoch they hold and would ignore every new document until the store caught up;
// ?wait=applied would count an ingress holding the pre-restore document as holding
// writes made after the adopt). fleetsim: the label floor its model kept across an
// adopted restore is gone. Writes wait for the adopting pass: the store stays foreign
// (writes refused) until that pass has advanced the serial and committed it; a write
// accepted in between was announced on the restored store's own serial, below the one
// served (hostile review 3: 4, with 7 served), and answered "applied" at once.
func TestAnAdoptedStoreBehindWhatWasServedHasItsSerialAdvanced(t *testing.T) {
	ctx := context.Background()
	d := openDir(t, t.TempDir())
	st := &listHook{Store: d}
	node := newSteppedNode(t, st)
	id, pub, stateDir, pass := node.id, node.pub, node.stateDir, node.pass
	nodetest.Put(t, d, fleet.AppKey("shop"), fleet.App{Name: "shop", Account: "acme", Placement: []string{}})
	node.step(t, d)
	restoredSerial, epoch := id.Mark()
	restoredRev := pub.Current().Doc().Revision
	for _, app := range []string{"blog", "wiki"} { // written after the backup
		nodetest.Put(t, d, fleet.AppKey(app), fleet.App{Name: app, Account: "acme", Placement: []string{}})
		node.step(t, d)
	}
	served, _, _ := pub.Current().Mark()
	if pub.Current().Doc().Revision == restoredRev {
		t.Fatal("the writes after the backup did not move the revision: the test would prove nothing")
	}

	// The backup put back: shop alone, the serial it had.
	for _, app := range []string{"blog", "wiki"} {
		if err := d.Delete(ctx, fleet.AppKey(app), ""); err != nil {
			t.Fatal(err)
		}
	}
	setSerial(t, d, restoredSerial, epoch)
	if err := pass(); !errors.Is(err, store.ErrForeign) {
		t.Fatalf("a store gone back from %d to %d: %v, want ErrForeign", served, restoredSerial, err)
	}
	if err := reconcile.RequestStoreAdopt(stateDir); err != nil {
		t.Fatal(err)
	}
	during := "the adopting pass read nothing"
	st.hook = func() { // inside the adopting pass's full read, before it commits
		during = ""
		if !id.Foreign() {
			during = "the store accepted writes (not foreign) before the adopting pass committed it"
		}
	}
	if err := pass(); err != nil {
		t.Fatalf("the adopting pass: %v", err)
	}
	if during != "" {
		t.Fatal(during)
	}
	if id.Foreign() {
		t.Fatalf("foreign after the adopting pass: %s", id.ForeignReason())
	}
	o, err := d.Get(ctx, store.SerialKey)
	if err != nil {
		t.Fatal(err)
	}
	n, e, err := store.ParseSerialEpoch(o.Value)
	if err != nil || e != epoch || n != served+1 {
		t.Fatalf("the adopted store's serial: %d of %q (%v), want %d of %q: one past the last served", n, e, err, served+1, epoch)
	}
	cur := pub.Current()
	if got, _, _ := cur.Mark(); got != served+1 || cur.Doc().Revision != restoredRev {
		t.Fatalf("after the adopt: serial %d, revision %s; want serial %d, the backup's revision %s", got, cur.Doc().Revision, served+1, restoredRev)
	}
}

// listHook runs hook (once) at the first listing after it is set: inside a pass's full
// read, before the pass commits.
type listHook struct {
	store.Store
	hook func()
}

func (s *listHook) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if h := s.hook; h != nil {
		s.hook = nil
		h()
	}
	return s.Store.List(ctx, prefix)
}

// steppedNode is one node's reconciler over a store, stepped on a virtual clock: pass
// runs a pass two seconds after the last and saves what it served, as the node's loop
// does.
type steppedNode struct {
	r        *reconcile.Reconciler
	pub      *publish.Publisher
	id       *store.Identity
	stateDir string
	now      time.Time
}

func newSteppedNode(t *testing.T, st store.Store) *steppedNode {
	n := &steppedNode{id: &store.Identity{}, stateDir: t.TempDir(), now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	n.build(st, nil, nil)
	return n
}

// build makes n's publisher and reconciler over st, with what its state dir held at
// start (nil: nothing).
func (n *steppedNode) build(st store.Store, mem *reconcile.Memory, doc *routing.Document) {
	n.pub = publish.New(render.Options{}, "", n.id.Mark)
	n.r = reconcile.New(reconcile.Options{
		Store: st, Publisher: n.pub, Log: slog.New(slog.DiscardHandler),
		Identity: n.id, FleetOptions: fleet.GenerateOptions, Heartbeat: 15 * time.Second,
		StateDir: n.stateDir, Memory: mem, MemoryDoc: doc,
	})
}

func (n *steppedNode) pass() error {
	n.now = n.now.Add(2 * time.Second)
	err := n.r.Pass(context.Background(), n.now, false)
	n.r.SaveServed()
	return err
}

// step bumps st's serial (a write) and runs a pass; either failing fails t.
func (n *steppedNode) step(t *testing.T, st store.Store) {
	t.Helper()
	if _, err := store.BumpSerial(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if err := n.pass(); err != nil {
		t.Fatal(err)
	}
}
