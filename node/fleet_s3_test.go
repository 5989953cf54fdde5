package node_test

// Fleet tests: what a reconcile tick costs (dir and S3), several nodes on one bucket
// serving one document, staleness and fail static, settings mismatches, and a store
// outage. The S3 tests run against a real MinIO (package s3test); without one they are
// skipped outside CI and fail in CI.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/s3"
	"github.com/scafo/ingress/node/store/s3/s3test"
	"github.com/scafo/ingress/render/fleet"
)

// TestMain stops the MinIO that s3test starts for this package's tests. Unless
// -test.parallel says otherwise, it runs four of the tests marked parallel at a time,
// not GOMAXPROCS: each runs its own nodes and spends most of its time waiting on their
// intervals (on a busy 2-core machine under -race, 227 s for the package against 281 s
// at two, side by side). The tests that bound wall-clock time are not marked: they run
// first, alone.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", "4")
	}
	s3test.Main(m)
}

// ---- a counting store ----

// countingStore is a store.Store decorator that counts calls by method, so the cost of
// a reconcile tick can be measured on any backend. With ticks set, every read of the
// serial (the first call of every reconcile tick) is reported on it and then waits for
// the test to release it, so the test reads the counters at exact tick boundaries.
type countingStore struct {
	store.Store
	ticks chan tickEvent

	mu    sync.Mutex
	calls map[string]int
	// objectReads: since the last serial read, apps/ was listed (a full read) or a fleet
	// object read absent (a one-step read of a delete): the pass re-checks the serial
	// (Identity.Recheck), so the next serial read is that, not a new tick.
	objectReads atomic.Bool
}

// tickEvent is one reconcile tick's serial read, held until release is closed.
type tickEvent struct {
	changed bool
	err     error
	release chan struct{}
}

func newCountingStore(inner store.Store, gated bool) *countingStore {
	c := &countingStore{Store: inner, calls: map[string]int{}}
	if gated {
		c.ticks = make(chan tickEvent)
	}
	return c
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
	obj, err := c.Store.Get(ctx, key)
	if fleetObjectKey(key) && errors.Is(err, store.ErrNotFound) {
		c.objectReads.Store(true)
	}
	return obj, err
}

func (c *countingStore) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	c.count("GetIfChanged")
	obj, changed, err := c.Store.GetIfChanged(ctx, key, etag)
	recheck := key == fleet.KeySerial && c.objectReads.Swap(false)
	if c.ticks != nil && key == fleet.KeySerial && !recheck {
		ev := tickEvent{changed: changed, err: err, release: make(chan struct{})}
		select {
		case c.ticks <- ev:
			select {
			case <-ev.release:
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}
	return obj, changed, err
}

func (c *countingStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.count("List")
	if prefix == fleet.PrefixApps {
		c.objectReads.Store(true)
	}
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

// nextTick waits for the reconciler's next serial read; the caller must release it.
func (c *countingStore) nextTick(t *testing.T) tickEvent {
	t.Helper()
	select {
	case ev := <-c.ticks:
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile tick within 30s")
		return tickEvent{}
	}
}

// idleTick releases ticks until one finds the serial unchanged, and returns it held.
func (c *countingStore) idleTick(t *testing.T) tickEvent {
	t.Helper()
	for range 200 {
		ev := c.nextTick(t)
		if !ev.changed && ev.err == nil {
			return ev
		}
		close(ev.release)
	}
	t.Fatal("the node never went idle in 200 ticks")
	return tickEvent{}
}

// cost is what the node's store did between two points: calls through the store
// interface and, on S3, HTTP requests.
type cost struct {
	calls map[string]int
	http  s3.Stats
}

func (c cost) sub(before cost) cost {
	d := cost{calls: map[string]int{}, http: c.http.Sub(before.http)}
	for k, v := range c.calls {
		if v -= before.calls[k]; v != 0 {
			d.calls[k] = v
		}
	}
	return d
}

// ---- helpers ----

// ---- 1. cost of a tick ----

// An idle fleet costs one conditional read of the serial per node per tick (a 304 on
// S3); k changed objects announced by a bump without names (an old node's, or a gap)
// cost one round of lists plus k GETs; one changed object named by its bump costs one
// GET. Heartbeats do not bump the serial; they cost one LIST of nodes/ per heartbeat
// interval, which this test moves out of the way (1h; see TestFleetIdleCostWithHeartbeats
// and TestCostModel).
func TestIdleFleetCostsOneConditionalReadPerTick(t *testing.T) {
	t.Parallel()
	const (
		apps      = 20
		idleTicks = 20
	)
	for _, backend := range []string{"dir", "s3"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel() // each backend its own store and node; the ticks are gated, not timed
			var inner, writer store.Store
			var httpStats func() s3.Stats
			switch backend {
			case "dir":
				p := t.TempDir()
				inner, writer = openDir(t, p), openDir(t, p)
			case "s3":
				bcfg := s3test.Shared(t).NewBucket(t)
				st := openS3(t, bcfg)
				inner, writer, httpStats = st, openS3(t, bcfg), st.Stats
			}
			// The fleet: 20 apps on a peer node, written before the node starts.
			inst := map[string]fleet.Instance{}
			for i := range apps {
				name := fmt.Sprintf("app-%02d", i)
				putObject(t, writer, "apps/"+name+".json", fleet.App{Name: name, Account: "acme", Placement: []string{"vps-b"}})
				inst[name] = fleet.Instance{Port: 24000 + i, Ready: true}
			}
			putObject(t, writer, "nodes/vps-b.json", fleet.NodeRecord{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400,
				Instances: inst, Seen: time.Now().UTC()})

			cfg := fleetConfig(t, "vps-a", "127.0.0.2", 50*time.Millisecond, time.Hour, 4*time.Hour)
			cs := newCountingStore(inner, true)
			n := startNodeWithStore(t, cfg, cs)
			snap := func() cost {
				c := cost{calls: cs.snapshot()}
				if httpStats != nil {
					c.http = httpStats()
				}
				return c
			}

			// Idle: N ticks, counted between two held serial reads.
			ev := cs.idleTick(t)
			before := snap()
			close(ev.release)
			for i := range idleTicks {
				ev = cs.nextTick(t)
				if ev.changed || ev.err != nil {
					t.Fatalf("idle tick %d: changed=%v err=%v", i, ev.changed, ev.err)
				}
				if i < idleTicks-1 {
					close(ev.release)
				}
			}
			d := snap().sub(before)
			close(ev.release)
			if want := map[string]int{"GetIfChanged": idleTicks}; !equalCounts(d.calls, want) {
				t.Errorf("%d idle ticks: store calls %v, want %v", idleTicks, d.calls, want)
			}
			if httpStats != nil {
				if d.http.Requests != idleTicks || d.http.ByMethod["GET"] != idleTicks || d.http.NotModified != idleTicks || d.http.Failed != 0 {
					t.Errorf("%d idle ticks: HTTP %+v, want %d GETs, all 304", idleTicks, d.http, idleTicks)
				}
			}
			if httpStats != nil {
				t.Logf("%s: %d idle ticks cost store calls %v, %d HTTP requests (%v, %d answered 304)",
					backend, idleTicks, d.calls, d.http.Requests, d.http.ByMethod, d.http.NotModified)
			} else {
				t.Logf("%s: %d idle ticks cost store calls %v", backend, idleTicks, d.calls)
			}

			// k changed objects: one round of lists and k GETs.
			for round, k := range []int{1, 5, 20} {
				ev := cs.idleTick(t)
				rev := statusOf(t, n).Revision
				// Written while the reconciler is held between ticks: the next tick sees
				// all k changes at once.
				for i := range k {
					name := fmt.Sprintf("app-%02d", i)
					putObjectNoBump(t, writer, "apps/"+name+".json", fleet.App{Name: name, Account: "acme",
						Placement: []string{"vps-b"}, Health: &fleet.Health{Path: fmt.Sprintf("/healthz-%d", round)}})
				}
				if _, err := store.BumpSerial(t.Context(), writer); err != nil {
					t.Fatal(err)
				}
				before := snap()
				close(ev.release)
				if ev = cs.nextTick(t); !ev.changed || ev.err != nil {
					t.Fatalf("k=%d: the tick after the writes: changed=%v err=%v", k, ev.changed, ev.err)
				}
				close(ev.release)
				if ev = cs.nextTick(t); ev.changed || ev.err != nil {
					t.Fatalf("k=%d: the tick after the change: changed=%v err=%v", k, ev.changed, ev.err)
				}
				// Between the two held reads: the change tick (its serial read, the lists,
				// the GETs and the serial's re-check), plus the next tick's serial read.
				d := snap().sub(before)
				close(ev.release)
				if want := map[string]int{"GetIfChanged": 3, "List": 3, "Get": k}; !equalCounts(d.calls, want) {
					t.Errorf("k=%d: store calls %v, want %v", k, d.calls, want)
				}
				if got := statusOf(t, n).Revision; got == rev {
					t.Errorf("k=%d: revision did not move (%s)", k, got)
				}
				if httpStats == nil {
					t.Logf("%s: k=%2d changed objects: store calls %v (the change tick and the next idle tick)", backend, k, d.calls)
					continue
				}
				if want := int64(k + 6); d.http.Requests != want || d.http.ByMethod["GET"] != want || d.http.NotModified != 2 || d.http.Failed != 0 {
					t.Errorf("k=%d: HTTP %+v, want %d GETs (serial, 3 lists, %d objects, the serial's re-check (304), then one 304)", k, d.http, want, k)
				}
				t.Logf("%s: k=%2d changed objects: store calls %v; the change tick cost %d HTTP requests (1 serial GET + 3 lists + %d GETs + 1 serial re-check)",
					backend, k, d.calls, d.http.Requests-1, k)
			}

			// One changed object, named by its bump, to a node one step behind: the serial
			// read and one GET, no list.
			ev = cs.idleTick(t)
			rev := statusOf(t, n).Revision
			putObjectNoBump(t, writer, "apps/app-00.json", fleet.App{Name: "app-00", Account: "acme",
				Placement: []string{"vps-b"}, Health: &fleet.Health{Path: "/healthz-named"}})
			if _, err := store.BumpSerial(t.Context(), writer, "apps/app-00.json"); err != nil {
				t.Fatal(err)
			}
			before = snap()
			close(ev.release)
			if ev = cs.nextTick(t); !ev.changed || ev.err != nil {
				t.Fatalf("named: the tick after the write: changed=%v err=%v", ev.changed, ev.err)
			}
			close(ev.release)
			if ev = cs.nextTick(t); ev.changed || ev.err != nil {
				t.Fatalf("named: the tick after the change: changed=%v err=%v", ev.changed, ev.err)
			}
			d = snap().sub(before)
			close(ev.release)
			if want := map[string]int{"GetIfChanged": 2, "Get": 1}; !equalCounts(d.calls, want) {
				t.Errorf("one named change: store calls %v, want %v", d.calls, want)
			}
			if got := statusOf(t, n).Revision; got == rev {
				t.Errorf("one named change: revision did not move (%s)", got)
			}
			if httpStats != nil {
				if d.http.Requests != 3 || d.http.NotModified != 1 || d.http.Failed != 0 {
					t.Errorf("one named change: HTTP %+v, want 3 GETs (serial, the object, then one 304)", d.http)
				}
			}
			t.Logf("%s: one named changed object: store calls %v (the change tick and the next idle tick)", backend, d.calls)
		})
	}
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

// What an idle fleet really costs: heartbeats do not bump the serial, so every tick is
// one conditional read, plus one LIST of nodes/ per heartbeat interval for liveness,
// and no GET of a peer's heartbeat. Timings are scaled down from the defaults (2s tick,
// 15s heartbeat) keeping their ratio, 7.5 ticks per heartbeat; the per-tick figures
// carry over.
func TestFleetIdleCostWithHeartbeats(t *testing.T) {
	t.Parallel()
	const (
		interval  = 200 * time.Millisecond
		heartbeat = 1500 * time.Millisecond
		planned   = 9 * time.Second // the measurement window, counted in vps-a's passes
	)
	bcfg := s3test.Shared(t).NewBucket(t)
	var nodes []*testNode
	var stores []*countingStore
	var inner []*s3.Store
	for i, name := range []string{"vps-a", "vps-b", "vps-c"} {
		st := openS3(t, bcfg)
		cs := newCountingStore(st, false)
		cfg := fleetConfig(t, name, fmt.Sprintf("127.0.0.%d", i+2), interval, heartbeat, time.Minute)
		nodes, stores, inner = append(nodes, startNodeWithStore(t, cfg, cs)), append(stores, cs), append(inner, st)
	}
	seedThreeNodeFleet(t, nodes)
	// The seeding's writes settled before the window below measures rates: every node
	// has rewritten its record since (a write the seeding kicked bumps the serial), then
	// every node has run two passes after the last of those writes (the second one
	// started after it).
	// A pass is one conditional read of the serial (GetIfChanged), counted by the
	// node's store: waiting on them costs the node nothing (a scrape of /metrics would).
	ticksOf := func(i int) int { return stores[i].snapshot()["GetIfChanged"] }
	waitTicks := func(i, k int) {
		t.Helper()
		want := ticksOf(i) + k
		waitFor(t, time.Duration(k)*10*interval+5*time.Second, fmt.Sprintf("%d passes of %s", k, nodes[i].Cfg.Node.Name),
			func() bool { return ticksOf(i) >= want })
	}
	for i, n := range nodes {
		beats := stores[i].snapshot()["Put nodes"]
		waitFor(t, 2*heartbeat+5*time.Second, n.Cfg.Node.Name+"'s record rewritten after the seeding", func() bool {
			return stores[i].snapshot()["Put nodes"] > beats
		})
	}
	for i := range nodes {
		waitTicks(i, 2)
	}

	before := make([]cost, len(nodes))
	for i := range nodes {
		before[i] = cost{calls: stores[i].snapshot(), http: inner[i].Stats()}
	}
	// The measurement window: as many of vps-a's passes as fit in planned; the bounds
	// below are of the time it measured.
	start := time.Now()
	waitTicks(0, int(planned/interval))
	var heartbeats int
	diffs := make([]cost, len(nodes))
	for i := range nodes {
		diffs[i] = cost{calls: stores[i].snapshot(), http: inner[i].Stats()}.sub(before[i])
		heartbeats += diffs[i].calls["Put nodes"]
	}
	window := time.Since(start)
	ticks := float64(window / interval)
	for i, n := range nodes {
		d := diffs[i]
		// Liveness: at most one LIST per heartbeat interval (plus one cut by the window's
		// edge); heartbeats bump nothing, so no peer record is read.
		if lists, most := d.calls["List"], int(window/heartbeat)+1; lists > most {
			t.Errorf("%s: %d lists in %s: want at most %d, one per heartbeat interval", n.Cfg.Node.Name, lists, window, most)
		}
		if gets := d.calls["Get"]; gets > 0 {
			t.Errorf("%s: %d GETs in an idle window with %d heartbeats: a heartbeat must not make peers read its record", n.Cfg.Node.Name, gets, heartbeats)
		}
		if reads, ticks := d.calls["GetIfChanged"], int(window/interval); reads > ticks+2 {
			t.Errorf("%s: %d serial reads in %d ticks", n.Cfg.Node.Name, reads, ticks)
		}
		t.Logf("%s over %s (%.0f ticks of %s, heartbeat %s, %d heartbeats fleet-wide): store calls %v; HTTP %d requests (%v, %d answered 304) = %.2f per tick, %.0f per hour at the default 2s tick",
			n.Cfg.Node.Name, window, ticks, interval, heartbeat, heartbeats, d.calls, d.http.Requests, d.http.ByMethod, d.http.NotModified,
			float64(d.http.Requests)/ticks, float64(d.http.Requests)/ticks*1800)
	}
}

// ---- 2. several nodes on one bucket ----

// threeNodes starts vps-a, vps-b, vps-c (fleet addresses 127.0.0.2-4) on one bucket,
// each with its own S3 client as on separate machines.
func threeNodes(t *testing.T, bcfg s3.Config, interval, heartbeat, ttl time.Duration) []*testNode {
	t.Helper()
	var nodes []*testNode
	for i, name := range []string{"vps-a", "vps-b", "vps-c"} {
		cfg := fleetConfig(t, name, fmt.Sprintf("127.0.0.%d", i+2), interval, heartbeat, ttl)
		nodes = append(nodes, startNodeWithStore(t, cfg, openS3(t, bcfg)))
	}
	for _, n := range nodes {
		n.WaitReady()
	}
	return nodes
}

// seedThreeNodeFleet writes, through different nodes' APIs: shop on vps-a then vps-c,
// solo on vps-c only, a claim of ti.to for shop (through vps-b) with a path map
// pointing at solo, and waits until every node routes all of it.
func seedThreeNodeFleet(t *testing.T, nodes []*testNode) {
	t.Helper()
	a, b, c := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		n.WaitReady() // a node answers 503 draining until its first pass; the waits below read documents
	}
	a.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a","vps-c"]}`)
	a.Must(201, "PUT", "/v1/apps/solo", testAdminToken, `{"account":"acme","placement":["vps-c"]}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testAdminToken, `{"port":24001,"ready":true}`)
	waitFor(t, 10*time.Second, "vps-c sees the apps", func() bool {
		resp, _ := c.Do("GET", "/v1/apps/solo", testAdminToken, "")
		return resp.StatusCode == 200
	})
	c.Must(200, "PUT", "/v1/node/instances/shop", testAdminToken, `{"port":24002,"ready":true}`)
	c.Must(200, "PUT", "/v1/node/instances/solo", testAdminToken, `{"port":24003,"ready":true}`)
	b.Must(201, "PUT", "/v1/apps/shop/domains/ti.to", testAdminToken, "")
	waitFor(t, 10*time.Second, "solo routed on vps-b", func() bool {
		return upstreamNodes(routesDoc(t, b))["solo.apps.example.com"] != nil
	})
	b.Must(200, "PUT", "/v1/apps/shop/domains/ti.to/paths", testAdminToken, `{"paths":{"paulca":"solo.apps.example.com"}}`)
	want := map[string][]string{
		"shop.apps.example.com": {"vps-a", "vps-c"},
		"solo.apps.example.com": {"vps-c"},
		"ti.to":                 {"vps-a", "vps-c"},
		"api":                   {"vps-a", "vps-b", "vps-c"},
	}
	for _, n := range nodes {
		waitFor(t, 15*time.Second, n.Cfg.Node.Name+" routes the seeded fleet", func() bool {
			doc := routesDoc(t, n)
			return equalUpstreams(upstreamNodes(doc), want) && strings.Contains(fmt.Sprint(doc["routes"]), "paulca")
		})
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

// Three nodes on one bucket, written to through different nodes, publish one document:
// byte-identical bodies and the same ETag for the same prefer, and ?prefer=self on a
// node is ?prefer=<that node> anywhere.
func TestFleetNodesOnOneBucketServeIdenticalBytes(t *testing.T) {
	t.Parallel()
	bcfg := s3test.Shared(t).NewBucket(t)
	nodes := threeNodes(t, bcfg, 100*time.Millisecond, 15*time.Second, time.Minute)
	seedThreeNodeFleet(t, nodes)

	paths := []string{"/v1/ingress/routes", "/v1/ingress/traefik",
		"/v1/ingress/traefik?prefer=vps-a", "/v1/ingress/traefik?prefer=vps-c", "/v1/ingress/routes?prefer=vps-c"}
	for _, p := range paths {
		var last served
		waitFor(t, 10*time.Second, "identical "+p+" on every node", func() bool {
			var ok bool
			last, ok = identical(nodes, p)
			return ok
		})
		t.Logf("%s: %d bytes, ETag %s on all three nodes", p, len(last.Body), last.ETag)
	}
	for _, self := range nodes {
		own := serve(self, "/v1/ingress/traefik?prefer=self")
		for _, other := range nodes {
			named := serve(other, "/v1/ingress/traefik?prefer="+self.Cfg.Node.Name)
			if own.Code != 200 || named.ETag != own.ETag || !bytes.Equal(named.Body, own.Body) {
				t.Errorf("%s ?prefer=self differs from %s ?prefer=%s", self.Cfg.Node.Name, other.Cfg.Node.Name, self.Cfg.Node.Name)
			}
		}
	}
	// The preferred node leads shop's failover chain.
	for _, pref := range []string{"vps-a", "vps-c"} {
		resp, b := nodes[1].Get("/v1/ingress/routes?prefer="+pref, testIngressToken)
		var doc map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(b, &doc) != nil {
			t.Fatalf("routes?prefer=%s: %d", pref, resp.StatusCode)
		}
		if got := upstreamNodes(doc)["shop.apps.example.com"]; len(got) == 0 || got[0] != pref {
			t.Errorf("prefer=%s: shop upstreams %v", pref, got)
		}
	}
}

// A node whose heartbeat stops leaves every upstream list once its record is older
// than the TTL, except a list where it is the last upstream (fail static).
//
// The TTL is 2s with a 200ms heartbeat: a record's seen time is the heartbeat's time,
// so a live node's record is at most one heartbeat plus a write and a tick old.
func TestFleetStaleNodeLeavesUpstreamsExceptTheLast(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	bcfg := s3test.Shared(t).NewBucket(t)
	nodes := threeNodes(t, bcfg, 100*time.Millisecond, 200*time.Millisecond, ttl)
	seedThreeNodeFleet(t, nodes)
	live := nodes[:2]
	waitFor(t, 10*time.Second, "identical bytes before the stop", func() bool {
		_, ok := identical(nodes, "/v1/ingress/traefik")
		return ok
	})

	stoppedAt := time.Now()
	nodes[2].Stop() // vps-c: its heartbeat stops; its record stays in the bucket
	want := map[string][]string{
		"shop.apps.example.com": {"vps-a"},          // vps-c dropped
		"ti.to":                 {"vps-a"},          // same app, same chain
		"solo.apps.example.com": {"vps-c"},          // its last upstream: kept (fail static)
		"api":                   {"vps-a", "vps-b"}, // the API chain drops it too
	}
	for _, n := range live {
		waitFor(t, ttl+10*time.Second, n.Cfg.Node.Name+" drops stale vps-c", func() bool {
			return equalUpstreams(upstreamNodes(routesDoc(t, n)), want)
		})
		t.Logf("%s dropped vps-c %s after it stopped (TTL %s)", n.Cfg.Node.Name, time.Since(stoppedAt).Round(10*time.Millisecond), ttl)
		st := statusOf(t, n)
		var stale []string
		for _, ns := range st.Nodes {
			if ns.Stale {
				stale = append(stale, ns.Name)
			}
		}
		if !slices.Equal(stale, []string{"vps-c"}) {
			t.Errorf("%s status: stale nodes %v, want [vps-c]", n.Cfg.Node.Name, stale)
		}
		if !slices.ContainsFunc(st.Skipped, func(s api.Skipped) bool {
			return s.Object == "nodes/vps-c.json" && strings.Contains(s.Reason, "TTL")
		}) {
			t.Errorf("%s status: stale vps-c not reported in skipped: %+v", n.Cfg.Node.Name, st.Skipped)
		}
	}
	waitFor(t, 10*time.Second, "the live nodes agree byte for byte after the stale drop", func() bool {
		_, ok := identical(live, "/v1/ingress/traefik")
		return ok
	})
}

// A node started with different platform domains is named in every node's
// /v1/status (mismatchedSettings) and logged.
func TestFleetNodeWithDifferentSettingsIsReported(t *testing.T) {
	t.Parallel()
	bcfg := s3test.Shared(t).NewBucket(t)
	a := startNodeWithStore(t, fleetConfig(t, "vps-a", "127.0.0.2", 100*time.Millisecond, time.Hour, 4*time.Hour), openS3(t, bcfg))
	b := startNodeWithStore(t, fleetConfig(t, "vps-b", "127.0.0.3", 100*time.Millisecond, time.Hour, 4*time.Hour), openS3(t, bcfg))
	dcfg := fleetConfig(t, "vps-d", "127.0.0.4", 100*time.Millisecond, time.Hour, 4*time.Hour)
	dcfg.Platform.Domains = []string{"apps.other.example"}
	d := startNodeWithStore(t, dcfg, openS3(t, bcfg))

	for _, tc := range []struct {
		n    *testNode
		want []string
	}{
		{a, []string{"vps-d"}},
		{b, []string{"vps-d"}},
		{d, []string{"vps-a", "vps-b"}}, // from vps-d's side, the others differ
	} {
		waitFor(t, 10*time.Second, tc.n.Cfg.Node.Name+" reports mismatched settings", func() bool {
			return slices.Equal(statusOf(t, tc.n).MismatchedConfig, tc.want)
		})
		logs := tc.n.Logs.String()
		if !strings.Contains(logs, "different fleet settings") || !strings.Contains(logs, tc.want[0]) {
			t.Errorf("%s: mismatch not logged:\n%s", tc.n.Cfg.Node.Name, logs)
		}
	}
	if got := statusOf(t, a).MismatchedConfig; slices.Contains(got, "vps-b") {
		t.Errorf("vps-a reports vps-b, which runs the same settings: %v", got)
	}
}

// A malformed object in the bucket is skipped (counted as absent) and reported in
// /v1/status and the log; every other route stays.
func TestFleetBucketMalformedObjectSkippedAndReported(t *testing.T) {
	t.Parallel()
	bcfg := s3test.Shared(t).NewBucket(t)
	n := startNodeWithStore(t, fleetConfig(t, "vps-a", "127.0.0.2", 100*time.Millisecond, time.Hour, 4*time.Hour), openS3(t, bcfg))
	writer := openS3(t, bcfg)
	seedFleet(t, writer, "shop", "blog")
	n.WaitReady()
	waitFor(t, 10*time.Second, "two apps routed", func() bool { return len(hostsOf(routesDoc(t, n))) == 2 })

	putRaw(t, writer, "apps/broken.json", []byte(`{"name": "broken", "placement": [`))
	putRaw(t, writer, "apps/blog.json", []byte(`{"name": 42}`)) // good turned bad
	putRaw(t, writer, "nodes/vps-x.json", []byte("\x00\xff not json"))
	waitFor(t, 10*time.Second, "all three reported in status", func() bool {
		st := statusOf(t, n)
		var objs []string
		for _, s := range st.Skipped {
			objs = append(objs, s.Object)
		}
		return slices.Contains(objs, "apps/broken.json") && slices.Contains(objs, "apps/blog.json") && slices.Contains(objs, "nodes/vps-x.json")
	})
	// blog's object is malformed now: it is absent on every node (deterministic), the
	// rest stays.
	if hosts := strings.Join(hostsOf(routesDoc(t, n)), ","); hosts != "shop.apps.example.com" {
		t.Fatalf("routes after malformed objects: %s", hosts)
	}
	if st := statusOf(t, n); !st.Store.Reachable {
		t.Errorf("a malformed object made the store unreachable: %+v", st.Store)
	}
	for _, k := range []string{"apps/broken.json", "apps/blog.json", "nodes/vps-x.json"} {
		if !strings.Contains(n.Logs.String(), k) {
			t.Errorf("malformed %s not logged", k)
		}
	}
}

// ---- 3. faults ----

// defaultStoreOutage is how long TestStoreOutageKeepsServingLastDocument keeps MinIO
// down. The scenario is 30s; the default keeps CI time down and exercises the
// same paths (several failed ticks, failed heartbeats, a failed write). Set
// SCAFO_TEST_STORE_OUTAGE (a Go duration, e.g. 30s) for the full length.
const defaultStoreOutage = 8 * time.Second

func storeOutage(t *testing.T) time.Duration {
	v := os.Getenv("SCAFO_TEST_STORE_OUTAGE")
	if v == "" {
		return defaultStoreOutage
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("SCAFO_TEST_STORE_OUTAGE=%q: want a positive Go duration such as 30s", v)
	}
	return d
}

// While the store is down every node keeps serving its last document byte for byte
// and says since when the store is unreachable; a write fails with 503 and writes
// nothing; after the store returns, every node is reconciling again at once (within a
// few ticks; the time is logged).
func TestStoreOutageKeepsServingLastDocument(t *testing.T) {
	const interval = 500 * time.Millisecond
	outage := storeOutage(t)
	srv := s3test.Start(t)
	bcfg := srv.NewBucket(t)
	nodes := threeNodes(t, bcfg, interval, 2*time.Second, time.Minute)
	seedThreeNodeFleet(t, nodes)

	paths := []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/ingress/traefik?prefer=self"}
	last := map[string]served{} // node+path → the answer before the outage
	waitFor(t, 10*time.Second, "identical documents before the outage", func() bool {
		_, ok := identical(nodes, "/v1/ingress/traefik")
		return ok
	})
	for _, n := range nodes {
		for _, p := range paths {
			last[n.Cfg.Node.Name+p] = serve(n, p)
		}
	}
	sameAsBefore := func(when string) {
		t.Helper()
		for _, n := range nodes {
			for _, p := range paths {
				got, want := serve(n, p), last[n.Cfg.Node.Name+p]
				if got.Code != 200 || got.ETag != want.ETag || !bytes.Equal(got.Body, want.Body) {
					t.Fatalf("%s: %s %s: %d ETag %s, want the last document (ETag %s) byte for byte",
						when, n.Cfg.Node.Name, p, got.Code, got.ETag, want.ETag)
				}
			}
		}
	}

	stoppedAt := time.Now()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		var st api.Status
		// The heartbeat or the reconcile pass may notice first: the status says
		// unreachable with the heartbeat's error alone until the pass's error is in too.
		waitFor(t, 5*interval+5*time.Second, n.Cfg.Node.Name+" reports the store unreachable, with the pass's error", func() bool {
			st = statusOf(t, n)
			return !st.Store.Reachable && st.Store.Error != ""
		})
		since := st.Store.UnreachableSince
		switch {
		case since == nil:
			t.Errorf("%s: unreachable without unreachableSince: %+v", n.Cfg.Node.Name, st.Store)
		case since.Before(stoppedAt.Add(-2*interval)) || since.After(time.Now()):
			t.Errorf("%s: unreachableSince %s, store stopped at %s", n.Cfg.Node.Name, since, stoppedAt.UTC())
		}
		if st.Store.Error == "" || !st.Ready {
			t.Errorf("%s status during the outage: %+v ready=%v", n.Cfg.Node.Name, st.Store, st.Ready)
		}
		if since == nil {
			continue // reported above; a nil since must fail this test, not panic the package's binary
		}
		t.Logf("%s reports the store unreachable %s after the stop (since %s): %.120s", n.Cfg.Node.Name,
			time.Since(stoppedAt).Round(10*time.Millisecond), since.Format(time.RFC3339Nano), st.Store.Error)
	}

	// A write during the outage: 503, a clear error, nothing written.
	writeStart := time.Now()
	resp, body := nodes[0].Do("PUT", "/v1/apps/x", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"error":"store unavailable"`) ||
		!strings.Contains(string(body), "nothing was written") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("PUT /v1/apps/x during the outage: %d %s (Retry-After %q), want 503 store unavailable",
			resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	t.Logf("write during the outage answered %d in %s: %s", resp.StatusCode, time.Since(writeStart).Round(time.Millisecond), body)

	// An ingress polling every 250 ms for as long as the outage lasts (MinIO down for
	// that wall time: the scenario), not a synchronisation.
	checks := 0
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	for time.Since(stoppedAt) < outage {
		sameAsBefore("during the outage")
		checks++
		<-poll.C
	}
	t.Logf("store down %s: %d rounds of %d nodes x %d endpoints served the last document byte for byte",
		time.Since(stoppedAt).Round(100*time.Millisecond), checks, len(nodes), len(paths))

	restartAt := time.Now()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	backAt := time.Now()
	t.Logf("MinIO restarted and answering in %s", backAt.Sub(restartAt).Round(time.Millisecond))
	var wg sync.WaitGroup
	recovered := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recovered[i] = -1
			_ = proc.Poll(30*time.Second, proc.Tick, func() error {
				resp, b := n.Get("/v1/status", testAdminToken)
				var st api.Status
				// A successful pass started after the stop can only have read the
				// restarted store.
				if resp.StatusCode == 200 && json.Unmarshal(b, &st) == nil && st.Store.Reachable &&
					st.LastPass != nil && st.LastPass.After(stoppedAt) {
					recovered[i] = time.Since(backAt)
					return nil
				}
				return errors.New("not reconciling yet")
			})
		}()
	}
	wg.Wait()
	for i, n := range nodes {
		switch d := recovered[i]; {
		case d < 0:
			t.Errorf("%s: no successful pass within 30s of the store's return", n.Cfg.Node.Name)
		case d > 10*interval:
			// A node reconciles again at its next tick, plus a pass still in a failing
			// request when the store came back: typically 0.2-0.5 s here. The bound is
			// what a reconciler that backed off, or waited for a full re-read, would
			// exceed, not that figure: a busy 2-core machine under -race has taken 1.7 s
			// (and 1.01-1.05 s of a 1 s bound before that).
			t.Errorf("%s: first successful pass %s after the store's return, want within ten ticks (%s)", n.Cfg.Node.Name, d, 10*interval)
		default:
			t.Logf("%s reconciling again %s after the store's return (tick %s)", n.Cfg.Node.Name, d.Round(time.Millisecond), interval)
		}
	}
	sameAsBefore("after the outage")

	// Nothing of the failed write exists.
	probe := openS3(t, bcfg)
	if _, err := probe.Get(t.Context(), "apps/x.json"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("apps/x.json after the outage: %v, want not found", err)
	}
	nodes[1].Must(404, "GET", "/v1/apps/x", testAdminToken, "")
	audit := nodes[0].Must(200, "GET", "/v1/audit", testAdminToken, "")
	if strings.Contains(string(audit), `"app":"x"`) {
		t.Errorf("audit records the failed write: %s", audit)
	}

	// Convergence resumed: a change through one node reaches every node.
	changedAt := time.Now()
	nodes[1].Must(200, "PUT", "/v1/apps/solo", testAdminToken, `{"account":"acme","placement":["vps-c"],"health":{"path":"/ready"}}`)
	waitFor(t, 10*time.Second, "the change on every node", func() bool {
		s, ok := identical(nodes, "/v1/ingress/routes")
		return ok && strings.Contains(string(s.Body), `"/ready"`)
	})
	t.Logf("a write through vps-b after recovery served identically by all nodes in %s (tick %s)",
		time.Since(changedAt).Round(time.Millisecond), interval)
}
