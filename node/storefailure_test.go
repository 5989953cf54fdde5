package node_test

// A node's store outage, through its steps and its API in process (testnode.Stepped).

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

// faultStore wraps a dir store and fails the listings a reconcile pass makes of the
// fleet's objects while failList is on; afterSerial, when set, runs once after the next
// read of the serial (between a pass's observation and its reads).
type faultStore struct {
	store.Store
	failList    atomic.Bool
	failedLists atomic.Int64
	afterSerial atomic.Pointer[func()]
}

func (f *faultStore) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	obj, changed, err := f.Store.GetIfChanged(ctx, key, etag)
	if h := f.afterSerial.Swap(nil); h != nil && key == fleet.KeySerial {
		(*h)()
	}
	return obj, changed, err
}

func (f *faultStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if f.failList.Load() && (strings.HasPrefix(prefix, fleet.PrefixApps) || strings.HasPrefix(prefix, fleet.PrefixDomains) ||
		strings.HasPrefix(prefix, fleet.PrefixNodes)) {
		f.failedLists.Add(1)
		return nil, fmt.Errorf("faultStore: listing %s: %w", prefix, store.ErrUnavailable)
	}
	return f.Store.List(ctx, prefix)
}

// assertServing checks that n serves the document before, byte for byte.
func assertServing(t *testing.T, n *testnode.Stepped, before []byte, when string) {
	t.Helper()
	if during := n.Routes(); !bytes.Equal(before, during) {
		t.Fatalf("%s: the document changed:\nbefore %s\nafter  %s\n%s", when, before, during, n.Logs.String())
	}
}

// TestLastDocumentServedWhenStoreListFails: the root wires the reconciler's outcome to
// the routing endpoints, readyz and the status. A node whose store fails from the start
// answers 503 draining (Retry-After) before any pass and after each failed one, never a
// (necessarily empty) 200; once a document is published, a pass whose LIST fails (the
// serial moved, so the pass must re-list) changes nothing: the last good document keeps
// being served, and the status says the store is unreachable since the first failing
// pass. Which failures and mid-pass wipes before a listing a pass survives, across a fleet, is the
// simulator's (node/internal/fleetsim: store faults, wipe_test.go) and
// reconcile.TestAPassThatCannotReadEverythingChangesNothing's.
func TestLastDocumentServedWhenStoreListFails(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	fs := &faultStore{Store: openDir(t, cfg.Store.Dir.Path)}
	seedFleet(t, fs, "shop") // there is something to read, but it cannot be read
	fs.failList.Store(true)
	n := testnode.NewStepped(t, cfg, fs)
	n.Beat() // the heartbeat may run first: still no pass
	for i := range 3 {
		if i > 0 {
			if err := n.Pass(); err == nil {
				t.Fatalf("pass %d succeeded on a failing store", i)
			}
		}
		for _, p := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/readyz"} {
			rec := n.Get(p, testIngressToken)
			if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"error":"draining"`) ||
				rec.Header().Get("Retry-After") == "" {
				t.Fatalf("after %d failed passes: %s: %d (Retry-After %q) %s, want 503 draining", i, p, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
			}
		}
	}

	fs.failList.Store(false)
	n.MustPass()
	before := n.Routes()
	fs.failList.Store(true)
	seedFleet(t, fs, "shop", "blog") // moves the serial: the next passes must list
	failed := fs.failedLists.Load()
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
	if fs.failedLists.Load()-failed < 3 {
		t.Fatalf("%d failed listings in three passes", fs.failedLists.Load()-failed)
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
// after a pass read a serial one bump past its own, naming apps/shop, and before it read
// apps/shop: the pass must not take the absence for a delete under the serial it already
// read. The document keeps its routes, the store is reported unreachable, and nothing
// recreates the serial. (A wipe before a full listing is the simulator's, wipe_test.go;
// its schedules never land a wipe between the serial and a named GET.)
func TestWipedStoreMidPassIsDiscarded(t *testing.T) {
	t.Parallel()
	storeDir := filepath.Join(t.TempDir(), "store")
	fs := &faultStore{Store: openDir(t, storeDir)}
	seedFleet(t, fs, "shop")
	n := testnode.NewStepped(t, testConfig(t, "vps-a", storeDir), fs)
	n.Tick()
	n.MustPass() // the current serial committed
	before := n.Routes()

	putObjectNoBump(t, fs, fleet.AppKey("shop"), fleet.App{Name: "shop", Account: "acme", Placement: []string{"vps-b", "vps-c"}})
	if _, err := store.BumpSerial(context.Background(), fs, fleet.AppKey("shop")); err != nil {
		t.Fatal(err)
	}
	wipe := func() {
		if err := os.Rename(storeDir, storeDir+".old"); err != nil {
			t.Error(err)
		}
		if err := os.Mkdir(storeDir, 0o700); err != nil {
			t.Error(err)
		}
	}
	fs.afterSerial.Store(&wipe)
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
}
