package node_test

// The safety net of issue 11: scenario tests for the rules that keep a node from
// withdrawing routes or corrupting another store's serial. Each drives a node through its
// steps and its API in process (testnode.Stepped) over a dir store, optionally wrapped by
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
	"time"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/store"
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
	return &faultStore{Store: openDir(t, path)}
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

// assertDraining checks that both routing endpoints and readyz answer 503 "draining"
// with Retry-After, and never a document.
func assertDraining(t *testing.T, n *testnode.Stepped, when string) {
	t.Helper()
	for _, p := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/readyz"} {
		rec := n.Get(p, testIngressToken)
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
func assertServing(t *testing.T, n *testnode.Stepped, before []byte, when string) {
	t.Helper()
	if during := n.Routes(); !bytes.Equal(before, during) {
		t.Fatalf("%s: the document changed:\nbefore %s\nafter  %s\n%s", when, before, during, n.Logs.String())
	}
}

// TestNoDocumentWhileEveryPassFails: a node built and serving answers 503 draining on
// its routing endpoints and readyz before any pass (the heartbeat may run first); one
// whose store fails from the start never completes a pass, so it must keep answering
// 503 draining, pass after pass, never a (necessarily empty) 200 that would withdraw
// every route from every ingress.
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
			n := testnode.NewStepped(t, cfg, fs)
			n.Beat() // the heartbeat may run first: still no pass
			assertDraining(t, n, "before the first pass")
			for i := range 5 {
				if err := n.Pass(); err == nil {
					t.Fatalf("pass %d succeeded on a failing store", i)
				}
				assertDraining(t, n, fmt.Sprintf("after failed pass %d", i))
			}
			if tc.failed(fs) < 5 {
				t.Fatalf("%d failed reads in five passes, want each pass to fail at a read", tc.failed(fs))
			}
			if st := n.Status().Store; st.Reachable || st.Error == "" {
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
	n := testnode.NewStepped(t, cfg, fs)
	n.Tick()
	before := n.Routes()

	fs.failList.Store(true)
	seedFleet(t, fs, "shop", "blog") // moves the serial: the next passes must list
	var firstFailed time.Time
	for i := range 3 {
		if err := n.Pass(); err == nil {
			t.Fatal("a pass succeeded while LIST fails")
		}
		if i == 0 {
			firstFailed = n.Now
		}
		assertServing(t, n, before, "while the store's LIST fails")
	}
	if fs.failedLists.Load() < 3 {
		t.Fatalf("%d failed listings in three passes", fs.failedLists.Load())
	}
	// Unreachable since the first failing pass, not the latest.
	if st := n.Status().Store; st.Reachable || !strings.Contains(st.Error, "listing") || st.UnreachableSince == nil || !st.UnreachableSince.Equal(firstFailed) {
		t.Fatalf("status while LIST fails: %+v, want the store unreachable since %s with the listing error", st, firstFailed.UTC())
	}

	// Recovery: the change made during the outage is published.
	fs.failList.Store(false)
	n.MustPass()
	if h := n.Hosts(); !strings.Contains(h, "blog.apps.example.com") {
		t.Fatalf("after recovery: hosts %s, want blog routed", h)
	}
}

// TestStatusReadableWhilePassesRun reads /v1/status continuously while passes run and
// writes change what each reports. Run under -race: the status snapshot must be taken
// under the reconciler's lock.
func TestStatusReadableWhilePassesRun(t *testing.T) {
	t.Parallel()
	n := testnode.NewStepped(t, testConfig(t, "vps-a", t.TempDir()), nil)
	n.Tick()

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
			rec := n.Get("/v1/status", testAdminToken)
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
	n.Must(http.StatusCreated, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	for i := 0; i < 30 || reads.Load() < 10; i++ {
		n.Must(http.StatusOK, "PUT", "/v1/apps/shop", testAdminToken,
			fmt.Sprintf(`{"account":"acme","placement":["vps-a"],"health":{"path":"/h%d"}}`, i))
		putRaw(t, n.St, fmt.Sprintf("apps/broken-%d.json", i%3), []byte(fmt.Sprintf(`{"name": %d`, i)))
		n.MustPass()
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
			n := testnode.NewStepped(t, cfg, fs)
			n.Tick()
			n.MustPass() // the current serial committed
			before := n.Routes()

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
			n.Pass()
			if fs.afterSerial.Load() != nil {
				t.Fatal("the pass did not read the serial")
			}
			assertServing(t, n, before, "a pass straddling the wipe")
			if n.Status().Store.Reachable {
				t.Fatal("status: the wiped store reported reachable")
			}
			n.Pass()
			assertServing(t, n, before, "a pass over the wiped store")
			if _, err := os.Stat(filepath.Join(storeDir, "serial")); err == nil {
				t.Fatal("the node recreated the serial in the wiped store")
			}
		})
	}
}
