package probe_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/internal/testinst"
)

// newProbeNode is a whole node, its prober included, driven by its steps on the test's
// clock and served in process (testnode.Stepped), after its first heartbeat and pass.
func newProbeNode(t *testing.T, cfg *node.Config) *testnode.Stepped {
	t.Helper()
	n := testnode.NewStepped(t, cfg, nil)
	n.Tick()
	return n
}

// upstreams are the nodes n's routing document sends host to.
func upstreams(n *testnode.Stepped, host string) []string {
	return testnode.UpstreamNodes(n.RoutesDoc())[host]
}

// TestDeadInstanceLeavesTheDocumentOnEveryNodeWithinATick (issue 13 item 2): an instance
// that stops accepting connections leaves its node's record at the probe rounds that
// find it down (a serial bump, not an hourly heartbeat's) and the document of every
// node at its next pass; it comes back when it listens again. The peer has no probes of
// its own: it learns only from the record.
func TestDeadInstanceLeavesTheDocumentOnEveryNodeWithinATick(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	a := newProbeNode(t, testnode.ProbeConfig(t, "vps-a", storeDir))
	b := newProbeNode(t, testnode.Config(t, "vps-b", storeDir))
	inst := testinst.StartTCP(t)
	a.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, inst.Port))
	const host = "shop.apps.example.com"
	routed := func(want int) {
		t.Helper()
		b.Tick()
		for _, n := range []*testnode.Stepped{a, b} {
			if u := upstreams(n, host); len(u) != want {
				t.Fatalf("%s routes %s to %v, want %d upstreams", n.Cfg.Node.Name, host, u, want)
			}
		}
	}
	a.Rounds(3)
	routed(1)
	if s := a.Instance("shop"); s.Probe == nil || !s.Probe.Up || !s.Ready {
		t.Fatalf("status of the live instance: %+v", s)
	}
	a.Must(200, "GET", "/v1/health/instances/shop", "", "")

	before := testnode.SerialOf(t, a.St)
	inst.Close()
	a.Rounds(a.Cfg.Probe.DownAfter)
	if testnode.RecordReady(t, a.St, "vps-a", "shop") || testnode.SerialOf(t, a.St) <= before {
		t.Fatal("the record still publishes the dead instance, or no bump announced it")
	}
	routed(0)
	a.Must(503, "GET", "/v1/health/instances/shop", "", "")
	s := a.Instance("shop")
	if !s.Declared || s.Ready || s.Probe == nil || s.Probe.Up || s.Probe.LastError == "" || s.Probe.Kind != "tcp" {
		t.Errorf("status of the dead instance: %+v %+v, want declared, not ready, probe down with an error", s, s.Probe)
	}
	if !a.Metric(`scafo_instance_probe_transitions_total{to="down"} 1`) {
		t.Error("no down transition counted")
	}

	inst.Open()
	a.Rounds(a.Cfg.Probe.UpAfter)
	routed(1)
}

// A declared-not-ready instance stays out whatever its probe says, and a probe never
// publishes an instance its owner did not declare ready.
func TestProbeNeverPublishesAnInstanceDeclaredNotReady(t *testing.T) {
	t.Parallel()
	a := newProbeNode(t, testnode.ProbeConfig(t, "vps-a", t.TempDir()))
	inst := testinst.StartTCP(t)
	a.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":false}`, inst.Port))
	a.Rounds(3)
	if s := a.Instance("shop"); s.Ready || s.Probe == nil || !s.Probe.Up {
		t.Errorf("status %+v: want probe up, published not ready", s)
	}
	if testnode.RecordReady(t, a.St, "vps-a", "shop") {
		t.Error("the record publishes an instance declared not ready")
	}
}

// An application's health path decides: 500 is down although the port accepts, 200
// up again; a 3xx is up and is never followed (the redirect's target, another
// listener, gets nothing); the probe sends no credential.
func TestProbeOfAHealthPathFollowsItsStatusNotItsRedirects(t *testing.T) {
	t.Parallel()
	a := newProbeNode(t, testnode.ProbeConfig(t, "vps-a", t.TempDir()))
	app := testinst.StartHealth(t, "/healthz", http.StatusOK, "")
	elsewhere := testinst.StartHealth(t, "/healthz", http.StatusOK, "")
	redir := testinst.StartHealth(t, "/healthz", 0, fmt.Sprintf("http://127.0.0.1:%d/healthz", elsewhere.Port))
	for app, port := range map[string]int{"shop": app.Port, "hop": redir.Port} {
		a.Must(201, "PUT", "/v1/apps/"+app, testnode.AdminToken, `{"account":"acme","placement":["vps-a"],"health":{"path":"/healthz"}}`)
		a.Must(200, "PUT", "/v1/node/instances/"+app, testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, port))
	}
	a.Tick() // the health paths, read from the applications
	a.Rounds(2)
	if h := app.Header.Load(); h == nil || h.Get("Authorization") != "" || h.Get("User-Agent") != "scafo-node-probe" {
		t.Errorf("probe request headers %v: want no Authorization, User-Agent scafo-node-probe", h)
	}
	app.Code.Store(http.StatusInternalServerError)
	a.Rounds(a.Cfg.Probe.DownAfter)
	if s := a.Instance("shop"); testnode.RecordReady(t, a.St, "vps-a", "shop") || s.Probe.Kind != "http" || !strings.Contains(s.Probe.LastError, "500") {
		t.Errorf("a 500: %+v, want down naming the status", s.Probe)
	}
	app.Code.Store(http.StatusOK)
	a.Rounds(a.Cfg.Probe.UpAfter)
	if !testnode.RecordReady(t, a.St, "vps-a", "shop") {
		t.Error("200 again: not up")
	}
	if s := a.Instance("hop"); !s.Ready || s.Probe.Kind != "http" {
		t.Errorf("a 302 health answer: %+v %+v, want up", s, s.Probe)
	}
	if n := elsewhere.Hits.Load(); n != 0 {
		t.Errorf("the redirect's target got %d probe requests, want 0 (redirects are never followed)", n)
	}
}

// The anonymous health endpoint answers from the prober and never dials: a burst of
// requests between two rounds costs the instance no connection.
func TestInstanceHealthEndpointDoesNotDialPerRequest(t *testing.T) {
	t.Parallel()
	a := newProbeNode(t, testnode.ProbeConfig(t, "vps-a", t.TempDir()))
	inst := testinst.StartTCP(t)
	a.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, inst.Port))
	a.Rounds(1)
	start := inst.Accepts.Load()
	for range 200 {
		a.Must(200, "GET", "/v1/health/instances/shop", "", "")
	}
	if got := inst.Accepts.Load() - start; got != 0 {
		t.Errorf("200 health requests made %d connections to the instance, want none", got)
	}
}

// Tenant-controlled ports: an application token can point its instance only at a port
// of the allocation range that no other application holds (409 on another tenant's,
// 403 on the node API's); the admin can point one at the API's port, and the prober
// then holds it down without dialling: a public hostname must never reach the node API
// around the apex's denied paths.
func TestProbeNeverVouchesForAnInstanceOnTheAPIPortOrAnotherTenantsPort(t *testing.T) {
	t.Parallel()
	cfg := testnode.ProbeConfig(t, "vps-a", t.TempDir())
	api, err := net.Listen("tcp", "127.0.0.1:0") // the node API's port accepts connections
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	cfg.Node.APIPort = api.Addr().(*net.TCPAddr).Port
	a := newProbeNode(t, cfg)
	a.Must(201, "PUT", "/v1/apps/bank", testnode.AdminToken, `{"account":"bank","placement":["vps-a"]}`)
	a.Must(201, "PUT", "/v1/apps/evil", testnode.AdminToken, `{"account":"evil","placement":["vps-a"]}`)
	var bank struct{ Port int }
	json.Unmarshal(a.Must(201, "POST", "/v1/node/instances/bank", testnode.AdminToken, `{}`), &bank)
	bankLn, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(bank.Port))
	if err != nil {
		t.Skipf("port %d of the allocation range is taken on this machine: %v", bank.Port, err)
	}
	defer bankLn.Close()
	a.Must(200, "PUT", "/v1/node/instances/bank", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, bank.Port))
	evil := a.Token("evil", "evil", `"instance"`)
	a.Must(409, "PUT", "/v1/node/instances/evil", evil, fmt.Sprintf(`{"port":%d,"ready":true}`, bank.Port))
	a.Must(403, "PUT", "/v1/node/instances/evil", evil, fmt.Sprintf(`{"port":%d,"ready":true}`, cfg.Node.APIPort))

	a.Must(200, "PUT", "/v1/node/instances/evil", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, cfg.Node.APIPort))
	a.Rounds(3) // bank, on its own port, is probed in each: evil never is
	if testnode.RecordReady(t, a.St, "vps-a", "evil") || len(upstreams(a, "evil.apps.example.com")) != 0 {
		t.Error("an instance on the node API's port is published ready, or routed")
	}
	if s := a.Instance("evil"); s.Probe == nil || s.Probe.Up || !strings.Contains(s.Probe.Refused, "API port") || s.Probe.Probes != 0 {
		t.Errorf("status %+v %+v: want refused (API port), never probed", s, s.Probe)
	}
	a.Must(503, "GET", "/v1/health/instances/evil", "", "")
	if !a.Metric("scafo_instance_probe_down 1") || !testnode.RecordReady(t, a.St, "vps-a", "bank") {
		t.Error("the refused instance is not counted down, or bank is not published ready")
	}
}
