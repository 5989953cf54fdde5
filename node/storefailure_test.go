package node_test

// The safety net of issue 11: scenario tests for the rules that keep a node from
// withdrawing routes or corrupting another store's serial. Each test drives a node only
// through its HTTP API and its store (a dir store, optionally wrapped by faultStore), so
// it survives refactors of the package's internals.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// faultStore wraps a real store and injects failures into the reads a reconcile pass
// makes. It can also park the reconciler: while parking is on, every read of the serial
// through GetIfChanged (the first call of every pass) is reported on parked and waits
// for the test to release it, so the test acts while the reconcile loop provably sits in
// the middle of a pass.
type faultStore struct {
	store.Store

	failList atomic.Bool // List of apps/, domains/, nodes/ fails (ErrUnavailable)
	failGet  atomic.Bool // Get of an object under apps/, domains/, nodes/ fails

	failedLists atomic.Int64
	failedGets  atomic.Int64

	mu     sync.Mutex
	parked chan parkedRead // nil: no parking

	// objectReads: since the last serial read, apps/ was listed (a full read) or a fleet
	// object read absent: the pass re-checks the serial (Identity.Recheck) before it
	// commits, and that re-read is not parked (it is not a new pass).
	objectReads atomic.Bool
}

// parkedRead is one pass's serial read, held until release is closed.
type parkedRead struct {
	changed bool
	err     error
	release chan struct{}
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
	if prefix == fleet.PrefixApps {
		f.objectReads.Store(true)
	}
	return f.Store.List(ctx, prefix)
}

func (f *faultStore) Get(ctx context.Context, key string) (store.Object, error) {
	if f.failGet.Load() && fleetObjectKey(key) {
		f.failedGets.Add(1)
		return store.Object{}, fmt.Errorf("faultStore: reading %s: %w", key, store.ErrUnavailable)
	}
	obj, err := f.Store.Get(ctx, key)
	if fleetObjectKey(key) && errors.Is(err, store.ErrNotFound) {
		f.objectReads.Store(true)
	}
	return obj, err
}

func (f *faultStore) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	obj, changed, err := f.Store.GetIfChanged(ctx, key, etag)
	recheck := key == fleet.KeySerial && f.objectReads.Swap(false)
	f.mu.Lock()
	parked := f.parked
	f.mu.Unlock()
	if parked != nil && key == fleet.KeySerial && !recheck {
		ev := parkedRead{changed: changed, err: err, release: make(chan struct{})}
		select {
		case parked <- ev:
			select {
			case <-ev.release:
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}
	return obj, changed, err
}

// park turns parking on; the returned function turns it off (idempotent).
func (f *faultStore) park(t *testing.T) (reads <-chan parkedRead, stop func()) {
	t.Helper()
	ch := make(chan parkedRead)
	f.mu.Lock()
	f.parked = ch
	f.mu.Unlock()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			f.mu.Lock()
			f.parked = nil
			f.mu.Unlock()
			// A pass may have been about to park when parking stopped: let it go.
			for {
				select {
				case ev := <-ch:
					close(ev.release)
				default:
					return
				}
			}
		})
	}
	t.Cleanup(stop)
	return ch, stop
}

// idleRead releases parked passes until one finds the serial unchanged (so a previous
// pass has already committed the store's current serial and epoch) and returns that
// one still held.
func idleRead(t *testing.T, reads <-chan parkedRead) parkedRead {
	t.Helper()
	for range 200 {
		select {
		case ev := <-reads:
			if !ev.changed && ev.err == nil {
				return ev
			}
			close(ev.release)
		case <-time.After(30 * time.Second):
			t.Fatal("no reconcile pass within 30s")
		}
	}
	t.Fatal("the reconciler never found the serial unchanged in 200 passes")
	return parkedRead{}
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

// storeState is the part of /v1/status these tests read.
type storeState struct {
	Reachable bool   `json:"reachable"`
	Error     string `json:"error"`
}

func storeStatusOf(t *testing.T, n *testNode) storeState {
	t.Helper()
	resp, b := n.Get("/v1/status", testAdminToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: %d %s", resp.StatusCode, b)
	}
	var s struct {
		Store storeState `json:"store"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("status: %v: %s", err, b)
	}
	return s.Store
}

// assertDraining checks that both routing endpoints and readyz answer 503 "draining"
// with Retry-After, and never a document.
func assertDraining(t *testing.T, n *testNode, when string) {
	t.Helper()
	for _, p := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/readyz"} {
		resp, b := n.Get(p, testIngressToken)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"error":"draining"`) ||
			resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: %s: %d (Retry-After %q) %s, want 503 draining: no pass has completed",
				when, p, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
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
			n := startNodeWithStore(t, cfg, fs)
			// Every pass fails at its first failing read; watch several go by.
			waitFor(t, 10*time.Second, "five failed passes", func() bool {
				assertDraining(t, n, "while every pass fails")
				return tc.failed(fs) >= 5
			})
			if st := storeStatusOf(t, n); st.Reachable || st.Error == "" {
				t.Fatalf("status after failed passes: %+v, want the store unreachable with the error", st)
			}
			assertDraining(t, n, "after five failed passes")
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
	n := startNodeWithStore(t, cfg, fs)
	seedFleet(t, fs, "shop")
	n.WaitReady()
	waitSeeded(t, n)
	_, before := n.Get("/v1/ingress/routes", testIngressToken)

	fs.failList.Store(true)
	seedFleet(t, fs, "shop", "blog") // moves the serial: the next passes must list
	waitFor(t, 10*time.Second, "three failed listings", func() bool {
		if _, during := n.Get("/v1/ingress/routes", testIngressToken); !bytes.Equal(before, during) {
			t.Fatalf("the document changed while the store's LIST failed:\nbefore %s\nduring %s", before, during)
		}
		return fs.failedLists.Load() >= 3
	})
	if st := storeStatusOf(t, n); st.Reachable || !strings.Contains(st.Error, "listing") {
		t.Fatalf("status while LIST fails: %+v, want the store unreachable with the listing error", st)
	}
	if _, during := n.Get("/v1/ingress/routes", testIngressToken); !bytes.Equal(before, during) {
		t.Fatalf("the document changed while the store's LIST failed:\nbefore %s\nduring %s", before, during)
	}

	// Recovery: the change made during the outage is published.
	fs.failList.Store(false)
	waitFor(t, 5*time.Second, "blog routed after recovery", func() bool {
		return strings.Contains(strings.Join(hostsOf(routesDoc(t, n)), ","), "blog.apps.example.com")
	})
}

// replacedStoreScenario publishes shop, then lets replace rewrite the store behind the
// node (shop deleted, the serial rewritten) and checks that the node treats it as an
// outage: the last document is kept and writes are refused (503, nothing written).
func replacedStoreScenario(t *testing.T, replace func(t *testing.T, st store.Store, n uint64, epoch string) []byte) {
	t.Helper()
	cfg := testConfig(t, "vps-a", t.TempDir())
	fs := newFaultStore(t, cfg.Store.Dir.Path)
	n := startNodeWithStore(t, cfg, fs)
	seedFleet(t, fs, "shop")
	n.WaitReady()
	// The document settled: shop routed and both nodes' records read (this node's own
	// record can be read a pass after shop's; a "before" taken earlier differs from any
	// later document for that reason alone).
	waitFor(t, 5*time.Second, "shop routed and both nodes in the api section", func() bool {
		d := routesDoc(t, n)
		api, _ := d["api"].(map[string]any)
		ups, _ := api["upstreams"].([]any)
		return strings.Join(hostsOf(d), ",") == "shop.apps.example.com" && len(ups) == 2
	})
	_, before := n.Get("/v1/ingress/routes", testIngressToken)

	// Replace the store while the reconciler is held in a pass that found the serial
	// unchanged: it has committed the serial read here, and sees the replacement whole.
	reads, stopParking := fs.park(t)
	held := idleRead(t, reads)
	_, cur, epoch := readSerial(t, fs)
	// The replacement store no longer has shop.
	if err := fs.Delete(context.Background(), fleet.AppKey("shop"), ""); err != nil {
		t.Fatal(err)
	}
	foreign := replace(t, fs, cur, epoch)
	stopParking()
	close(held.release)

	var during []byte
	waitFor(t, 5*time.Second, "the node to react to the rewritten serial", func() bool {
		_, during = n.Get("/v1/ingress/routes", testIngressToken)
		return !bytes.Equal(before, during) || !storeStatusOf(t, n).Reachable
	})
	if !bytes.Equal(before, during) {
		t.Fatalf("the node published the replaced store:\nbefore %s\nafter  %s", before, during)
	}
	if st := storeStatusOf(t, n); st.Reachable || st.Error == "" {
		t.Fatalf("status: %+v, want the store reported unreachable", st)
	}

	resp, b := n.Do("PUT", "/v1/apps/blog", testAdminToken, `{"account":"acme"}`)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("write to a replaced store: %d %s, want 503", resp.StatusCode, b)
	}
	if _, err := fs.Get(context.Background(), fleet.AppKey("blog")); err == nil {
		t.Fatal("a write landed in the replaced store")
	}
	if raw, _, _ := readSerial(t, fs); !bytes.Equal(raw, foreign) {
		t.Fatalf("the node moved the replaced store's serial: %q, was %q", raw, foreign)
	}
	if _, after := n.Get("/v1/ingress/routes", testIngressToken); !bytes.Equal(before, after) {
		t.Fatalf("the node published the replaced store:\nbefore %s\nafter  %s", before, after)
	}
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
	fs := newFaultStore(t, cfg.Store.Dir.Path)
	n := startNodeWithStore(t, cfg, fs)
	seedFleet(t, fs, "shop")
	n.WaitReady()
	waitSeeded(t, n)
	_, before := n.Get("/v1/ingress/routes", testIngressToken)

	// Hold the reconciler in a pass that found the serial unchanged: it has committed
	// the current serial and epoch, and will not read the serial again until released.
	reads, stopParking := fs.park(t)
	held := idleRead(t, reads)
	_, cur, epoch := readSerial(t, fs)
	foreign := store.FormatSerial(cur+5, otherEpoch(epoch))
	writeSerial(t, fs, foreign)

	resp, b := n.Do("PUT", "/v1/apps/blog", testAdminToken, `{"account":"acme"}`)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a write whose serial bump was refused answered %d %s, want 503 (never a 2xx that will not be published)", resp.StatusCode, b)
	}
	if raw, _, _ := readSerial(t, fs); !bytes.Equal(raw, foreign) {
		t.Fatalf("a write bumped another store's serial: %q, was %q", raw, foreign)
	}

	// Once the reconciler sees the foreign serial it keeps the last document.
	stopParking()
	close(held.release)
	waitFor(t, 5*time.Second, "the store reported unreachable", func() bool { return !storeStatusOf(t, n).Reachable })
	if _, after := n.Get("/v1/ingress/routes", testIngressToken); !bytes.Equal(before, after) {
		t.Fatalf("the document changed after the serial changed epoch:\nbefore %s\nafter  %s", before, after)
	}
	if raw, _, _ := readSerial(t, fs); !bytes.Equal(raw, foreign) {
		t.Fatalf("the node bumped another store's serial: %q, was %q", raw, foreign)
	}
}

// auditCount is the number of records GET /v1/audit returns.
func auditCount(t *testing.T, n *testNode) int {
	t.Helper()
	b := n.Must(http.StatusOK, "GET", "/v1/audit?limit=10000", testAdminToken, "")
	var a struct {
		Records []json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("audit: %v: %s", err, b)
	}
	return len(a.Records)
}

// TestIdenticalAppPutChangesNothing: re-sending the same application is a no-op: no
// store write, no audit record, no serial bump (which would make every node re-read).
func TestIdenticalAppPutChangesNothing(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	const body = `{"account":"acme","placement":["vps-a"],"health":{"path":"/healthz"}}`
	r1, _ := n.Do("PUT", "/v1/apps/shop", testAdminToken, body)
	if r1.StatusCode != http.StatusCreated {
		t.Fatalf("first PUT: %d, want 201", r1.StatusCode)
	}
	// The serial is bumped once by this node's first heartbeat and once by the PUT; wait
	// for both so no bump is still in flight.
	var serial1 []byte
	waitFor(t, 5*time.Second, "serial 2", func() bool {
		var counter uint64
		serial1, counter, _ = readSerial(t, n.St)
		return counter == 2
	})
	audit1 := auditCount(t, n)
	if audit1 != 1 {
		t.Fatalf("%d audit records after one change, want 1", audit1)
	}

	r2, b2 := n.Do("PUT", "/v1/apps/shop", testAdminToken, body)
	if r2.StatusCode != http.StatusOK || r2.Header.Get("ETag") != r1.Header.Get("ETag") {
		t.Fatalf("identical PUT: %d ETag %q (first %q) %s, want 200 with the same ETag",
			r2.StatusCode, r2.Header.Get("ETag"), r1.Header.Get("ETag"), b2)
	}
	if serial2, _, _ := readSerial(t, n.St); !bytes.Equal(serial1, serial2) {
		t.Fatalf("an identical PUT bumped the serial: %q → %q", serial1, serial2)
	}
	if audit2 := auditCount(t, n); audit2 != audit1 {
		t.Fatalf("an identical PUT wrote an audit record: %d → %d records", audit1, audit2)
	}
}

// TestStatusReadableWhilePassesRun reads /v1/status continuously while writes make the
// reconciler run passes (each changing the status it reports). Run under -race: the
// status snapshot must be taken under the reconciler's lock.
func TestStatusReadableWhilePassesRun(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()

	done := make(chan struct{})
	errc := make(chan error, 1)
	var reads atomic.Int64
	go func() {
		defer close(errc)
		client := &http.Client{}
		for {
			select {
			case <-done:
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodGet, n.URL+"/v1/status", nil)
			req.Header.Set("Authorization", "Bearer "+testAdminToken)
			resp, err := client.Do(req)
			if err != nil {
				errc <- err
				return
			}
			var s struct {
				Ready    bool       `json:"ready"`
				LastPass *time.Time `json:"lastPass"`
			}
			err = json.NewDecoder(resp.Body).Decode(&s)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !s.Ready || s.LastPass == nil {
				errc <- fmt.Errorf("status: %d %+v %v", resp.StatusCode, s, err)
				return
			}
			reads.Add(1)
		}
	}()

	// Each write changes the application (and a malformed object changes the skipped
	// list), so every pass derives and rewrites the status.
	n.Must(http.StatusCreated, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	for i := range 30 {
		n.Must(http.StatusOK, "PUT", "/v1/apps/shop", testAdminToken,
			fmt.Sprintf(`{"account":"acme","placement":["vps-a"],"health":{"path":"/h%d"}}`, i))
		putRaw(t, n.St, fmt.Sprintf("apps/broken-%d.json", i%3), []byte(fmt.Sprintf(`{"name": %d`, i)))
	}
	waitFor(t, 5*time.Second, "status reads", func() bool { return reads.Load() >= 10 })
	close(done)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// changedRead releases parked passes until one finds the serial changed (it will list
// or read what the bump named) and returns that one still held.
func changedRead(t *testing.T, reads <-chan parkedRead) parkedRead {
	t.Helper()
	for range 200 {
		select {
		case ev := <-reads:
			if ev.changed && ev.err == nil {
				return ev
			}
			close(ev.release)
		case <-time.After(30 * time.Second):
			t.Fatal("no reconcile pass within 30s")
		}
	}
	t.Fatal("the reconciler never found the serial changed in 200 passes")
	return parkedRead{}
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
			if _, err := store.BumpSerial(context.Background(), fs); err != nil {
				t.Fatal(err)
			}
			n := startNodeWithStore(t, cfg, fs)
			n.WaitReady()
			waitSeeded(t, n)
			_, before := n.Get("/v1/ingress/routes", testIngressToken)

			reads, stopParking := fs.park(t)
			close(idleRead(t, reads).release) // the current serial is committed
			tc.bump(t, fs)
			held := changedRead(t, reads) // this pass read the moved serial, nothing else yet
			if err := os.Rename(storeDir, storeDir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(storeDir, 0o700); err != nil {
				t.Fatal(err)
			}
			stopParking()
			close(held.release)

			waitFor(t, 5*time.Second, "status reports the store unreachable", func() bool {
				if _, during := n.Get("/v1/ingress/routes", testIngressToken); !bytes.Equal(before, during) {
					t.Fatalf("a pass straddling the wipe published:\nbefore %s\nafter  %s\n%s", before, during, n.Logs.String())
				}
				return !storeStatusOf(t, n).Reachable
			})
			if _, after := n.Get("/v1/ingress/routes", testIngressToken); !bytes.Equal(before, after) {
				t.Fatalf("a pass straddling the wipe published:\nbefore %s\nafter  %s", before, after)
			}
			if _, err := os.Stat(filepath.Join(storeDir, "serial")); err == nil {
				t.Fatal("the node recreated the serial in the wiped store")
			}
		})
	}
}
