package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/node/store/s3/s3test"
	"github.com/scafo/ingress/render/routing"
)

// A report is stored by the node its ingress polls, read by every other node, and never
// moves the serial or the revision (else applying a serial would make a new one).
func TestIngressReportsAreSharedAndNeverMoveTheSerialOrTheRevision(t *testing.T) {
	t.Parallel()
	testnode.OnReportBackends(t, testIngressReportsAreShared)
}

func testIngressReportsAreShared(t *testing.T, be testnode.ReportBackend) {
	a := testnode.StartReportsNode(t, be, "vps-a")
	b := testnode.StartReportsNode(t, be, "vps-b")
	nodetest.WaitFor(t, 5*time.Second, "a and b on one revision", func() bool {
		ra, _ := publishedMark(t, a)
		rb, _ := publishedMark(t, b)
		return ra == rb
	})
	serial := testnode.SerialOf(t, a.St)
	rev, _ := publishedMark(t, a)

	p := testnode.StartFakePlugin(t, a, "edge-1")
	nodetest.WaitFor(t, 5*time.Second, "b lists edge-1 as current", func() bool {
		in, ok := testnode.IngressesOf(t, b)["edge-1"]
		return ok && in.State == "current" && in.Applied != nil && in.Applied.Serial == serial
	})
	in := testnode.IngressesOf(t, b)["edge-1"]
	if in.Kind != api.KindPlugin || in.Node != "vps-a" || in.Served != nil || in.Applied.Revision != rev || in.Behind != 0 {
		t.Errorf("b's view of edge-1 = %+v, want a plugin polling vps-a, applied serial %d revision %s, behind 0", in, serial, rev)
	}
	if stored := storedReport(t, a.St, "edge-1"); stored.Serial != serial || stored.Node != "vps-a" {
		t.Errorf("stored report %+v, want serial %d from vps-a", stored, serial)
	}
	// Polls keep coming (every 20 ms) for a while: no serial bump, no new revision.
	time.Sleep(600 * time.Millisecond)
	if got := testnode.SerialOf(t, a.St); got != serial {
		t.Errorf("serial moved from %d to %d with reports alone", serial, got)
	}
	if r, _ := publishedMark(t, a); r != rev {
		t.Errorf("revision moved from %s to %s with reports alone", rev, r)
	}
	p.Stop()
	nodetest.WaitFor(t, 6*time.Second, "edge-1 lost on b", func() bool {
		return testnode.IngressesOf(t, b)["edge-1"].State == "lost"
	})
}

// publishedMark is the revision n publishes and the store serial it is known to be
// derived from, as its routing endpoint serves them (X-Scafo-Revision and
// X-Scafo-Serial of a poll that reports nothing); "", 0 before its first document.
func publishedMark(t *testing.T, n *testnode.Node) (string, uint64) {
	t.Helper()
	resp, _ := n.Get("/v1/ingress/traefik", testnode.IngressToken)
	serial, _ := strconv.ParseUint(resp.Header.Get(api.HeaderSerial), 10, 64)
	return resp.Header.Get(api.HeaderRevision), serial
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
	testnode.OnReportBackends(t, testAnIngressThatMovesIsTakenOver)
}

func testAnIngressThatMovesIsTakenOver(t *testing.T, be testnode.ReportBackend) {
	a := testnode.StartReportsNode(t, be, "vps-a")
	b := testnode.StartReportsNode(t, be, "vps-b")
	p := testnode.StartFakePlugin(t, a, "edge-1")
	nodetest.WaitFor(t, 5*time.Second, "b lists edge-1 on vps-a", func() bool {
		in := testnode.IngressesOf(t, b)["edge-1"]
		return in.Node == "vps-a" && in.State == "current"
	})
	p.Stop()
	testnode.StartFakePlugin(t, b, "edge-1")
	nodetest.WaitFor(t, 5*time.Second, "edge-1's object written by vps-b", func() bool {
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
	for _, n := range []*testnode.Node{a, b} {
		if in := testnode.IngressesOf(t, n)["edge-1"]; in.Node != "vps-b" || in.State != "current" {
			t.Errorf("%s lists edge-1 as %+v, want current on vps-b", n.Cfg.Node.Name, in)
		}
	}
}

// A restarted node knows no etag of the reports it wrote before: its create-only write
// loses to its own object, and it takes the object over, so the report keeps being
// refreshed (else the ingress would be shown lost while it polls).
func TestARestartedNodeTakesOverItsIngressReports(t *testing.T) {
	t.Parallel()
	testnode.OnReportBackends(t, testARestartedNodeTakesOverItsReports)
}

func testARestartedNodeTakesOverItsReports(t *testing.T, be testnode.ReportBackend) {
	cfg := testnode.ReportsConfig(t, "vps-a", t.TempDir())
	a := testnode.StartWithStore(t, cfg, be.Open(t))
	a.WaitReady()
	b := testnode.StartReportsNode(t, be, "vps-b")
	p := testnode.StartFakePlugin(t, a, "edge-1")
	nodetest.WaitFor(t, 5*time.Second, "b lists edge-1 current on vps-a", func() bool {
		in := testnode.IngressesOf(t, b)["edge-1"]
		return in.Node == "vps-a" && in.State == "current"
	})
	p.Stop()
	a.Stop()
	before := storedReport(t, b.St, "edge-1")

	a = testnode.StartWithStore(t, cfg, be.Open(t))
	a.WaitReady()
	testnode.StartFakePlugin(t, a, "edge-1")
	// Refreshed by the restarted node past lostAfter (2s) after its last write before
	// the restart: else vps-b would list edge-1 lost while it polls.
	lostAfter := time.Duration(cfg.Ingresses.LostAfter)
	nodetest.WaitFor(t, 3*lostAfter, "edge-1's object refreshed past lostAfter", func() bool {
		after := storedReport(t, b.St, "edge-1")
		return after.Node == "vps-a" && after.Seen.Sub(before.Seen) > lostAfter
	})
	if in := testnode.IngressesOf(t, b)["edge-1"]; in.State != "current" || in.Node != "vps-a" {
		t.Errorf("vps-b lists edge-1 as %+v, want current on vps-a", in)
	}
}

// The write answers only once every live ingress reports its serial; a stuck ingress
// makes it answer 202 at its timeout naming that ingress; a lost one is not waited for.
func TestWaitAppliedWaitsForEveryLiveIngress(t *testing.T) {
	t.Parallel()
	testnode.OnReportBackends(t, testWaitAppliedWaitsForEveryLiveIngress)
}

func testWaitAppliedWaitsForEveryLiveIngress(t *testing.T, be testnode.ReportBackend) {
	a := testnode.StartReportsNode(t, be, "vps-a")
	b := testnode.StartReportsNode(t, be, "vps-b")
	p1 := testnode.StartFakePlugin(t, a, "edge-1")
	p2 := testnode.StartFakePlugin(t, b, "edge-2")
	nodetest.WaitFor(t, 5*time.Second, "both ingresses current", func() bool {
		ins := testnode.IngressesOf(t, a)
		return ins["edge-1"].State == "current" && ins["edge-2"].State == "current"
	})

	start := time.Now()
	resp, body := a.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=10s", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
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
	for _, p := range []*testnode.FakePlugin{p1, p2} {
		if got := p.ReportedBy(answered); got < ab.Serial {
			t.Errorf("%s had reported serial %d when the write answered, want >= %d", p.Name, got, ab.Serial)
		}
	}
	t.Logf("answered applied in %s", time.Since(start))

	// edge-2's Traefik stops applying: the next write waits for it, then answers 202.
	p2.Frozen.Store(true)
	resp, body = a.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=700ms", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("PUT with a stuck ingress: %d %s, want 202", resp.StatusCode, body)
	}
	ab = api.Applied{}
	json.Unmarshal(body, &ab)
	if ab.Applied || len(ab.Behind) != 1 || ab.Behind[0].Name != "edge-2" || !strings.Contains(ab.Detail, "edge-2") {
		t.Errorf("202 body %s: want edge-2 named behind", body)
	}
	if ins := testnode.IngressesOf(t, b); ins["edge-2"].State != "behind" || ins["edge-2"].Behind == 0 {
		t.Errorf("status of edge-2 = %+v, want behind", ins["edge-2"])
	}

	// Stopped for good: lost after ingresses.lostAfter, and no longer waited for.
	p2.Stop()
	nodetest.WaitFor(t, 6*time.Second, "edge-2 lost", func() bool { return testnode.IngressesOf(t, a)["edge-2"].State == "lost" })
	resp, body = a.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=5s", testnode.AdminToken, `{"account":"acme","placement":["vps-a","vps-b"]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT with edge-2 lost: %d %s, want 200", resp.StatusCode, body)
	}
}

// An application token may wait on its own writes; its refused writes are refused as
// without wait (403), never waited on.
func TestWaitAppliedOnAnApplicationTokensOwnWrite(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.ReportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	_, tok := testnode.IssueToken(t, n, "acme", "tito-classic", `"publish"`)
	testnode.StartFakePlugin(t, n, "edge-1")
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
	n := testnode.Start(t, testnode.ReportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	resp, body := n.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=10s", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	var ab api.Applied
	json.Unmarshal(body, &ab)
	if resp.StatusCode != http.StatusOK || ab.Ingresses != 0 {
		t.Fatalf("wait with no ingress: %d %s", resp.StatusCode, body)
	}
	if _, mark := publishedMark(t, n); mark < ab.Serial {
		t.Errorf("answered applied at serial %d while this node publishes serial %d", ab.Serial, mark)
	}
	if !strings.Contains(string(routesDocBytes(t, n)), `"shop.apps.example.com"`) {
		t.Error("answered applied before this node published the application")
	}

	p := testnode.StartFakePlugin(t, n, "edge-1")
	nodetest.WaitFor(t, 5*time.Second, "edge-1 current", func() bool { return testnode.IngressesOf(t, n)["edge-1"].State == "current" })
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
	p.Frozen.Store(true)
	n.Must(http.StatusCreated, http.MethodPut, "/v1/apps/cart", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	nodetest.WaitFor(t, 5*time.Second, "edge-1 behind in the metrics", func() bool { return metric(`scafo_ingresses{state="behind"}`) == "1" })
	p.Stop()
	nodetest.WaitFor(t, 6*time.Second, "edge-1 lost in the metrics", func() bool { return metric(`scafo_ingresses{state="lost"}`) == "1" })
}

func routesDocBytes(t *testing.T, n *testnode.Node) []byte {
	t.Helper()
	_, b := n.Get("/v1/ingress/routes", testnode.IngressToken)
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
	cfg := testnode.ReportsConfig(t, "vps-a", t.TempDir())
	st, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	lf := &listFails{Store: st}
	n := testnode.StartWithStore(t, cfg, lf)
	n.WaitReady()
	testnode.StartFakePlugin(t, n, "edge-1")
	nodetest.WaitFor(t, 5*time.Second, "edge-1 current", func() bool { return testnode.IngressesOf(t, n)["edge-1"].State == "current" })
	lf.on.Store(true)
	// The view read before the switch may still be cached: wait until the node's view
	// is the failing one, so the write below meets it (and not a view read earlier).
	nodetest.WaitFor(t, 10*time.Second, "the reports unreadable", func() bool { return testnode.StatusOf(t, n).IngressesError != "" })
	resp, body := n.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=1500ms", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), "could not be read") {
		t.Errorf("with the reports unreadable: %d %s, want 202 saying so", resp.StatusCode, body)
	}
	if s := testnode.StatusOf(t, n); s.IngressesError == "" || len(s.Ingresses) != 1 {
		t.Errorf("status with the reports unreadable: error %q, %d ingresses; want the error and this node's own", s.IngressesError, len(s.Ingresses))
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
	writer := testnode.OpenS3(t, bcfg)
	for i := range reports {
		b, _ := json.Marshal(ingress.Report{Name: fmt.Sprintf("edge-%03d", i), Kind: api.KindPlugin, Node: "vps-b", Serial: 1, Seen: time.Now().UTC()})
		if _, err := writer.Put(t.Context(), fmt.Sprintf("%sedge-%03d.json", ingress.Prefix, i), b, store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	far := bcfg
	far.Endpoint = slowLink(t, bcfg.Endpoint, rtt)
	farReports := testnode.OpenS3(t, far)
	cfg := testnode.ReportsConfig(t, "vps-a", t.TempDir())
	cfg.Ingresses.LostAfter = ptypes.Duration(time.Minute) // every report live
	// Only ingresses/ goes the long way: the reconcile pass is not what is measured.
	n := testnode.StartWithStore(t, cfg, testnode.PrefixRoute{Store: testnode.OpenS3(t, bcfg), Prefix: ingress.Prefix, To: farReports})
	n.WaitReady()
	// The first status reads them all, within the one read's ingressViewTimeout.
	start, before := time.Now(), farReports.Stats()
	s := testnode.StatusOf(t, n)
	if s.IngressesError != "" || len(s.Ingresses) != reports {
		t.Errorf("the first status: %d ingresses, error %q; want the %d reports", len(s.Ingresses), s.IngressesError, reports)
	}
	d := farReports.Stats().Sub(before)
	t.Logf("%d reports at %s a request: listed in %s, %d HTTP requests %v", reports, rtt, time.Since(start).Round(time.Millisecond), d.Requests, d.ByMethod)
	if d.Failed != 0 || d.ByMethod["GET"] != reports+1 {
		t.Errorf("reading %d reports: HTTP %+v, want one LIST and one GET per report", reports, d)
	}
}
