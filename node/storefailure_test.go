package node_test

// The safety net of issue 11: scenario tests for the rules that keep a node from
// withdrawing routes or corrupting another store's serial. Each drives a node through its
// steps and its API in process (stepNode) over a dir store, optionally wrapped by
// faultStore, and acts between two passes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// faultStore wraps a dir store and fails the reads a reconcile pass makes of the fleet's
// objects; afterSerial, when set, runs once after the next read of the serial (between a
// pass's observation and its reads).
type faultStore struct {
	store.Store

	failList atomic.Bool // List of apps/, domains/, nodes/ fails (ErrUnavailable)
	failGet  atomic.Bool // Get of an object under apps/, domains/, nodes/ fails

	failedLists atomic.Int64
	failedGets  atomic.Int64

	afterSerial atomic.Pointer[func()]
}

func newFaultStore(t *testing.T, path string) *faultStore {
	t.Helper()
	st, err := dir.New(path)
	if err != nil {
		t.Fatal(err)
	}
	return &faultStore{Store: st}
}

func fleetObjectKey(key string) bool {
	return strings.HasPrefix(key, fleet.PrefixApps) || strings.HasPrefix(key, fleet.PrefixDomains) ||
		strings.HasPrefix(key, fleet.PrefixNodes)
}

func (f *faultStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if f.failList.Load() && fleetObjectKey(prefix) {
		f.failedLists.Add(1)
		return nil, fmt.Errorf("faultStore: listing %s: %w", prefix, store.ErrUnavailable)
	}
	return f.Store.List(ctx, prefix)
}

func (f *faultStore) Get(ctx context.Context, key string) (store.Object, error) {
	if f.failGet.Load() && fleetObjectKey(key) {
		f.failedGets.Add(1)
		return store.Object{}, fmt.Errorf("faultStore: reading %s: %w", key, store.ErrUnavailable)
	}
	return f.Store.Get(ctx, key)
}

func (f *faultStore) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	obj, changed, err := f.Store.GetIfChanged(ctx, key, etag)
	if key == fleet.KeySerial {
		if h := f.afterSerial.Swap(nil); h != nil {
			(*h)()
		}
	}
	return obj, changed, err
}

// readSerial returns the raw serial object and its parsed counter and epoch.
func readSerial(t *testing.T, st store.Store) (raw []byte, n uint64, epoch string) {
	t.Helper()
	obj, err := st.Get(context.Background(), fleet.KeySerial)
	if err != nil {
		t.Fatalf("reading the serial: %v", err)
	}
	n, epoch, err = store.ParseSerialEpoch(obj.Value)
	if err != nil {
		t.Fatal(err)
	}
	return obj.Value, n, epoch
}

func writeSerial(t *testing.T, st store.Store, value []byte) {
	t.Helper()
	if _, err := st.Put(context.Background(), fleet.KeySerial, value, store.Condition{}); err != nil {
		t.Fatal(err)
	}
}

func otherEpoch(epoch string) string {
	for {
		if e := store.NewEpoch(); e != epoch {
			return e
		}
	}
}

// assertDraining checks that both routing endpoints and readyz answer 503 "draining"
// with Retry-After, and never a document.
func assertDraining(t *testing.T, n *stepNode, when string) {
	t.Helper()
	for _, p := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/readyz"} {
		rec := n.get(p, testIngressToken)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"error":"draining"`) ||
			rec.Header().Get("Retry-After") == "" {
			t.Fatalf("%s: %s: %d (Retry-After %q) %s, want 503 draining: no pass has completed",
				when, p, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
		if strings.Contains(rec.Body.String(), `"routes"`) {
			t.Fatalf("%s: %s: served a document before a pass completed: %s", when, p, rec.Body)
		}
	}
}

// assertServing checks that n serves the document before, byte for byte.
func assertServing(t *testing.T, n *stepNode, before []byte, when string) {
	t.Helper()
	if during := n.routes(); !bytes.Equal(before, during) {
		t.Fatalf("%s: the document changed:\nbefore %s\nafter  %s\n%s", when, before, during, n.Logs.String())
	}
}

// TestNoDocumentWhileEveryPassFails: a node whose store fails from the start never
// completes a pass, so it must keep answering 503 draining, pass after pass, never a
// (necessarily empty) 200 that would withdraw every route from every ingress.
func TestNoDocumentWhileEveryPassFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		arm    func(*faultStore)
		failed func(*faultStore) int64
	}{
		{"list fails", func(f *faultStore) { f.failList.Store(true) }, func(f *faultStore) int64 { return f.failedLists.Load() }},
		{"get fails", func(f *faultStore) { f.failGet.Store(true) }, func(f *faultStore) int64 { return f.failedGets.Load() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "vps-a", t.TempDir())
			fs := newFaultStore(t, cfg.Store.Dir.Path)
			seedFleet(t, fs, "shop") // there is something to read, but it cannot be read
			tc.arm(fs)
			n := newStepNode(t, cfg, fs)
			n.beat()
			for i := range 5 {
				if err := n.pass(); err == nil {
					t.Fatalf("pass %d succeeded on a failing store", i)
				}
				assertDraining(t, n, fmt.Sprintf("after failed pass %d", i))
			}
			if tc.failed(fs) < 5 {
				t.Fatalf("%d failed reads in five passes, want each pass to fail at a read", tc.failed(fs))
			}
			if st := n.storeState(); st.Reachable || st.Error == "" {
				t.Fatalf("status after failed passes: %+v, want the store unreachable with the error", st)
			}
		})
	}
}

// TestLastDocumentServedWhenStoreListFails: once a document is published, a pass whose
// LIST fails (the serial moved, so the pass must re-list) changes nothing: the last good
// document keeps being served, routes included, not an empty listing's document.
func TestLastDocumentServedWhenStoreListFails(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	fs := newFaultStore(t, cfg.Store.Dir.Path)
	seedFleet(t, fs, "shop")
	n := newStepNode(t, cfg, fs)
	n.start()
	before := n.routes()

	fs.failList.Store(true)
	seedFleet(t, fs, "shop", "blog") // moves the serial: the next passes must list
	for range 3 {
		if err := n.pass(); err == nil {
			t.Fatal("a pass succeeded while LIST fails")
		}
		assertServing(t, n, before, "while the store's LIST fails")
	}
	if fs.failedLists.Load() < 3 {
		t.Fatalf("%d failed listings in three passes", fs.failedLists.Load())
	}
	if st := n.storeState(); st.Reachable || !strings.Contains(st.Error, "listing") {
		t.Fatalf("status while LIST fails: %+v, want the store unreachable with the listing error", st)
	}

	// Recovery: the change made during the outage is published.
	fs.failList.Store(false)
	n.mustPass()
	if h := n.hosts(); !strings.Contains(h, "blog.apps.example.com") {
		t.Fatalf("after recovery: hosts %s, want blog routed", h)
	}
}

// replacedStoreScenario publishes shop, then lets replace rewrite the store behind the
// node between two passes (shop deleted, the serial rewritten) and checks that the node
// treats it as an outage: the last document is kept and writes are refused (503,
// nothing written).
func replacedStoreScenario(t *testing.T, replace func(t *testing.T, st store.Store, n uint64, epoch string) []byte) {
	t.Helper()
	cfg := testConfig(t, "vps-a", t.TempDir())
	st := openDir(t, cfg.Store.Dir.Path)
	seedFleet(t, st, "shop")
	n := newStepNode(t, cfg, st)
	n.start()
	n.mustPass() // a pass that found the serial unchanged: this one is committed
	before := n.routes()
	if h := n.hosts(); h != "shop.apps.example.com" {
		t.Fatalf("before: hosts %s, want shop", h)
	}

	_, cur, epoch := readSerial(t, st)
	// The replacement store no longer has shop.
	if err := st.Delete(context.Background(), fleet.AppKey("shop"), ""); err != nil {
		t.Fatal(err)
	}
	foreign := replace(t, st, cur, epoch)
	n.pass() // fails: the store is not the one served
	assertServing(t, n, before, "after the store was replaced")
	if s := n.storeState(); s.Reachable || s.Error == "" {
		t.Fatalf("status: %+v, want the store reported unreachable", s)
	}

	if rec := n.do("PUT", "/v1/apps/blog", testAdminToken, `{"account":"acme"}`); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("write to a replaced store: %d %s, want 503", rec.Code, rec.Body)
	}
	if _, err := st.Get(context.Background(), fleet.AppKey("blog")); err == nil {
		t.Fatal("a write landed in the replaced store")
	}
	if raw, _, _ := readSerial(t, st); !bytes.Equal(raw, foreign) {
		t.Fatalf("the node moved the replaced store's serial: %q, was %q", raw, foreign)
	}
	n.pass()
	assertServing(t, n, before, "a pass later")
}

// TestForeignEpochWithHigherSerialKeepsDocumentAndRefusesWrites: a serial with another
// epoch names another store even when its counter is ahead of the one this node saw.
func TestForeignEpochWithHigherSerialKeepsDocumentAndRefusesWrites(t *testing.T) {
	t.Parallel()
	replacedStoreScenario(t, func(t *testing.T, st store.Store, n uint64, epoch string) []byte {
		v := store.FormatSerial(n+10, otherEpoch(epoch))
		writeSerial(t, st, v)
		return v
	})
}

// TestSerialGoingBackwardsKeepsDocumentAndRefusesWrites: the same epoch with a lower
// counter is this store restored from an old copy.
func TestSerialGoingBackwardsKeepsDocumentAndRefusesWrites(t *testing.T) {
	t.Parallel()
	replacedStoreScenario(t, func(t *testing.T, st store.Store, n uint64, epoch string) []byte {
		if n < 2 {
			t.Fatalf("serial %d: the scenario needs at least 2", n)
		}
		v := store.FormatSerial(n-1, epoch)
		writeSerial(t, st, v)
		return v
	})
}

// TestWriteNeverBumpsAForeignSerial: the store's serial is replaced by another epoch's
// (with a counter ahead, so only the epoch tells) between two reconcile passes, and a
// write arrives before the next pass has seen it. The write must not bump that serial:
// doing so would help another store's serial look like this one's to every node.
func TestWriteNeverBumpsAForeignSerial(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	st := openDir(t, cfg.Store.Dir.Path)
	seedFleet(t, st, "shop")
	n := newStepNode(t, cfg, st)
	n.start()
	n.mustPass() // the current serial and epoch committed
	before := n.routes()

	_, cur, epoch := readSerial(t, st)
	foreign := store.FormatSerial(cur+5, otherEpoch(epoch))
	writeSerial(t, st, foreign)

	if rec := n.do("PUT", "/v1/apps/blog", testAdminToken, `{"account":"acme"}`); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a write whose serial bump was refused answered %d %s, want 503 (never a 2xx that will not be published)", rec.Code, rec.Body)
	}
	if raw, _, _ := readSerial(t, st); !bytes.Equal(raw, foreign) {
		t.Fatalf("a write bumped another store's serial: %q, was %q", raw, foreign)
	}

	// Once the reconciler sees the foreign serial it keeps the last document.
	n.pass()
	if n.storeState().Reachable {
		t.Fatal("the store reported reachable after its serial changed epoch")
	}
	assertServing(t, n, before, "after the serial changed epoch")
	if raw, _, _ := readSerial(t, st); !bytes.Equal(raw, foreign) {
		t.Fatalf("the node bumped another store's serial: %q, was %q", raw, foreign)
	}
}

// TestStatusReadableWhilePassesRun reads /v1/status continuously while passes run and
// writes change what each reports. Run under -race: the status snapshot must be taken
// under the reconciler's lock.
func TestStatusReadableWhilePassesRun(t *testing.T) {
	t.Parallel()
	n := newStepNode(t, testConfig(t, "vps-a", t.TempDir()), nil)
	n.start()

	done := make(chan struct{})
	errc := make(chan error, 1)
	var reads atomic.Int64
	go func() {
		defer close(errc)
		for {
			select {
			case <-done:
				return
			default:
			}
			rec := n.get("/v1/status", testAdminToken)
			var s struct {
				Ready    bool            `json:"ready"`
				LastPass json.RawMessage `json:"lastPass"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || rec.Code != http.StatusOK || !s.Ready || len(s.LastPass) == 0 {
				errc <- fmt.Errorf("status: %d %s %v", rec.Code, rec.Body, err)
				return
			}
			reads.Add(1)
		}
	}()

	// Each write changes the application (and a malformed object changes the skipped
	// list), so every pass derives and rewrites the status; passes go on until the
	// reader has read the status several times.
	n.must(http.StatusCreated, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	for i := 0; i < 30 || reads.Load() < 10; i++ {
		n.must(http.StatusOK, "PUT", "/v1/apps/shop", testAdminToken,
			fmt.Sprintf(`{"account":"acme","placement":["vps-a"],"health":{"path":"/h%d"}}`, i))
		putRaw(t, n.St, fmt.Sprintf("apps/broken-%d.json", i%3), []byte(fmt.Sprintf(`{"name": %d`, i)))
		n.mustPass()
		if i > 10000 {
			t.Fatal("the status reader read nothing in 10 000 passes")
		}
	}
	close(done)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestWipedStoreMidPassIsDiscarded: the store directory is swapped for an empty one
// after a pass read the (moved) serial and before it read the objects. The pass must
// not derive from what the empty store answers under the serial it already read: the
// document keeps its routes and the store is reported unreachable (foreign).
func TestWipedStoreMidPassIsDiscarded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		bump func(t *testing.T, st store.Store) // moves the serial
	}{
		// No names: the pass lists the store.
		{"full listing", func(t *testing.T, st store.Store) {
			seedFleet(t, st, "shop", "blog")
			if _, err := store.BumpSerial(context.Background(), st); err != nil {
				t.Fatal(err)
			}
		}},
		// One step naming apps/shop: the pass GETs it, and reads it absent.
		{"one step", func(t *testing.T, st store.Store) {
			b, _ := json.Marshal(fleet.App{Name: "shop", Account: "acme", Placement: []string{"vps-b", "vps-c"}})
			if _, err := st.Put(context.Background(), fleet.AppKey("shop"), b, store.Condition{}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.BumpSerial(context.Background(), st, fleet.AppKey("shop")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storeDir := filepath.Join(t.TempDir(), "store")
			cfg := testConfig(t, "vps-a", storeDir)
			fs := newFaultStore(t, storeDir)
			seedFleet(t, fs, "shop")
			n := newStepNode(t, cfg, fs)
			n.start()
			n.mustPass() // the current serial committed
			before := n.routes()

			tc.bump(t, fs)
			wipe := func() {
				if err := os.Rename(storeDir, storeDir+".old"); err != nil {
					t.Error(err)
				}
				if err := os.Mkdir(storeDir, 0o700); err != nil {
					t.Error(err)
				}
			}
			fs.afterSerial.Store(&wipe) // the pass reads the moved serial, then the store is wiped
			n.pass()
			if fs.afterSerial.Load() != nil {
				t.Fatal("the pass did not read the serial")
			}
			assertServing(t, n, before, "a pass straddling the wipe")
			if n.storeState().Reachable {
				t.Fatal("status: the wiped store reported reachable")
			}
			n.pass()
			assertServing(t, n, before, "a pass over the wiped store")
			if _, err := os.Stat(filepath.Join(storeDir, "serial")); err == nil {
				t.Fatal("the node recreated the serial in the wiped store")
			}
		})
	}
}
