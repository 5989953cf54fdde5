package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/node/store/s3"
	"github.com/scafo/ingress/node/store/s3/s3test"
	"github.com/scafo/ingress/render/routing"
)

// fakePlugin polls a node the way the provider plugin does: it reports the serial and
// revision of the last configuration it took (X-Scafo-Serial, X-Scafo-Revision of a
// 200) on its next poll. frozen stops it taking new configurations (a Traefik that
// cannot apply); stop ends its polls.
type fakePlugin struct {
	name   string
	n      *testNode
	frozen atomic.Bool
	mu     sync.Mutex
	serial uint64
	rev    string
	epoch  string
	held   []byte // the configuration it took last
	// reported are the serials it sent, in order, and when.
	reported []uint64
	sentAt   []time.Time
	stopped  chan struct{}
	done     chan struct{}
}

func startFakePlugin(t *testing.T, n *testNode, name string) *fakePlugin {
	p := &fakePlugin{name: name, n: n, stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stopped:
				return
			case <-time.After(20 * time.Millisecond):
			}
			p.poll()
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *fakePlugin) stop() {
	select {
	case <-p.stopped:
	default:
		close(p.stopped)
	}
	<-p.done
}

func (p *fakePlugin) poll() {
	req, _ := http.NewRequest(http.MethodGet, p.n.URL+"/v1/ingress/traefik", nil)
	req.Header.Set("Authorization", "Bearer "+testIngressToken)
	req.Header.Set(api.HeaderIngress, p.name)
	req.Header.Set(api.HeaderIngressKind, api.KindPlugin)
	p.mu.Lock()
	if p.serial > 0 {
		req.Header.Set(api.HeaderAppliedSerial, strconv.FormatUint(p.serial, 10))
		req.Header.Set(api.HeaderAppliedRevision, p.rev)
		if p.epoch != "" {
			req.Header.Set(api.HeaderAppliedEpoch, p.epoch)
		}
	}
	p.reported = append(p.reported, p.serial)
	p.sentAt = append(p.sentAt, time.Now())
	p.mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || p.frozen.Load() {
		return
	}
	n, _ := strconv.ParseUint(resp.Header.Get("X-Scafo-Serial"), 10, 64)
	p.mu.Lock()
	p.serial, p.rev, p.epoch = n, resp.Header.Get("X-Scafo-Revision"), resp.Header.Get("X-Scafo-Epoch")
	p.held = body
	p.mu.Unlock()
}

// reportedBy is the highest serial the fake plugin had reported by t.
func (p *fakePlugin) reportedBy(t time.Time) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n uint64
	for i, s := range p.reported {
		if p.sentAt[i].Before(t) {
			n = max(n, s)
		}
	}
	return n
}

func reportsConfig(t *testing.T, name, storeDir string) *node.Config {
	cfg := testConfig(t, name, storeDir)
	cfg.Ingresses.LostAfter = ptypes.Duration(2 * time.Second)
	cfg.Ingresses.ForgetAfter = ptypes.Duration(time.Hour)
	return cfg
}

// reportBackend is a fleet store the ingress-report tests run on.
type reportBackend struct {
	name string
	// open returns a new client of the one fleet store, as a node on its own machine
	// holds (a new S3 client on the same bucket, or the same directory).
	open func(t *testing.T) store.Store
}

// onReportBackends runs test on a directory store and on a bucket of a real MinIO
// (package s3test: skipped without one outside CI, failed in CI), the two at once: each
// has its own store, nodes and counters, and most of either's time is waiting on
// intervals (lostAfter, refreshes, view ages).
func onReportBackends(t *testing.T, test func(t *testing.T, be reportBackend)) {
	t.Run("dir", func(t *testing.T) {
		t.Parallel()
		p := t.TempDir()
		test(t, reportBackend{name: "dir", open: func(t *testing.T) store.Store { return openDir(t, p) }})
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		bcfg := s3test.Shared(t).NewBucket(t)
		test(t, reportBackend{name: "s3", open: func(t *testing.T) store.Store { return openS3(t, bcfg) }})
	})
}

// startReportsNode starts a node named name with reportsConfig on its own client of be.
func startReportsNode(t *testing.T, be reportBackend, name string) *testNode {
	t.Helper()
	n := startNodeWithStore(t, reportsConfig(t, name, t.TempDir()), be.open(t))
	n.WaitReady()
	return n
}

// A report is stored by the node its ingress polls, read by every other node, and never
// moves the serial or the revision (else applying a serial would make a new one).
func TestIngressReportsAreSharedAndNeverMoveTheSerialOrTheRevision(t *testing.T) {
	t.Parallel()
	onReportBackends(t, testIngressReportsAreShared)
}

func testIngressReportsAreShared(t *testing.T, be reportBackend) {
	a := startReportsNode(t, be, "vps-a")
	b := startReportsNode(t, be, "vps-b")
	waitFor(t, 5*time.Second, "a and b on one revision", func() bool {
		ra, _ := node.PublishedMark(a.Srv.Pub())
		rb, _ := node.PublishedMark(b.Srv.Pub())
		return ra == rb
	})
	serial := serialOf(t, a.St)
	rev, _ := node.PublishedMark(a.Srv.Pub())

	p := startFakePlugin(t, a, "edge-1")
	waitFor(t, 5*time.Second, "b lists edge-1 as current", func() bool {
		in, ok := ingressesOf(t, b)["edge-1"]
		return ok && in.State == "current" && in.Applied != nil && in.Applied.Serial == serial
	})
	in := ingressesOf(t, b)["edge-1"]
	if in.Kind != api.KindPlugin || in.Node != "vps-a" || in.Served != nil || in.Applied.Revision != rev || in.Behind != 0 {
		t.Errorf("b's view of edge-1 = %+v, want a plugin polling vps-a, applied serial %d revision %s, behind 0", in, serial, rev)
	}
	if stored := storedReport(t, a.St, "edge-1"); stored.Serial != serial || stored.Node != "vps-a" {
		t.Errorf("stored report %+v, want serial %d from vps-a", stored, serial)
	}
	// Polls keep coming (every 20 ms) for a while: no serial bump, no new revision.
	time.Sleep(600 * time.Millisecond)
	if got := serialOf(t, a.St); got != serial {
		t.Errorf("serial moved from %d to %d with reports alone", serial, got)
	}
	if r, _ := node.PublishedMark(a.Srv.Pub()); r != rev {
		t.Errorf("revision moved from %s to %s with reports alone", rev, r)
	}
	p.stop()
	waitFor(t, 6*time.Second, "edge-1 lost on b", func() bool {
		return ingressesOf(t, b)["edge-1"].State == "lost"
	})
}

// storedReport reads an ingress's object from the store.
func storedReport(t *testing.T, st store.Store, name string) ingress.Report {
	t.Helper()
	obj, err := st.Get(context.Background(), ingress.Prefix+name+".json")
	if err != nil {
		t.Fatalf("reading %s's report: %v", name, err)
	}
	var rep ingress.Report
	if err := json.Unmarshal(obj.Value, &rep); err != nil {
		t.Fatalf("%s's report %s: %v", name, obj.Value, err)
	}
	return rep
}

// An ingress that moves to another node is reported by that node: its first write is
// create-only and loses to the object the first node wrote, so it rereads it and takes
// it over (If-Match); the first node's next write loses in turn and it lets the
// ingress go. The object then stays with the new node, refreshed, never lost, never
// written back by the old one.
func TestAnIngressThatMovesIsTakenOverByItsNewNode(t *testing.T) {
	t.Parallel()
	onReportBackends(t, testAnIngressThatMovesIsTakenOver)
}

func testAnIngressThatMovesIsTakenOver(t *testing.T, be reportBackend) {
	a := startReportsNode(t, be, "vps-a")
	b := startReportsNode(t, be, "vps-b")
	p := startFakePlugin(t, a, "edge-1")
	waitFor(t, 5*time.Second, "b lists edge-1 on vps-a", func() bool {
		in := ingressesOf(t, b)["edge-1"]
		return in.Node == "vps-a" && in.State == "current"
	})
	p.stop()
	startFakePlugin(t, b, "edge-1")
	waitFor(t, 5*time.Second, "edge-1's object written by vps-b", func() bool {
		return storedReport(t, a.St, "edge-1").Node == "vps-b"
	})
	// Past lostAfter (2s) since edge-1 left vps-a: vps-a has let it go; vps-b keeps it.
	first := storedReport(t, a.St, "edge-1")
	deadline := time.Now().Add(time.Duration(a.Cfg.Ingresses.LostAfter) + 500*time.Millisecond)
	for time.Now().Before(deadline) {
		if rep := storedReport(t, a.St, "edge-1"); rep.Node != "vps-b" {
			t.Fatalf("edge-1's object written back by %s after vps-b took it over: %+v", rep.Node, rep)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if last := storedReport(t, a.St, "edge-1"); !last.Seen.After(first.Seen) {
		t.Errorf("edge-1's object not refreshed by vps-b: seen %s, then %s", first.Seen, last.Seen)
	}
	for _, n := range []*testNode{a, b} {
		if in := ingressesOf(t, n)["edge-1"]; in.Node != "vps-b" || in.State != "current" {
			t.Errorf("%s lists edge-1 as %+v, want current on vps-b", n.Cfg.Node.Name, in)
		}
	}
}

// A restarted node knows no etag of the reports it wrote before: its create-only write
// loses to its own object, and it takes the object over, so the report keeps being
// refreshed (else the ingress would be shown lost while it polls).
func TestARestartedNodeTakesOverItsIngressReports(t *testing.T) {
	t.Parallel()
	onReportBackends(t, testARestartedNodeTakesOverItsReports)
}

func testARestartedNodeTakesOverItsReports(t *testing.T, be reportBackend) {
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	a := startNodeWithStore(t, cfg, be.open(t))
	a.WaitReady()
	b := startReportsNode(t, be, "vps-b")
	p := startFakePlugin(t, a, "edge-1")
	waitFor(t, 5*time.Second, "b lists edge-1 current on vps-a", func() bool {
		in := ingressesOf(t, b)["edge-1"]
		return in.Node == "vps-a" && in.State == "current"
	})
	p.stop()
	a.Stop()
	before := storedReport(t, b.St, "edge-1")

	a = startNodeWithStore(t, cfg, be.open(t))
	a.WaitReady()
	startFakePlugin(t, a, "edge-1")
	// Refreshed by the restarted node past lostAfter (2s) after its last write before
	// the restart: else vps-b would list edge-1 lost while it polls.
	lostAfter := time.Duration(cfg.Ingresses.LostAfter)
	waitFor(t, 3*lostAfter, "edge-1's object refreshed past lostAfter", func() bool {
		after := storedReport(t, b.St, "edge-1")
		return after.Node == "vps-a" && after.Seen.Sub(before.Seen) > lostAfter
	})
	if in := ingressesOf(t, b)["edge-1"]; in.State != "current" || in.Node != "vps-a" {
		t.Errorf("vps-b lists edge-1 as %+v, want current on vps-a", in)
	}
}

// The write answers only once every live ingress reports its serial; a stuck ingress
// makes it answer 202 at its timeout naming that ingress; a lost one is not waited for.
func TestWaitAppliedWaitsForEveryLiveIngress(t *testing.T) {
	t.Parallel()
	onReportBackends(t, testWaitAppliedWaitsForEveryLiveIngress)
}

func testWaitAppliedWaitsForEveryLiveIngress(t *testing.T, be reportBackend) {
	a := startReportsNode(t, be, "vps-a")
	b := startReportsNode(t, be, "vps-b")
	p1 := startFakePlugin(t, a, "edge-1")
	p2 := startFakePlugin(t, b, "edge-2")
	waitFor(t, 5*time.Second, "both ingresses current", func() bool {
		ins := ingressesOf(t, a)
		return ins["edge-1"].State == "current" && ins["edge-2"].State == "current"
	})

	start := time.Now()
	resp, body := a.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=10s", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	answered := time.Now()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT with wait=applied: %d %s", resp.StatusCode, body)
	}
	var ab api.Applied
	if err := json.Unmarshal(body, &ab); err != nil {
		t.Fatal(err)
	}
	if !ab.Applied || ab.Ingresses != 2 || len(ab.Behind) != 0 || ab.Serial == 0 {
		t.Fatalf("answer %s: want applied by 2 ingresses", body)
	}
	if !strings.Contains(string(ab.Result), `"name":"shop"`) || resp.Header.Get("ETag") == "" {
		t.Errorf("result %s, ETag %q: want the application and its ETag", ab.Result, resp.Header.Get("ETag"))
	}
	// Both ingresses had reported the write's serial before the answer came.
	for _, p := range []*fakePlugin{p1, p2} {
		if got := p.reportedBy(answered); got < ab.Serial {
			t.Errorf("%s had reported serial %d when the write answered, want >= %d", p.name, got, ab.Serial)
		}
	}
	t.Logf("answered applied in %s", time.Since(start))

	// edge-2's Traefik stops applying: the next write waits for it, then answers 202.
	p2.frozen.Store(true)
	resp, body = a.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=700ms", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("PUT with a stuck ingress: %d %s, want 202", resp.StatusCode, body)
	}
	ab = api.Applied{}
	json.Unmarshal(body, &ab)
	if ab.Applied || len(ab.Behind) != 1 || ab.Behind[0].Name != "edge-2" || !strings.Contains(ab.Detail, "edge-2") {
		t.Errorf("202 body %s: want edge-2 named behind", body)
	}
	if ins := ingressesOf(t, b); ins["edge-2"].State != "behind" || ins["edge-2"].Behind == 0 {
		t.Errorf("status of edge-2 = %+v, want behind", ins["edge-2"])
	}

	// Stopped for good: lost after ingresses.lostAfter, and no longer waited for.
	p2.stop()
	waitFor(t, 6*time.Second, "edge-2 lost", func() bool { return ingressesOf(t, a)["edge-2"].State == "lost" })
	resp, body = a.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=5s", testAdminToken, `{"account":"acme","placement":["vps-a","vps-b"]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT with edge-2 lost: %d %s, want 200", resp.StatusCode, body)
	}
}

// Bad wait parameters are 400 naming the parameter, and nothing is written.
func TestWaitAppliedRefusesBadParametersWithoutWriting(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	before := serialOf(t, n.St)
	for _, c := range []struct {
		method, query, want string
	}{
		{http.MethodPut, "wait=live", "invalid wait"},
		{http.MethodPut, "wait=applied&wait=applied", "invalid wait"},
		{http.MethodPut, "wait=applied&timeout=61s", "invalid timeout"},
		{http.MethodPut, "wait=applied&timeout=0s", "invalid timeout"},
		{http.MethodPut, "wait=applied&timeout=-1s", "invalid timeout"},
		{http.MethodPut, "wait=applied&timeout=ten", "invalid timeout"},
		{http.MethodPut, "timeout=5s", "invalid timeout"},
		{http.MethodGet, "wait=applied", "invalid wait"},
	} {
		resp, body := n.Do(c.method, "/v1/apps/shop?"+c.query, testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
		var e struct{ Error, Detail string }
		json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error != c.want || e.Detail == "" {
			t.Errorf("%s ?%s: %d %s, want 400 %q with a detail", c.method, c.query, resp.StatusCode, body, c.want)
		}
	}
	resp, body := n.Do(http.MethodPost, "/v1/node/instances/shop?wait=live", testAdminToken, "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid wait") {
		t.Errorf("instance write with a bad wait: %d %s, want 400", resp.StatusCode, body)
	}
	if insts := n.Srv.Instances().Records(); len(insts) != 0 {
		t.Errorf("instances %v: a refused instance write allocated", insts)
	}
	if got := serialOf(t, n.St); got != before {
		t.Errorf("serial moved from %d to %d: a refused request wrote", before, got)
	}
	if _, err := n.St.Get(context.Background(), "apps/shop.json"); err == nil {
		t.Error("apps/shop.json exists: a refused request wrote it")
	}
}

// An application token may wait on its own writes; its refused writes are refused as
// without wait (403), never waited on.
func TestWaitAppliedOnAnApplicationTokensOwnWrite(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	fleetOf(t, n, "tito-classic", "tito-go")
	_, tok := issueToken(t, n, "acme", "tito-classic", `"publish"`)
	startFakePlugin(t, n, "edge-1")
	resp, body := n.Do(http.MethodPut, "/v1/apps/tito-classic/domains/ti.to/paths?wait=applied&timeout=10s", tok,
		`{"paths":{"paulca":"tito-go.apps.example.com"}}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"applied":true`) || !strings.Contains(string(body), `"paulca"`) {
		t.Fatalf("flip with wait: %d %s", resp.StatusCode, body)
	}
	resp, body = n.Do(http.MethodPut, "/v1/apps/tito-go/domains/ti.to/paths?wait=applied", tok, `{"paths":{}}`)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "applied") {
		t.Errorf("another app's door with wait: %d %s, want the plain 403", resp.StatusCode, body)
	}
}

// Waiters are bounded: beyond the cap a write asking to wait is refused before it is
// made; a waiter whose client goes away frees its slot.
func TestWaitAppliedWaitersAreBounded(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Srv.Ingresses().SetWaiterSlots(1)
	p := startFakePlugin(t, n, "edge-1")
	waitFor(t, 5*time.Second, "edge-1 current", func() bool { return ingressesOf(t, n)["edge-1"].State == "current" })
	p.frozen.Store(true)

	initial := serialOf(t, n.St)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, n.URL+"/v1/apps/a1?wait=applied&timeout=30s", strings.NewReader(`{"account":"acme","placement":["vps-a"]}`))
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	// The waiter's slot is taken before its write commits: wait for both, or the serial
	// read below can come before the first write's bump (seen under load).
	waitFor(t, 20*time.Second, "the first write committed and waiting", func() bool {
		return waiting(n) == 1 && serialOf(t, n.St) != initial
	})
	before := serialOf(t, n.St)
	resp, body := n.Do(http.MethodPut, "/v1/apps/a2?wait=applied", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many waiters") {
		t.Errorf("second waiter: %d %s, want 503 too many waiters", resp.StatusCode, body)
	}
	if got := serialOf(t, n.St); got != before {
		t.Errorf("the refused waiter wrote (serial %d -> %d)", before, got)
	}
	cancel()
	if code := <-first; code != 0 {
		t.Errorf("first waiter answered %d after its client left", code)
	}
	waitFor(t, 5*time.Second, "the slot freed", func() bool { return waiting(n) == 0 })
}

// Reports are refused (the poll is served) for bad names and kinds; names beyond
// ingresses.maxTracked are refused; a serial beyond the node's is clamped; a flood of
// reports does not multiply store writes.
func TestHostileIngressReports(t *testing.T) {
	t.Parallel()
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	cfg.Ingresses.MaxTracked = 8
	st, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	cs := newCountingStore(st, false)
	n := startNodeWithStore(t, cfg, cs)
	n.WaitReady()
	poll := func(hdr ...string) *http.Response {
		resp, _ := n.Get("/v1/ingress/traefik", testIngressToken, hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("poll with %v: %d, want 200 (a report never changes what is served)", hdr, resp.StatusCode)
		}
		return resp
	}
	for _, hdr := range [][]string{
		{api.HeaderIngress, strings.Repeat("a", 64)},
		{api.HeaderIngress, "Edge"},
		{api.HeaderIngress, "edge/../x"},
		{api.HeaderIngress, "-edge"},
		{api.HeaderIngress, "edge", api.HeaderIngressKind, "nginx"},
		{api.HeaderIngress, "edge", api.HeaderAppliedSerial, "5"},
		{api.HeaderIngress, "edge", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, "-5"},
		{api.HeaderIngress, "edge", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedRevision, "nothex"},
		{api.HeaderIngress, "edge", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedEpoch, "x"},
	} {
		if got := poll(hdr...).Header.Get(api.HeaderIngressReport); !strings.HasPrefix(got, "refused: ") {
			t.Errorf("report %v: %s %q, want refused", hdr, api.HeaderIngressReport, got)
		}
	}
	known := n.Srv.Identity().Serial()
	poll(api.HeaderIngress, "liar", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, "999999999")
	if in := ingressesOf(t, n)["liar"]; in.Applied == nil || in.Applied.Serial != known {
		t.Errorf("a serial from the future: %+v, want clamped to %d", in.Applied, known)
	}

	base := cs.snapshot()["Put"]
	for i := range 200 {
		poll(api.HeaderIngress, fmt.Sprintf("spam-%d", i))
	}
	// A report flood: many polls of one name.
	for range 200 {
		poll(api.HeaderIngress, "spam-0")
	}
	time.Sleep(time.Second)
	ins := ingressesOf(t, n)
	if len(ins) > cfg.Ingresses.MaxTracked {
		t.Errorf("%d ingresses tracked, want at most %d", len(ins), cfg.Ingresses.MaxTracked)
	}
	if got := poll(api.HeaderIngress, "spam-199").Header.Get(api.HeaderIngressReport); !strings.Contains(got, "maxTracked") {
		t.Errorf("a name beyond maxTracked: %q, want refused naming ingresses.maxTracked", got)
	}
	if puts := cs.snapshot()["Put"] - base; puts > cfg.Ingresses.MaxTracked+2 {
		t.Errorf("%d store writes for 400 reports of %d names, want at most one per tracked name", puts, cfg.Ingresses.MaxTracked)
	}
	// Made-up names, each different: still a line a minute per header at fault.
	for i := range 100 {
		poll(api.HeaderIngress, fmt.Sprintf("Bad-%d", i))
	}
	if l := n.Logs.String(); strings.Count(l, "ingress report refused") > 12 {
		t.Errorf("refusals logged %d times, want each reason once a minute", strings.Count(l, "ingress report refused"))
	}
}

// A corrupt report object is skipped with its reason; the rest are listed.
func TestCorruptIngressObjectIsSkippedWithAReason(t *testing.T) {
	t.Parallel()
	onReportBackends(t, testCorruptIngressObjectIsSkipped)
}

func testCorruptIngressObjectIsSkipped(t *testing.T, be reportBackend) {
	n := startReportsNode(t, be, "vps-a")
	ctx := context.Background()
	good, _ := json.Marshal(ingress.Report{Name: "edge-1", Kind: api.KindHTTP, Node: "vps-b", Serial: 1, Seen: time.Now().UTC()})
	for k, v := range map[string]string{
		"ingresses/edge-1.json": string(good),
		"ingresses/bad.json":    "{",
		"ingresses/other.json":  strings.Replace(string(good), "edge-1", "edge-2", 1),
		"ingresses/kind.json":   strings.Replace(strings.Replace(string(good), "edge-1", "kind", 1), `"http"`, `"squid"`, 1),
	} {
		if _, err := n.St.Put(ctx, k, []byte(v), store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	s := statusOf(t, n)
	if len(s.Ingresses) != 1 || s.Ingresses[0].Name != "edge-1" || s.Ingresses[0].Served == nil {
		t.Errorf("ingresses %+v, want edge-1 alone (served)", s.Ingresses)
	}
	reasons := map[string]string{}
	for _, sk := range s.IngressesSkipped {
		reasons[sk.Object] = sk.Reason
	}
	if !strings.Contains(reasons["ingresses/bad.json"], "malformed") || !strings.Contains(reasons["ingresses/other.json"], "does not match") ||
		!strings.Contains(reasons["ingresses/kind.json"], "kind") {
		t.Errorf("skipped %v, want the three bad objects with their reasons", reasons)
	}
}

// A Traefik on the HTTP provider is counted at what it was served, once it polls again.
func TestHTTPProviderIngressIsServedNotApplied(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	resp, _ := n.Get("/v1/ingress/traefik?prefer=self", testIngressToken, api.HeaderIngress, "edge-h")
	serial, _ := strconv.ParseUint(resp.Header.Get("X-Scafo-Serial"), 10, 64)
	if in := ingressesOf(t, n)["edge-h"]; in.Kind != api.KindHTTP || in.Served == nil || in.Served.Serial != 0 || in.Applied != nil {
		t.Errorf("after one poll: %+v, want kind http, nothing counted yet", in)
	}
	n.Get("/v1/ingress/traefik?prefer=self", testIngressToken, api.HeaderIngress, "edge-h")
	if in := ingressesOf(t, n)["edge-h"]; in.Served == nil || in.Served.Serial != serial || in.Served.Revision != resp.Header.Get("X-Scafo-Revision") || in.State != "current" {
		t.Errorf("after a second poll: %+v, want served serial %d, current", in, serial)
	}
}

// Reports ride the routing endpoints, which the public apex never routes.
func TestReportsAreNotReachableThroughTheApex(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/v1/ingress/", "/v1/status"} {
		found := false
		for _, d := range routing.DeniedAPIPrefixes {
			found = found || strings.HasPrefix(p, d)
		}
		if !found {
			t.Errorf("%s is not under a denied apex prefix %v", p, routing.DeniedAPIPrefixes)
		}
	}
}

// Metrics count the fleet's ingresses by state and the oldest live report's age; a
// write with wait=applied and no ingress at all answers once this node publishes it.
func TestIngressMetricsAndAWaitWithNoIngress(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	resp, body := n.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=10s", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	var ab api.Applied
	json.Unmarshal(body, &ab)
	if resp.StatusCode != http.StatusOK || ab.Ingresses != 0 {
		t.Fatalf("wait with no ingress: %d %s", resp.StatusCode, body)
	}
	if _, mark := node.PublishedMark(n.Srv.Pub()); mark < ab.Serial {
		t.Errorf("answered applied at serial %d while this node publishes serial %d", ab.Serial, mark)
	}
	if !strings.Contains(string(routesDocBytes(t, n)), `"shop.apps.example.com"`) {
		t.Error("answered applied before this node published the application")
	}

	p := startFakePlugin(t, n, "edge-1")
	waitFor(t, 5*time.Second, "edge-1 current", func() bool { return ingressesOf(t, n)["edge-1"].State == "current" })
	metric := func(name string) string {
		_, b := n.Get("/metrics", "")
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, name+" ") {
				return strings.TrimPrefix(line, name+" ")
			}
		}
		return ""
	}
	if got := metric(`scafo_ingresses{state="current"}`); got != "1" {
		t.Errorf(`scafo_ingresses{state="current"} = %q, want 1`, got)
	}
	if got := metric(`scafo_ingress_oldest_report_seconds`); got == "" {
		t.Error("no scafo_ingress_oldest_report_seconds")
	}
	p.frozen.Store(true)
	n.Must(http.StatusCreated, http.MethodPut, "/v1/apps/cart", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	waitFor(t, 5*time.Second, "edge-1 behind in the metrics", func() bool { return metric(`scafo_ingresses{state="behind"}`) == "1" })
	p.stop()
	waitFor(t, 6*time.Second, "edge-1 lost in the metrics", func() bool { return metric(`scafo_ingresses{state="lost"}`) == "1" })
}

func routesDocBytes(t *testing.T, n *testNode) []byte {
	t.Helper()
	_, b := n.Get("/v1/ingress/routes", testIngressToken)
	return b
}

// listFails fails LIST of ingresses/ while on.
type listFails struct {
	store.Store
	on atomic.Bool
}

func (l *listFails) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if l.on.Load() && prefix == ingress.Prefix {
		return nil, fmt.Errorf("listing: %w", store.ErrUnavailable)
	}
	return l.Store.List(ctx, prefix)
}

// When the fleet's reports cannot be read, a write never answers "applied": the
// ingresses it cannot see may be behind.
func TestWaitAppliedIsNeverAppliedOnAPartialView(t *testing.T) {
	t.Parallel()
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	st, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	lf := &listFails{Store: st}
	n := startNodeWithStore(t, cfg, lf)
	n.WaitReady()
	startFakePlugin(t, n, "edge-1")
	waitFor(t, 5*time.Second, "edge-1 current", func() bool { return ingressesOf(t, n)["edge-1"].State == "current" })
	lf.on.Store(true)
	// The view read before the switch may still be cached: wait until the node's view
	// is the failing one, so the write below meets it (and not a view read earlier).
	waitFor(t, 10*time.Second, "the reports unreadable", func() bool { return statusOf(t, n).IngressesError != "" })
	resp, body := n.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=1500ms", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), "could not be read") {
		t.Errorf("with the reports unreadable: %d %s, want 202 saying so", resp.StatusCode, body)
	}
	if s := statusOf(t, n); s.IngressesError == "" || len(s.Ingresses) != 1 {
		t.Errorf("status with the reports unreadable: error %q, %d ingresses; want the error and this node's own", s.IngressesError, len(s.Ingresses))
	}
}

// reportCost counts store requests on ingresses/ by method.
type reportCost struct {
	store.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *reportCost) count(method, key string) {
	if strings.HasPrefix(key, ingress.Prefix) {
		c.mu.Lock()
		c.n[method]++
		c.mu.Unlock()
	}
}

func (c *reportCost) Get(ctx context.Context, key string) (store.Object, error) {
	c.count("get", key)
	return c.Store.Get(ctx, key)
}

func (c *reportCost) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.count("list", prefix)
	return c.Store.List(ctx, prefix)
}

func (c *reportCost) Put(ctx context.Context, key string, v []byte, cond store.Condition) (string, error) {
	c.count("put", key)
	return c.Store.Put(ctx, key, v, cond)
}

func (c *reportCost) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// prefixRoute sends the calls on keys under prefix to another client of the same
// store, so that client's counters (HTTP requests on S3) are those keys' alone.
type prefixRoute struct {
	store.Store
	prefix string
	to     store.Store
}

func (r prefixRoute) on(key string) store.Store {
	if strings.HasPrefix(key, r.prefix) {
		return r.to
	}
	return r.Store
}

func (r prefixRoute) Get(ctx context.Context, key string) (store.Object, error) {
	return r.on(key).Get(ctx, key)
}

func (r prefixRoute) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	return r.on(key).GetIfChanged(ctx, key, etag)
}

func (r prefixRoute) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	return r.on(prefix).List(ctx, prefix)
}

func (r prefixRoute) Put(ctx context.Context, key string, v []byte, cond store.Condition) (string, error) {
	return r.on(key).Put(ctx, key, v, cond)
}

func (r prefixRoute) Delete(ctx context.Context, key, ifMatch string) error {
	return r.on(key).Delete(ctx, key, ifMatch)
}

// countedReports is a node's store on be that counts the calls on ingresses/; those go
// through a client of their own, whose HTTP requests httpOf counts on S3 (the reports'
// alone: the reconcile ticks use the other client; zero on a directory).
func countedReports(t *testing.T, be reportBackend) (rc *reportCost, httpOf func() s3.Stats) {
	reports := be.open(t)
	rc = &reportCost{Store: prefixRoute{Store: be.open(t), prefix: ingress.Prefix, to: reports}, n: map[string]int{}}
	httpOf = func() s3.Stats { return s3.Stats{ByMethod: map[string]int64{}} }
	if s, ok := reports.(*s3.Store); ok {
		httpOf = s.Stats
	}
	return rc, httpOf
}

// costOf runs f and returns the calls on ingresses/ and HTTP requests it cost.
func costOf(rc *reportCost, httpOf func() s3.Stats, f func()) (map[string]int, s3.Stats) {
	before, hb := rc.counts(), httpOf()
	f()
	d := rc.counts()
	for k := range d {
		if d[k] -= before[k]; d[k] == 0 {
			delete(d, k)
		}
	}
	return d, httpOf().Sub(hb)
}

// What an idle ingress costs the store: the node it long-polls refreshes its report
// once per lostAfter/4 (a held long-poll counts as heard from), and nothing is read
// until someone asks (status, metrics, a waiting write). On S3 every store call is one
// HTTP request (a conditional PUT that loses would show as a GET more: write rereads
// the object), and a later read of unchanged reports costs one LIST and no GET (the
// etag listed is the etag read and written).
func TestAnIdleIngressCostsOneWritePerRefreshAndNoRead(t *testing.T) {
	t.Parallel()
	onReportBackends(t, testAnIdleIngressCosts)
}

func testAnIdleIngressCosts(t *testing.T, be reportBackend) {
	cfg := reportsConfig(t, "vps-a", t.TempDir()) // lostAfter 2s: a refresh every 500ms
	rc, httpOf := countedReports(t, be)
	n := startNodeWithStore(t, cfg, rc)
	n.WaitReady()
	resp, _ := n.Get("/v1/ingress/traefik", testIngressToken, api.HeaderIngress, "edge-1", api.HeaderIngressKind, api.KindPlugin)
	etag := resp.Header.Get("ETag")
	start := time.Now()
	const held = 3 * time.Second
	// One long-poll held for the whole window (nothing changes), longer than lostAfter.
	codes := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, n.URL+"/v1/ingress/traefik?wait="+held.String(), nil)
		req.Header.Set("Authorization", "Bearer "+testIngressToken)
		req.Header.Set("If-None-Match", etag)
		req.Header.Set(api.HeaderIngress, "edge-1")
		req.Header.Set(api.HeaderIngressKind, api.KindPlugin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			codes <- 0
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}()
	time.Sleep(time.Duration(cfg.Ingresses.LostAfter) + 500*time.Millisecond)
	if in := ingressesOf(t, n)["edge-1"]; in.State == "lost" {
		t.Errorf("edge-1 lost while its long-poll is held: %+v", in)
	}
	if code := <-codes; code != http.StatusNotModified {
		t.Fatalf("long-poll: %d", code)
	}
	elapsed := time.Since(start)
	time.Sleep(2 * ingress.MinWriteGap)
	c, h := rc.counts(), httpOf()
	refreshes := int(elapsed / (time.Duration(cfg.Ingresses.LostAfter) / 4))
	t.Logf("%s: held %s: store calls on ingresses/ %v, HTTP %+v (refresh every %s)",
		be.name, elapsed.Round(time.Millisecond), c, h, time.Duration(cfg.Ingresses.LostAfter)/4)
	if c["put"] < 2 || c["put"] > refreshes+2 {
		t.Errorf("%d report writes in %s, want about one per refresh (%d) plus the first", c["put"], elapsed, refreshes)
	}
	// One status was asked for, mid-poll: one LIST, and a GET of the one report new
	// to this node's view.
	if c["list"] != 1 || c["get"] != 1 {
		t.Errorf("reads of ingresses/ with one status asked for: %v, want one LIST and one GET", c)
	}
	if be.name == "s3" {
		// One HTTP request per call: a PUT per write, a GET for the LIST (one page) and
		// one for the report; nothing retried, nothing else.
		want := s3.Stats{Requests: int64(c["put"] + 2), ByMethod: map[string]int64{"PUT": int64(c["put"]), "GET": 2}}
		if h.Requests != want.Requests || !maps.Equal(h.ByMethod, want.ByMethod) || h.Failed != 0 || h.NotModified != 0 {
			t.Errorf("HTTP requests on ingresses/: %+v, want %+v", h, want)
		}
	}

	// The report is still now (its last write is done): once the views read above have
	// aged, a status costs one LIST and no GET.
	statusCost := func() (map[string]int, s3.Stats) {
		time.Sleep(ingress.StatusViewMaxAge + 100*time.Millisecond)
		return costOf(rc, httpOf, func() {
			if in := ingressesOf(t, n)["edge-1"]; in.Applied == nil {
				t.Fatalf("edge-1 %+v, want listed", in)
			}
		})
	}
	d, hd := statusCost() // reads the report as last written
	t.Logf("%s: a status after the last write: store calls %v, HTTP %+v", be.name, d, hd)
	d, hd = statusCost()
	t.Logf("%s: the next status: store calls %v, HTTP %+v", be.name, d, hd)
	if want := map[string]int{"list": 1}; !maps.Equal(d, want) {
		t.Errorf("a status with no report changed since the last: store calls on ingresses/ %v, want %v", d, want)
	}
	if be.name == "s3" && (hd.Requests != 1 || hd.ByMethod["GET"] != 1 || hd.Failed != 0) {
		t.Errorf("a status with no report changed since the last: HTTP %+v, want one GET (the LIST)", hd)
	}
}

// More reports than one LIST answers (S3 pages at 1 000 keys) are all read, once: a
// later status lists every page and GETs none of them.
func TestIngressReportsPastOneListPage(t *testing.T) {
	t.Parallel()
	onReportBackends(t, testIngressReportsPastOneListPage)
}

func testIngressReportsPastOneListPage(t *testing.T, be reportBackend) {
	const reports = 1001
	st := be.open(t)
	seen := time.Now().UTC()
	for i := range reports {
		b, _ := json.Marshal(ingress.Report{Name: fmt.Sprintf("edge-%04d", i), Kind: api.KindPlugin, Node: "vps-b", Serial: 1, Seen: seen})
		if _, err := st.Put(t.Context(), fmt.Sprintf("%sedge-%04d.json", ingress.Prefix, i), b, store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	rc, httpOf := countedReports(t, be)
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	cfg.Ingresses.LostAfter = ptypes.Duration(time.Minute)
	// What is counted is requests, not time: on a loaded machine 1 001 cold GETs may
	// take longer than the 2 s a read may take in production (the view would be
	// partial), and the view's age is the test's to move, not a sleep's.
	var ahead atomic.Int64
	n := startNodeWithStore(t, cfg, rc, func(s *node.Server) {
		s.Ingresses().ViewTimeout = 2 * time.Minute
		s.Ingresses().Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	})
	n.WaitReady()
	for i, want := range []map[string]int{{"list": 1, "get": reports}, {"list": 1}} {
		if i > 0 {
			ahead.Add(int64(ingress.StatusViewMaxAge + time.Millisecond)) // the view is now too old to reuse
		}
		var s api.Status
		d, h := costOf(rc, httpOf, func() { s = statusOf(t, n) })
		if s.IngressesError != "" || len(s.Ingresses) != reports || s.Ingresses[reports-1].Name != fmt.Sprintf("edge-%04d", reports-1) {
			t.Fatalf("status %d: %d ingresses, error %q; want the %d reports", i, len(s.Ingresses), s.IngressesError, reports)
		}
		if !maps.Equal(d, want) {
			t.Errorf("status %d: store calls on ingresses/ %v, want %v", i, d, want)
		}
		// On S3 a LIST of 1 001 keys is two requests (pages of 1 000).
		if be.name == "s3" && (h.ByMethod["GET"] != int64(2+want["get"]) || h.Requests != h.ByMethod["GET"] || h.Failed != 0) {
			t.Errorf("status %d: HTTP %+v, want 2 LIST pages and %d GETs", i, h, want["get"])
		}
		t.Logf("%s: status %d of %d reports: store calls %v, HTTP %d requests", be.name, i, reports, d, h.Requests)
	}
}

// slowLink relays TCP connections from a loopback port to addr, holding every chunk a
// client sends for delay before passing it on: a real MinIO behind a round trip of an
// object store a region away. It returns the relay's address.
func slowLink(t *testing.T, addr string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			track(c)
			track(up)
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, up)
			}()
			go func() {
				defer wg.Done()
				defer up.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						time.Sleep(delay)
						if _, werr := up.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// A node reads the fleet's reports in time from an object store a region away. With
// 120 reports at 25 ms a request, one GET after another took 3 s, beyond the 2 s a read
// of the reports may take (ingressViewTimeout); and a read that timed out kept nothing,
// so every later one started over and failed the same way: the node never listed the
// fleet's ingresses, and every write with ?wait=applied answered 202 ("could not be
// read") whatever the ingresses held.
func TestIngressReportsAreReadInTimeFromAStoreARegionAway(t *testing.T) {
	t.Parallel()
	const (
		reports = 120
		rtt     = 25 * time.Millisecond
	)
	bcfg := s3test.Shared(t).NewBucket(t)
	writer := openS3(t, bcfg)
	for i := range reports {
		b, _ := json.Marshal(ingress.Report{Name: fmt.Sprintf("edge-%03d", i), Kind: api.KindPlugin, Node: "vps-b", Serial: 1, Seen: time.Now().UTC()})
		if _, err := writer.Put(t.Context(), fmt.Sprintf("%sedge-%03d.json", ingress.Prefix, i), b, store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	far := bcfg
	far.Endpoint = slowLink(t, bcfg.Endpoint, rtt)
	farReports := openS3(t, far)
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	cfg.Ingresses.LostAfter = ptypes.Duration(time.Minute) // every report live
	// Only ingresses/ goes the long way: the reconcile pass is not what is measured.
	n := startNodeWithStore(t, cfg, prefixRoute{Store: openS3(t, bcfg), prefix: ingress.Prefix, to: farReports})
	n.WaitReady()
	// The first status reads them all, within the one read's ingressViewTimeout.
	start, before := time.Now(), farReports.Stats()
	s := statusOf(t, n)
	if s.IngressesError != "" || len(s.Ingresses) != reports {
		t.Errorf("the first status: %d ingresses, error %q; want the %d reports", len(s.Ingresses), s.IngressesError, reports)
	}
	d := farReports.Stats().Sub(before)
	t.Logf("%d reports at %s a request: listed in %s, %d HTTP requests %v", reports, rtt, time.Since(start).Round(time.Millisecond), d.Requests, d.ByMethod)
	if d.Failed != 0 || d.ByMethod["GET"] != reports+1 {
		t.Errorf("reading %d reports: HTTP %+v, want one LIST and one GET per report", reports, d)
	}
}

// An ingress not heard from for ingresses.forgetAfter is forgotten: its object is
// deleted by the next node that reads the reports.
func TestIngressNotSeenForForgetAfterIsForgotten(t *testing.T) {
	t.Parallel()
	onReportBackends(t, testIngressNotSeenForForgetAfterIsForgotten)
}

func testIngressNotSeenForForgetAfterIsForgotten(t *testing.T, be reportBackend) {
	n := startReportsNode(t, be, "vps-a") // forgetAfter 1h
	ctx := context.Background()
	for name, age := range map[string]time.Duration{"old": 2 * time.Hour, "recent": 30 * time.Minute} {
		b, _ := json.Marshal(ingress.Report{Name: name, Kind: api.KindPlugin, Node: "vps-b", Serial: 1, Seen: time.Now().Add(-age).UTC()})
		if _, err := n.St.Put(ctx, ingress.Prefix+name+".json", b, store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	ins := ingressesOf(t, n)
	if _, ok := ins["old"]; ok {
		t.Errorf("an ingress not seen for 2h is listed (forgetAfter 1h): %+v", ins["old"])
	}
	if ins["recent"].State != "lost" {
		t.Errorf("an ingress not seen for 30m: %+v, want listed lost", ins["recent"])
	}
	if _, err := n.St.Get(ctx, ingress.Prefix+"old.json"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the forgotten ingress's object: %v, want deleted", err)
	}
}

// One account cannot take every waiter slot: its application tokens hold at most
// ingress.MaxWaitersPerAccount; another account's writes, and the admin's, still wait.
func TestWaitAppliedSlotsAreSharedBetweenAccounts(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	fleetOf(t, n, "tito-classic@tito", "tito-go@tito", "shop")
	n.Must(http.StatusCreated, http.MethodPut, "/v1/apps/shop/domains/shop.example.org", testAdminToken, "")
	_, tito := issueToken(t, n, "tito", "tito-classic", `"publish"`)
	_, acme := issueToken(t, n, "acme", "shop", `"publish"`)
	p := startFakePlugin(t, n, "edge-1")
	waitFor(t, 5*time.Second, "edge-1 current", func() bool { return ingressesOf(t, n)["edge-1"].State == "current" })
	p.frozen.Store(true)

	// tito's waiters hold their slots until the test ends (a short timeout expired before
	// the checks below on a loaded machine), then leave with their client.
	initial := serialOf(t, n.St)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range ingress.MaxWaitersPerAccount {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, n.URL+"/v1/apps/tito-classic/domains/ti.to/paths?wait=applied&timeout=60s",
				strings.NewReader(fmt.Sprintf(`{"paths":{"p%d":"tito-go.apps.example.com"}}`, i)))
			req.Header.Set("Authorization", "Bearer "+tito)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// A waiter's slot is taken before its write commits: wait for every write's serial
	// bump too, or edge-1 may still hold the serial a no-op write below answers at.
	waitFor(t, 20*time.Second, "tito's writes committed and waiting", func() bool {
		return waiting(n) == ingress.MaxWaitersPerAccount && serialOf(t, n.St) >= initial+uint64(ingress.MaxWaitersPerAccount)
	})
	resp, body := n.Do(http.MethodPut, "/v1/apps/tito-classic/domains/ti.to/paths?wait=applied&timeout=4s", tito, `{"paths":{"x":"tito-go.apps.example.com"}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many waiters") {
		t.Errorf("tito's write beyond its share: %d %s, want 503", resp.StatusCode, body)
	}
	for _, tok := range []string{acme, testAdminToken} {
		resp, body = n.Do(http.MethodPut, "/v1/apps/shop/domains/shop.example.org/paths?wait=applied&timeout=300ms", tok, `{"paths":{}}`)
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("another account's write (token %.8s…) while tito holds its share: %d %s, want 202 (edge-1 is behind)", tok, resp.StatusCode, body)
		}
	}
}

// A report object seen in the future (a corrupt object, or one written by a node whose
// clock ran far ahead and then left) would never be lost nor forgotten: a ghost every
// ?wait=applied waits for, answering 202 forever. Seen more than lostAfter ahead of
// this node's clock, it is skipped with the reason, like any other malformed report.
func TestIngressReportSeenInTheFutureIsSkippedNotWaitedForForever(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir())) // lostAfter 2s
	n.WaitReady()
	ctx := context.Background()
	ghost, _ := json.Marshal(ingress.Report{Name: "ghost", Kind: api.KindPlugin, Node: "vps-z", Serial: 1, Seen: time.Now().Add(365 * 24 * time.Hour).UTC()})
	if _, err := n.St.Put(ctx, ingress.Prefix+"ghost.json", ghost, store.Condition{}); err != nil {
		t.Fatal(err)
	}
	resp, body := n.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=1s", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a write waiting with only a ghost report in the store: %d %s, want 200", resp.StatusCode, body)
	}
	s := statusOf(t, n)
	for _, in := range s.Ingresses {
		if in.Name == "ghost" {
			t.Errorf("a report seen a year ahead is listed %+v, want skipped", in)
		}
	}
	reasons := map[string]string{}
	for _, sk := range s.IngressesSkipped {
		reasons[sk.Object] = sk.Reason
	}
	if !strings.Contains(reasons["ingresses/ghost.json"], "future") {
		t.Errorf("skipped %v, want ingresses/ghost.json with a reason naming the future", reasons)
	}
}

// Application tokens together never hold every waiter slot: a share is kept for the
// admin, so tenants (several accounts, each within its own share) cannot make the
// control plane's writes with ?wait=applied fail with 503 before they are made.
func TestWaitAppliedKeepsSlotsForTheAdmin(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Srv.Ingresses().SetWaiterSlots(2 * ingress.MaxWaitersPerAccount) // two accounts' shares
	fleetOf(t, n, "tito-classic@tito", "tito-go@tito", "shop")
	n.Must(http.StatusCreated, http.MethodPut, "/v1/apps/shop/domains/shop.example.org", testAdminToken, "")
	_, tito := issueToken(t, n, "tito", "tito-classic", `"publish"`)
	_, acme := issueToken(t, n, "acme", "shop", `"publish"`)
	p := startFakePlugin(t, n, "edge-1")
	waitFor(t, 5*time.Second, "edge-1 current", func() bool { return ingressesOf(t, n)["edge-1"].State == "current" })
	p.frozen.Store(true)

	var wg sync.WaitGroup
	defer wg.Wait()
	var refused atomic.Int32
	wait := func(tok, path, body string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPut, n.URL+path+"?wait=applied&timeout=4s", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				if resp.StatusCode == http.StatusServiceUnavailable {
					refused.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	for i := range ingress.MaxWaitersPerAccount {
		wait(tito, "/v1/apps/tito-classic/domains/ti.to/paths", fmt.Sprintf(`{"paths":{"p%d":"tito-go.apps.example.com"}}`, i))
		wait(acme, "/v1/apps/shop/domains/shop.example.org/paths", fmt.Sprintf(`{"paths":{"p%d":"shop.apps.example.com"}}`, i))
	}
	waitFor(t, 5*time.Second, "every tenant write waiting or refused", func() bool {
		return waiting(n)+int(refused.Load()) == 2*ingress.MaxWaitersPerAccount
	})
	if got, limit := n.Srv.Ingresses().Waiters(); got >= limit {
		t.Errorf("application tokens hold %d of %d waiter slots, want some kept for the admin", got, limit)
	}
	resp, body := n.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=300ms", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("the admin's write while tenants wait: %d %s, want 202 (edge-1 is behind)", resp.StatusCode, body)
	}
}

// waiting is the waiter slots n's writes hold.
func waiting(n *testNode) int {
	held, _ := n.Srv.Ingresses().Waiters()
	return held
}
