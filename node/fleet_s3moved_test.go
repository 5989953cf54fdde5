package node_test

// Fleet behaviours that ran on a real MinIO with whole nodes on listeners
// (fleet_s3_test.go), now on the dir store, in process (stepNode), on a virtual clock:
// what a reconcile pass costs in store calls, a node run with different settings, and a
// store outage. What S3 itself adds is the backend's: storetest's
// GetIfChangedSkipsCurrentEtag runs on dir and on MinIO, and s3's
// TestGetIfChangedIsOneConditionalRequest counts an unchanged read as one GET answered
// 304.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// ---- a counting store ----

// countingStore is a store.Store decorator that counts calls by method (and the PUTs of
// the serial and of node records as "Put serial", "Put nodes").
type countingStore struct {
	store.Store

	mu    sync.Mutex
	calls map[string]int
}

// newCountingStore wraps inner. The second argument is unused (it gated the wall-clock
// ticks of the S3 tests this file replaced); ingressbounds_test.go passes false.
func newCountingStore(inner store.Store, _ bool) *countingStore {
	return &countingStore{Store: inner, calls: map[string]int{}}
}

func (c *countingStore) count(method string) {
	c.mu.Lock()
	c.calls[method]++
	c.mu.Unlock()
}

func (c *countingStore) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

func (c *countingStore) Get(ctx context.Context, key string) (store.Object, error) {
	c.count("Get")
	return c.Store.Get(ctx, key)
}

func (c *countingStore) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	c.count("GetIfChanged")
	return c.Store.GetIfChanged(ctx, key, etag)
}

func (c *countingStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.count("List")
	return c.Store.List(ctx, prefix)
}

func (c *countingStore) Put(ctx context.Context, key string, value []byte, cond store.Condition) (string, error) {
	c.count("Put")
	if key == fleet.KeySerial || strings.HasPrefix(key, fleet.PrefixNodes) {
		c.count("Put " + strings.TrimSuffix(key[:strings.IndexByte(key+"/", '/')], "/"))
	}
	return c.Store.Put(ctx, key, value, cond)
}

func (c *countingStore) Delete(ctx context.Context, key, ifMatch string) error {
	c.count("Delete")
	return c.Store.Delete(ctx, key, ifMatch)
}

// since is what the store was asked since before (a snapshot), zero counts left out.
func (c *countingStore) since(before map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range c.snapshot() {
		if v -= before[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

func equalCounts(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// putObjectNoBump writes a fleet object without bumping the serial (the caller bumps
// once for a batch).
func putObjectNoBump(t *testing.T, st store.Store, key string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), key, b, store.Condition{}); err != nil {
		t.Fatal(err)
	}
}

// status is n's /v1/status, decoded.
func (n *stepNode) status() api.Status {
	n.t.Helper()
	var s api.Status
	if err := json.Unmarshal(n.must(http.StatusOK, http.MethodGet, "/v1/status", testAdminToken, ""), &s); err != nil {
		n.t.Fatal(err)
	}
	return s
}

// ---- 1. cost of a pass ----

// An idle node costs one conditional read of the serial per pass; k changed objects
// announced by a bump without names (an old node's, or a gap) cost one round of lists
// (apps/, domains/, nodes/), k GETs and the serial's re-check; one changed object named
// by its bump costs one GET. The heartbeat (1h here) is out of the way: its LIST of
// nodes/ per heartbeat interval is TestCostModel's, as is the cost over a fleet.
func TestIdleFleetCostsOneConditionalReadPerTick(t *testing.T) {
	t.Parallel()
	const (
		apps       = 20
		idlePasses = 20
	)
	cfg := fleetConfig(t, "vps-a", "127.0.0.2", 50*time.Millisecond, time.Hour, 4*time.Hour)
	writer := openDir(t, cfg.Store.Dir.Path)
	// The fleet: 20 apps on a peer node, written before the node starts.
	inst := map[string]fleet.Instance{}
	for i := range apps {
		name := fmt.Sprintf("app-%02d", i)
		putObject(t, writer, "apps/"+name+".json", fleet.App{Name: name, Account: "acme", Placement: []string{"vps-b"}})
		inst[name] = fleet.Instance{Port: 24000 + i, Ready: true}
	}
	putObject(t, writer, "nodes/vps-b.json", fleet.NodeRecord{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400,
		Instances: inst, Seen: time.Now().UTC()})

	cs := newCountingStore(openDir(t, cfg.Store.Dir.Path), false)
	n := newStepNode(t, cfg, cs)
	n.start()
	n.mustPass() // its own record, written by the start's heartbeat
	n.mustPass()

	before := cs.snapshot()
	for range idlePasses {
		n.mustPass()
	}
	if d, want := cs.since(before), map[string]int{"GetIfChanged": idlePasses}; !equalCounts(d, want) {
		t.Errorf("%d idle passes: store calls %v, want %v", idlePasses, d, want)
	}

	// k changed objects, one bump naming none: one round of lists and k GETs.
	for round, k := range []int{1, 5, 20} {
		rev := n.status().Revision
		for i := range k {
			name := fmt.Sprintf("app-%02d", i)
			putObjectNoBump(t, writer, "apps/"+name+".json", fleet.App{Name: name, Account: "acme",
				Placement: []string{"vps-b"}, Health: &fleet.Health{Path: fmt.Sprintf("/healthz-%d", round)}})
		}
		if _, err := store.BumpSerial(t.Context(), writer); err != nil {
			t.Fatal(err)
		}
		before := cs.snapshot()
		n.mustPass() // the change: serial, 3 lists, k GETs, the serial's re-check
		n.mustPass() // idle again
		if d, want := cs.since(before), map[string]int{"GetIfChanged": 3, "List": 3, "Get": k}; !equalCounts(d, want) {
			t.Errorf("k=%d: store calls %v over the change pass and the next, want %v", k, d, want)
		}
		if got := n.status().Revision; got == rev {
			t.Errorf("k=%d: revision did not move (%s)", k, got)
		}
	}

	// One changed object, named by its bump, to a node one step behind: the serial read
	// and one GET, no list.
	rev := n.status().Revision
	putObjectNoBump(t, writer, "apps/app-00.json", fleet.App{Name: "app-00", Account: "acme",
		Placement: []string{"vps-b"}, Health: &fleet.Health{Path: "/healthz-named"}})
	if _, err := store.BumpSerial(t.Context(), writer, "apps/app-00.json"); err != nil {
		t.Fatal(err)
	}
	before = cs.snapshot()
	n.mustPass()
	n.mustPass()
	if d, want := cs.since(before), map[string]int{"GetIfChanged": 2, "Get": 1}; !equalCounts(d, want) {
		t.Errorf("one named change: store calls %v over the change pass and the next, want %v", d, want)
	}
	if got := n.status().Revision; got == rev {
		t.Errorf("one named change: revision did not move (%s)", got)
	}
}

// ---- 2. several nodes on one store ----

// stepFleet builds vps-a, vps-b, vps-c (fleet addresses 127.0.0.2-4) over one dir
// store, each with its own handle on it, as on separate machines; wrap, when not nil,
// wraps each node's store.
func stepFleet(t *testing.T, wrap func(store.Store) store.Store) []*stepNode {
	t.Helper()
	storeDir := t.TempDir()
	var nodes []*stepNode
	for i, name := range []string{"vps-a", "vps-b", "vps-c"} {
		cfg := fleetConfig(t, name, fmt.Sprintf("127.0.0.%d", i+2), time.Second, 15*time.Second, time.Minute)
		cfg.Store.Dir.Path = storeDir
		var st store.Store = openDir(t, storeDir)
		if wrap != nil {
			st = wrap(st)
		}
		nodes = append(nodes, newStepNode(t, cfg, st))
	}
	for _, n := range nodes {
		n.start()
	}
	return nodes
}

// passAll runs one pass on every node.
func passAll(nodes []*stepNode) {
	for _, n := range nodes {
		n.mustPass()
	}
}

// beatAndPassAll writes every node's record (what an instance registered since changed
// in it), then runs a pass on every node.
func beatAndPassAll(nodes []*stepNode) {
	for _, n := range nodes {
		n.beat()
	}
	passAll(nodes)
}

// seedStepFleet writes, through different nodes' APIs: shop on vps-a then vps-c, solo
// on vps-c only, a claim of ti.to for shop (through vps-b) with a path map pointing at
// solo, and checks every node routes all of it.
func seedStepFleet(t *testing.T, nodes []*stepNode) {
	t.Helper()
	a, b, c := nodes[0], nodes[1], nodes[2]
	a.must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a","vps-c"]}`)
	a.must(201, "PUT", "/v1/apps/solo", testAdminToken, `{"account":"acme","placement":["vps-c"]}`)
	a.must(200, "PUT", "/v1/node/instances/shop", testAdminToken, `{"port":24001,"ready":true}`)
	beatAndPassAll(nodes)
	c.must(200, "PUT", "/v1/node/instances/shop", testAdminToken, `{"port":24002,"ready":true}`)
	c.must(200, "PUT", "/v1/node/instances/solo", testAdminToken, `{"port":24003,"ready":true}`)
	b.must(201, "PUT", "/v1/apps/shop/domains/ti.to", testAdminToken, "")
	beatAndPassAll(nodes)
	b.must(200, "PUT", "/v1/apps/shop/domains/ti.to/paths", testAdminToken, `{"paths":{"paulca":"solo.apps.example.com"}}`)
	beatAndPassAll(nodes)
	want := map[string][]string{
		"shop.apps.example.com": {"vps-a", "vps-c"},
		"solo.apps.example.com": {"vps-c"},
		"ti.to":                 {"vps-a", "vps-c"},
		"api":                   {"vps-a", "vps-b", "vps-c"},
	}
	for _, n := range nodes {
		var doc map[string]any
		if err := json.Unmarshal(n.routes(), &doc); err != nil {
			t.Fatal(err)
		}
		if got := upstreamNodes(doc); !equalUpstreams(got, want) || !strings.Contains(fmt.Sprint(doc["routes"]), "paulca") {
			t.Fatalf("%s routes %v, want %v and the path map", n.Cfg.Node.Name, got, want)
		}
	}
}

func equalUpstreams(got, want map[string][]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			return false
		}
	}
	return true
}

// A node whose heartbeat stops leaves every upstream list once its record is older
// than the TTL (a minute), except a list where it is the last upstream (fail static),
// while nothing else in the fleet changes; the live nodes report it skipped for its TTL
// and agree byte for byte. (The status's stale flag is computed on the wall clock:
// reconcile's TestHeartbeatsBumpNothingAndKeepPeersLive.)
func TestFleetStaleNodeLeavesUpstreamsExceptTheLast(t *testing.T) {
	t.Parallel()
	// Liveness reads the modification times of nodes/ (a heartbeat bumps no serial):
	// on the virtual clock, the time of the step that wrote the record.
	var mtimes sync.Map
	var clocks []*vclockStore
	nodes := stepFleet(t, func(st store.Store) store.Store {
		c := &vclockStore{Store: st, mtimes: &mtimes}
		clocks = append(clocks, c)
		return c
	})
	for i, c := range clocks {
		c.n = nodes[i]
	}
	seedStepFleet(t, nodes)
	live := nodes[:2] // vps-c stops: no heartbeat, no pass; its record stays in the store
	ttl := time.Duration(nodes[0].Cfg.Reconcile.NodeTTL)
	every := int(time.Duration(nodes[0].Cfg.Reconcile.Heartbeat) / time.Duration(nodes[0].Cfg.Reconcile.Interval))
	want := map[string][]string{
		"shop.apps.example.com": {"vps-a"},          // vps-c dropped
		"ti.to":                 {"vps-a"},          // same app, same chain
		"solo.apps.example.com": {"vps-c"},          // its last upstream: kept (fail static)
		"api":                   {"vps-a", "vps-b"}, // the API chain drops it too
	}
	upstreams := func(n *stepNode) map[string][]string {
		var doc map[string]any
		if err := json.Unmarshal(n.routes(), &doc); err != nil {
			t.Fatal(err)
		}
		return upstreamNodes(doc)
	}
	passes := int(ttl/time.Duration(nodes[0].Cfg.Reconcile.Interval)) + 2*every
	for i := range passes {
		for _, n := range live {
			if i%every == 0 {
				n.beat()
			}
			n.mustPass()
		}
		if i == 0 {
			for _, n := range live {
				if got := upstreams(n); equalUpstreams(got, want) {
					t.Fatalf("%s dropped vps-c at once, before its record was older than the TTL: %v", n.Cfg.Node.Name, got)
				}
			}
		}
	}
	for _, n := range live {
		if got := upstreams(n); !equalUpstreams(got, want) {
			t.Errorf("%s upstreams %v a TTL and more after vps-c stopped, want %v", n.Cfg.Node.Name, got, want)
		}
		st := n.status()
		if !slices.ContainsFunc(st.Skipped, func(s api.Skipped) bool {
			return s.Object == "nodes/vps-c.json" && strings.Contains(s.Reason, "TTL")
		}) {
			t.Errorf("%s status: stale vps-c not reported in skipped: %+v", n.Cfg.Node.Name, st.Skipped)
		}
	}
	a, b := live[0].get("/v1/ingress/traefik", testIngressToken), live[1].get("/v1/ingress/traefik", testIngressToken)
	if a.Header().Get("ETag") != b.Header().Get("ETag") || !bytes.Equal(a.Body.Bytes(), b.Body.Bytes()) {
		t.Errorf("the live nodes serve different documents after the stale drop")
	}
}

// vclockStore gives the entries its List returns the modification time their last
// write had on the writing node's virtual clock (n.now; the real one until n is set).
type vclockStore struct {
	store.Store
	n      *stepNode
	mtimes *sync.Map // key → time.Time
}

func (v *vclockStore) Put(ctx context.Context, key string, value []byte, cond store.Condition) (string, error) {
	etag, err := v.Store.Put(ctx, key, value, cond)
	if err == nil && v.n != nil {
		v.mtimes.Store(key, v.n.now)
	}
	return etag, err
}

func (v *vclockStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	es, err := v.Store.List(ctx, prefix)
	for i, e := range es {
		if mt, ok := v.mtimes.Load(e.Key); ok {
			es[i].ModTime = mt.(time.Time)
		}
	}
	return es, err
}

// A node started with different platform domains is named in every node's
// /v1/status (mismatchedSettings) and logged; nodes with the same settings are not.
func TestFleetNodeWithDifferentSettingsIsReported(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	var nodes []*stepNode
	for i, name := range []string{"vps-a", "vps-b", "vps-d"} {
		cfg := fleetConfig(t, name, fmt.Sprintf("127.0.0.%d", i+2), time.Second, time.Hour, 4*time.Hour)
		cfg.Store.Dir.Path = storeDir
		if name == "vps-d" {
			cfg.Platform.Domains = []string{"apps.other.example"}
		}
		nodes = append(nodes, newStepNode(t, cfg, nil))
	}
	for _, n := range nodes {
		n.start()
	}
	passAll(nodes)                                                              // every node has read every record
	for i, want := range [][]string{{"vps-d"}, {"vps-d"}, {"vps-a", "vps-b"}} { // from vps-d's side, the others differ
		n := nodes[i]
		if got := n.status().MismatchedConfig; !slices.Equal(got, want) {
			t.Errorf("%s reports mismatched settings %v, want %v", n.Cfg.Node.Name, got, want)
		}
		logs := n.Logs.String()
		if !strings.Contains(logs, "different fleet settings") || !strings.Contains(logs, want[0]) {
			t.Errorf("%s: mismatch not logged:\n%s", n.Cfg.Node.Name, logs)
		}
	}
}

// A malformed node record is skipped (counted as absent), reported in /v1/status and
// the log; the store stays reachable and every route stays. (Malformed applications
// and claims: TestMalformedObjectSkippedNotWithdrawn.)
func TestMalformedNodeRecordSkippedAndReported(t *testing.T) {
	t.Parallel()
	n := newStepNode(t, testConfig(t, "vps-a", t.TempDir()), nil)
	seedFleet(t, n.St, "shop", "blog")
	n.start()
	before := n.routes()
	putRaw(t, n.St, "nodes/vps-x.json", []byte("\x00\xff not json"))
	putRaw(t, n.St, "nodes/vps-y.json", []byte(`{"name":"vps-z","address":"10.83.0.9","apiPort":7400}`))
	n.mustPass()
	st := n.status()
	for _, k := range []string{"nodes/vps-x.json", "nodes/vps-y.json"} {
		if !slices.ContainsFunc(st.Skipped, func(s api.Skipped) bool { return s.Object == k }) {
			t.Errorf("malformed %s not reported in status: %+v", k, st.Skipped)
		}
		if !strings.Contains(n.Logs.String(), k) {
			t.Errorf("malformed %s not logged", k)
		}
	}
	if !st.Store.Reachable {
		t.Errorf("a malformed node record made the store unreachable: %+v", st.Store)
	}
	assertServing(t, n, before, "after malformed node records")
}

// ---- 3. faults ----

// outageStore fails every call with store.ErrUnavailable while down is set, as a store
// whose server is stopped does.
type outageStore struct {
	store.Store
	down *atomic.Bool
}

func (o outageStore) fail(what, key string) error {
	return fmt.Errorf("outageStore: %s %s: connection refused: %w", what, key, store.ErrUnavailable)
}

func (o outageStore) Get(ctx context.Context, key string) (store.Object, error) {
	if o.down.Load() {
		return store.Object{}, o.fail("get", key)
	}
	return o.Store.Get(ctx, key)
}

func (o outageStore) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	if o.down.Load() {
		return store.Object{}, false, o.fail("get", key)
	}
	return o.Store.GetIfChanged(ctx, key, etag)
}

func (o outageStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if o.down.Load() {
		return nil, o.fail("list", prefix)
	}
	return o.Store.List(ctx, prefix)
}

func (o outageStore) Put(ctx context.Context, key string, value []byte, cond store.Condition) (string, error) {
	if o.down.Load() {
		return "", o.fail("put", key)
	}
	return o.Store.Put(ctx, key, value, cond)
}

func (o outageStore) Delete(ctx context.Context, key, ifMatch string) error {
	if o.down.Load() {
		return o.fail("delete", key)
	}
	return o.Store.Delete(ctx, key, ifMatch)
}

// While the store is down every node keeps serving its last document byte for byte
// (ETag included) and says since when the store is unreachable; a write fails with 503
// and writes nothing; after the store returns, every node's next pass succeeds (no
// back-off, no wait for a full re-read), the documents are unchanged, and a change
// through one node reaches every node.
func TestStoreOutageKeepsServingLastDocument(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	nodes := stepFleet(t, func(st store.Store) store.Store { return outageStore{Store: st, down: &down} })
	seedStepFleet(t, nodes)

	paths := []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/ingress/traefik?prefer=self"}
	type answer struct {
		etag string
		body []byte
	}
	last := map[string]answer{} // node+path → the answer before the outage
	for _, n := range nodes {
		for _, p := range paths {
			rec := n.get(p, testIngressToken)
			last[n.Cfg.Node.Name+p] = answer{rec.Header().Get("ETag"), rec.Body.Bytes()}
		}
	}
	sameAsBefore := func(when string) {
		t.Helper()
		for _, n := range nodes {
			for _, p := range paths {
				rec, want := n.get(p, testIngressToken), last[n.Cfg.Node.Name+p]
				if rec.Code != 200 || rec.Header().Get("ETag") != want.etag || !bytes.Equal(rec.Body.Bytes(), want.body) {
					t.Fatalf("%s: %s %s: %d ETag %s, want the last document (ETag %s) byte for byte",
						when, n.Cfg.Node.Name, p, rec.Code, rec.Header().Get("ETag"), want.etag)
				}
			}
		}
	}

	down.Store(true)
	stoppedAt := make([]time.Time, len(nodes)) // each node's clock at its first failing step
	for i, n := range nodes {
		if i == 0 {
			// The heartbeat fails first here: the status says since then.
			n.now = n.now.Add(time.Duration(n.Cfg.Reconcile.Interval) / 2)
			stoppedAt[i] = n.now
			n.beat()
		} else {
			stoppedAt[i] = n.now.Add(time.Duration(n.Cfg.Reconcile.Interval))
		}
		if err := n.pass(); err == nil {
			t.Fatalf("%s: a pass on a store that is down succeeded", n.Cfg.Node.Name)
		}
	}
	for i, n := range nodes {
		st := n.status()
		if st.Store.Reachable || st.Store.Error == "" || !st.Ready {
			t.Errorf("%s status during the outage: %+v ready=%v, want unreachable with the pass's error, still ready", n.Cfg.Node.Name, st.Store, st.Ready)
		}
		if since := st.Store.UnreachableSince; since == nil || !since.Equal(stoppedAt[i]) {
			t.Errorf("%s: unreachableSince %v, want %s (the first failing step)", n.Cfg.Node.Name, since, stoppedAt[i].UTC())
		}
	}

	// A write during the outage: 503, a clear error, nothing written.
	rec := nodes[0].do("PUT", "/v1/apps/x", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"error":"store unavailable"`) ||
		!strings.Contains(rec.Body.String(), "nothing was written") || rec.Header().Get("Retry-After") == "" {
		t.Errorf("PUT /v1/apps/x during the outage: %d %s (Retry-After %q), want 503 store unavailable",
			rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}

	// Passes and heartbeats through the outage: the last document, pass after pass.
	for range 10 {
		for _, n := range nodes {
			n.beat()
			if err := n.pass(); err == nil {
				t.Fatalf("%s: a pass on a store that is down succeeded", n.Cfg.Node.Name)
			}
		}
		sameAsBefore("during the outage")
	}

	// The store returns: the next pass of every node succeeds (and its next heartbeat,
	// without which the status still says unreachable).
	down.Store(false)
	for _, n := range nodes {
		passedAt := n.now.Add(time.Duration(n.Cfg.Reconcile.Interval))
		n.mustPass()
		n.beat()
		st := n.status()
		if !st.Store.Reachable || st.LastPass == nil || !st.LastPass.Equal(passedAt) {
			t.Errorf("%s after the store's return: %+v, last pass %v, want reachable, the pass at %s", n.Cfg.Node.Name, st.Store, st.LastPass, passedAt.UTC())
		}
	}
	sameAsBefore("after the outage")

	// Nothing of the failed write exists.
	if _, err := nodes[0].St.Get(t.Context(), "apps/x.json"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("apps/x.json after the outage: %v, want not found", err)
	}
	nodes[1].must(404, "GET", "/v1/apps/x", testAdminToken, "")
	if audit := nodes[0].must(200, "GET", "/v1/audit", testAdminToken, ""); strings.Contains(string(audit), `"app":"x"`) {
		t.Errorf("audit records the failed write: %s", audit)
	}

	// Convergence resumed: a change through one node reaches every node.
	nodes[1].must(200, "PUT", "/v1/apps/solo", testAdminToken, `{"account":"acme","placement":["vps-c"],"health":{"path":"/ready"}}`)
	passAll(nodes)
	first := nodes[0].get("/v1/ingress/routes", testIngressToken)
	if !strings.Contains(first.Body.String(), `"/ready"`) {
		t.Fatalf("vps-a after the change: %s", first.Body)
	}
	for _, n := range nodes[1:] {
		if rec := n.get("/v1/ingress/routes", testIngressToken); rec.Header().Get("ETag") != first.Header().Get("ETag") || !bytes.Equal(rec.Body.Bytes(), first.Body.Bytes()) {
			t.Errorf("%s serves other bytes than vps-a after the change", n.Cfg.Node.Name)
		}
	}
}
