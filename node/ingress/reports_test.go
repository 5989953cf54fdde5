package ingress_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

// publishedMark is the revision n publishes and the store serial it is known to be
// derived from, as its routing endpoint serves them (X-Scafo-Revision and
// X-Scafo-Serial of a poll that reports nothing); "", 0 before its first document.
func publishedMark(t *testing.T, n *testnode.Node) (string, uint64) {
	t.Helper()
	resp, _ := n.Get("/v1/ingress/traefik", testnode.IngressToken)
	serial, _ := strconv.ParseUint(resp.Header.Get(api.HeaderSerial), 10, 64)
	return resp.Header.Get(api.HeaderRevision), serial
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
