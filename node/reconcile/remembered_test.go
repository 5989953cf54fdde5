package reconcile_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// countedLists counts the listings of a store (a pass over a foreign store lists none).
type countedLists struct {
	store.Store
	lists int
}

func (s *countedLists) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	s.lists++
	return s.Store.List(ctx, prefix)
}

// servedShop runs a stepped node over a dir store at storeDir until it serves shop at
// serial 3, and returns it with its store closed (the node stopped).
func servedShop(t *testing.T, storeDir string) *steppedNode {
	t.Helper()
	st, err := dir.New(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := newSteppedNode(t, st)
	nodetest.Put(t, st, fleet.AppKey("shop"), fleet.App{Name: "shop", Account: "acme", Placement: []string{}})
	nodetest.Put(t, st, fleet.ClaimKey("shop.example.org"), fleet.Claim{Host: "shop.example.org", Account: "acme", App: "shop"})
	for range 3 {
		n.step(t, st)
	}
	if !routes(n.pub.Current().Doc(), "shop") {
		t.Fatal("shop not routed before the restart")
	}
	return n
}

// restarted is n's node started again on its state dir (what the node reads at start:
// LoadServed, the identity seeded) over st.
func (n *steppedNode) restarted(t *testing.T, st store.Store) *steppedNode {
	t.Helper()
	mem, doc, err := reconcile.LoadServed(n.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	m := &steppedNode{id: &store.Identity{}, stateDir: n.stateDir, now: n.now}
	if mem != nil && mem.Seeds() {
		m.id.Seed(mem.Serial, mem.Epoch)
	}
	m.build(st, mem, doc)
	return m
}

func openDir(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := dir.New(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestRestartOnAForeignStoreServesTheRememberedDocument: a node restarted on its state
// dir over a store that is not the one it served (an unmounted disk: empty; its serial
// and objects deleted; another fleet's store; a copy restored from before the serial it
// served) serves the document it remembers, never what that store holds (an empty
// document above all), calls the store foreign (writes refused) and writes nothing
// there. The store is found foreign at its serial: nothing of it is listed or read.
// The serial-less cases are the mutation check's M08 (a seeded identity taking a store
// without a serial for a new one).
func TestRestartOnAForeignStoreServesTheRememberedDocument(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, storeDir string, epoch string)
	}{
		{"empty store", func(t *testing.T, storeDir, _ string) {
			if err := os.RemoveAll(storeDir); err != nil {
				t.Fatal(err)
			}
		}},
		{"serial and objects deleted", func(t *testing.T, storeDir, _ string) {
			for _, p := range []string{"serial", "apps", "domains"} {
				if err := os.RemoveAll(filepath.Join(storeDir, p)); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"another fleet's store", func(t *testing.T, storeDir, _ string) {
			if err := os.RemoveAll(storeDir); err != nil {
				t.Fatal(err)
			}
			st := openDir(t, storeDir)
			nodetest.Put(t, st, fleet.AppKey("other"), fleet.App{Name: "other", Account: "them", Placement: []string{}})
			if _, err := store.BumpSerial(context.Background(), st); err != nil {
				t.Fatal(err)
			}
		}},
		{"restored older copy", func(t *testing.T, storeDir, epoch string) {
			if err := os.RemoveAll(filepath.Join(storeDir, "domains")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(storeDir, "serial"), store.FormatSerial(1, epoch), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storeDir := filepath.Join(t.TempDir(), "store")
			before := servedShop(t, storeDir)
			served := before.pub.Current().Doc().Revision
			_, epoch := before.id.Mark()
			tc.swap(t, storeDir, epoch)
			d := openDir(t, storeDir)
			swapped := storeBytes(t, storeDir)
			st := &countedLists{Store: d}
			n := before.restarted(t, st)
			for range 3 {
				if err := n.pass(); !errors.Is(err, store.ErrForeign) {
					t.Fatalf("a pass over the swapped store: %v, want ErrForeign", err)
				}
				cur := n.pub.Current()
				if cur == nil || cur.Doc().Revision != served || !routes(cur.Doc(), "shop") {
					t.Fatalf("serving %v, want the remembered document (revision %s)", cur, served)
				}
			}
			if !n.id.Foreign() || n.id.ForeignReason() == "" || !n.r.Status().Remembered {
				t.Fatalf("foreign %v (%q), remembered %v: want a foreign store with its reason", n.id.Foreign(), n.id.ForeignReason(), n.r.Status().Remembered)
			}
			// Nor is anything else of the node's: its heartbeat (its own record) and the
			// ingress book's flushes (each past the last's write gap) after a poll.
			self.New(self.Options{Store: d, Identity: n.id, Log: slog.New(slog.DiscardHandler), Name: "vps-a",
				Address: "10.0.0.1", APIPort: 7400, NodeTTL: time.Minute,
				Settings:  func() fleet.NodeSettings { return fleet.NodeSettings{} },
				Instances: func() map[string]fleet.Instance { return nil }, OnAnnounced: func() {}}).Heartbeat(t.Context(), n.now)
			book := ingress.New(ingress.Options{Store: d, Log: slog.New(slog.DiscardHandler), Self: "vps-a",
				Config: ingress.Defaults(), Foreign: n.id.Foreign, Known: n.id.Mark,
				Current: func() (string, uint64) { return served, 3 }})
			for i := range 3 {
				p, why := book.Begin(ingress.Report{Name: "edge-1", Kind: api.KindPlugin, Serial: 3, Revision: served})
				if why != "" {
					t.Fatal(why)
				}
				book.End(p, nil)
				book.Flush(t.Context(), n.now.Add(time.Duration(i+1)*2*ingress.MinWriteGap))
			}
			if st.lists != 0 {
				t.Errorf("the passes listed the foreign store %d times: it is foreign at its serial, before anything of it is read", st.lists)
			}
			if after := storeBytes(t, storeDir); !maps.Equal(swapped, after) {
				t.Fatalf("the restarted node wrote into the foreign store:\nbefore %v\nafter  %v", swapped, after)
			}
		})
	}
}

// storeBytes is every file under a dir store, by path.
func storeBytes(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFirstStartOnAnEmptyStoreRemembersNothing: an empty state dir on an empty store
// starts as before (nothing foreign), and a restart over the store it served is not
// foreign either: it serves what it served.
func TestFirstStartOnAnEmptyStoreRemembersNothing(t *testing.T) {
	storeDir := filepath.Join(t.TempDir(), "store")
	st := openDir(t, storeDir)
	n := newSteppedNode(t, st)
	if err := n.pass(); err != nil || n.id.Foreign() {
		t.Fatalf("a first pass over an empty store: %v, foreign %v", err, n.id.Foreign())
	}
	nodetest.Put(t, st, fleet.AppKey("shop"), fleet.App{Name: "shop", Account: "acme", Placement: []string{}})
	nodetest.Put(t, st, fleet.ClaimKey("shop.example.org"), fleet.Claim{Host: "shop.example.org", Account: "acme", App: "shop"})
	if _, err := n.id.Bump(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if err := n.pass(); err != nil {
		t.Fatal(err)
	}
	m := n.restarted(t, st)
	if err := m.pass(); err != nil || m.id.Foreign() {
		t.Fatalf("a restart over the store it served: %v, foreign %v (%s)", err, m.id.Foreign(), m.id.ForeignReason())
	}
	if got, want := m.pub.Current().Doc().Revision, n.pub.Current().Doc().Revision; got != want {
		t.Fatalf("after the restart: revision %s, want the one served, %s", got, want)
	}
}

// TestStoreAdoptAcceptsTheStoreAsItIs: the operator's adopt request (`scafo-node store
// adopt`), made while the node runs over a foreign store or before it starts, makes it
// accept the store as it is: it serves what the store holds (here nothing), the request
// is consumed, and a restart after that remembers the adopted store.
func TestStoreAdoptAcceptsTheStoreAsItIs(t *testing.T) {
	for _, running := range []bool{true, false} {
		t.Run(map[bool]string{true: "running node", false: "stopped node"}[running], func(t *testing.T) {
			storeDir := filepath.Join(t.TempDir(), "store")
			before := servedShop(t, storeDir)
			if err := os.RemoveAll(storeDir); err != nil { // an empty disk, deliberately
				t.Fatal(err)
			}
			st := openDir(t, storeDir)
			if !running {
				if err := reconcile.RequestStoreAdopt(before.stateDir); err != nil {
					t.Fatal(err)
				}
			}
			n := before.restarted(t, st)
			if running {
				if err := n.pass(); !errors.Is(err, store.ErrForeign) || !routes(n.pub.Current().Doc(), "shop") {
					t.Fatalf("before adopting: %v, want ErrForeign and the remembered document", err)
				}
				if err := reconcile.RequestStoreAdopt(n.stateDir); err != nil {
					t.Fatal(err)
				}
			}
			if err := n.pass(); err != nil || n.id.Foreign() {
				t.Fatalf("the adopting pass: %v, foreign %v", err, n.id.Foreign())
			}
			if doc := n.pub.Current().Doc(); len(doc.Routes) != 0 || n.r.Status().Remembered {
				t.Fatalf("after adopting an empty store: routes %+v, remembered %v; want what the store holds", doc.Routes, n.r.Status().Remembered)
			}
			if reconcile.AdoptRequested(n.stateDir) {
				t.Fatal("the adopt request was not consumed")
			}
			nodetest.Put(t, st, fleet.AppKey("blog"), fleet.App{Name: "blog", Account: "acme", Placement: []string{}})
			if _, err := n.id.Bump(context.Background(), st); err != nil {
				t.Fatalf("a write after the adopt: %v", err)
			}
			if err := n.pass(); err != nil {
				t.Fatal(err)
			}
			m := n.restarted(t, st)
			if err := m.pass(); err != nil || m.id.Foreign() {
				t.Fatalf("a restart after adopting: %v, foreign %v", err, m.id.Foreign())
			}
			if got, want := m.pub.Current().Doc().Revision, n.pub.Current().Doc().Revision; got != want {
				t.Fatalf("after the restart: revision %s, want the adopted store's %s", got, want)
			}
		})
	}
}
