package probe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/internal/testinst"
	"github.com/scafo/ingress/node/store"
)

// probeNode is a whole node without a listener or a loop, its prober included, driven
// by its steps (node.Steps) on the test's clock and served in process (Handler). A
// probe round's probes run in the background: round waits for their results (the
// status's probe counts), not for time.
type probeNode struct {
	t     *testing.T
	cfg   *node.Config
	st    store.Store
	steps node.Steps
	h     http.Handler
	now   time.Time
}

func newProbeNode(t *testing.T, cfg *node.Config) *probeNode {
	t.Helper()
	if cfg.Node.APIPort == 0 {
		cfg.Node.APIPort = 7400 // what a record publishes: nothing listens
	}
	st := testnode.OpenDir(t, cfg.Store.Dir.Path)
	srv, err := node.NewWithStore(cfg, slog.New(slog.DiscardHandler), st, testnode.IngressToken, testnode.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	n := &probeNode{t: t, cfg: cfg, st: st, steps: srv.Steps(), h: srv.Handler(), now: time.Now()}
	n.pass()
	return n
}

// pass writes the record (what the probes decided) and runs a reconcile pass.
func (n *probeNode) pass() {
	n.t.Helper()
	n.now = n.now.Add(time.Duration(n.cfg.Reconcile.Interval))
	n.steps.Heartbeat(context.Background(), n.now)
	if err := n.steps.Reconcile(context.Background(), n.now, false); err != nil {
		n.t.Fatal(err)
	}
}

// rounds runs k probe rounds, each once the last one's probes have answered (every
// declared instance counts one more probe, or is refused), then a pass.
func (n *probeNode) rounds(k int) {
	n.t.Helper()
	for range k {
		before := n.status().Instances
		n.now = n.now.Add(time.Duration(n.cfg.Probe.Interval))
		n.steps.ProbeRound(context.Background(), n.now)
		nodetest.WaitFor(n.t, 10*time.Second, "the round's probes", func() bool {
			for _, b := range before {
				if a := n.instance(b.App); b.Declared && (a.Probe == nil || a.Probe.Refused == "" && (b.Probe != nil && a.Probe.Probes == b.Probe.Probes)) {
					return false
				}
			}
			return true
		})
	}
	n.pass()
}

func (n *probeNode) do(method, path, token, body string) (int, []byte) {
	req := httptest.NewRequest(method, "http://"+n.cfg.Node.Address+":"+strconv.Itoa(n.cfg.Node.APIPort)+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	n.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func (n *probeNode) must(code int, method, path, token, body string) []byte {
	n.t.Helper()
	got, b := n.do(method, path, token, body)
	if got != code {
		n.t.Fatalf("%s %s: %d %s, want %d", method, path, got, b, code)
	}
	return b
}

func (n *probeNode) status() api.Status {
	n.t.Helper()
	var st api.Status
	if err := json.Unmarshal(n.must(200, "GET", "/v1/status", testnode.AdminToken, ""), &st); err != nil {
		n.t.Fatal(err)
	}
	return st
}

// instance is app's instance in the status.
func (n *probeNode) instance(app string) api.Instance {
	n.t.Helper()
	for _, i := range n.status().Instances {
		if i.App == app {
			return i
		}
	}
	n.t.Fatalf("status lists no instance of %s", app)
	return api.Instance{}
}

// upstreams are the nodes the routing document sends host to.
func (n *probeNode) upstreams(host string) []string {
	n.t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(n.must(200, "GET", "/v1/ingress/routes", testnode.IngressToken, ""), &doc); err != nil {
		n.t.Fatal(err)
	}
	return testnode.UpstreamNodes(doc)[host]
}

func (n *probeNode) metric(line string) bool {
	return strings.Contains(string(n.must(200, "GET", "/metrics", "", "")), "\n"+line+"\n")
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
	a.must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, inst.Port))
	const host = "shop.apps.example.com"
	routed := func(want int) {
		t.Helper()
		b.pass()
		for _, n := range []*probeNode{a, b} {
			if u := n.upstreams(host); len(u) != want {
				t.Fatalf("%s routes %s to %v, want %d upstreams", n.cfg.Node.Name, host, u, want)
			}
		}
	}
	a.rounds(3)
	routed(1)
	if s := a.instance("shop"); s.Probe == nil || !s.Probe.Up || !s.Ready {
		t.Fatalf("status of the live instance: %+v", s)
	}
	a.must(200, "GET", "/v1/health/instances/shop", "", "")

	before := testnode.SerialOf(t, a.st)
	inst.Close()
	a.rounds(a.cfg.Probe.DownAfter)
	if testnode.RecordReady(t, a.st, "vps-a", "shop") || testnode.SerialOf(t, a.st) <= before {
		t.Fatal("the record still publishes the dead instance, or no bump announced it")
	}
	routed(0)
	a.must(503, "GET", "/v1/health/instances/shop", "", "")
	s := a.instance("shop")
	if !s.Declared || s.Ready || s.Probe == nil || s.Probe.Up || s.Probe.LastError == "" || s.Probe.Kind != "tcp" {
		t.Errorf("status of the dead instance: %+v %+v, want declared, not ready, probe down with an error", s, s.Probe)
	}
	if !a.metric(`scafo_instance_probe_transitions_total{to="down"} 1`) {
		t.Error("no down transition counted")
	}

	inst.Open()
	a.rounds(a.cfg.Probe.UpAfter)
	routed(1)
}

// A declared-not-ready instance stays out whatever its probe says, and a probe never
// publishes an instance its owner did not declare ready.
func TestProbeNeverPublishesAnInstanceDeclaredNotReady(t *testing.T) {
	t.Parallel()
	a := newProbeNode(t, testnode.ProbeConfig(t, "vps-a", t.TempDir()))
	inst := testinst.StartTCP(t)
	a.must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":false}`, inst.Port))
	a.rounds(3)
	if s := a.instance("shop"); s.Ready || s.Probe == nil || !s.Probe.Up {
		t.Errorf("status %+v: want probe up, published not ready", s)
	}
	if testnode.RecordReady(t, a.st, "vps-a", "shop") {
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
		a.must(201, "PUT", "/v1/apps/"+app, testnode.AdminToken, `{"account":"acme","placement":["vps-a"],"health":{"path":"/healthz"}}`)
		a.must(200, "PUT", "/v1/node/instances/"+app, testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, port))
	}
	a.pass() // the health paths, read from the applications
	a.rounds(2)
	if h := app.Header.Load(); h == nil || h.Get("Authorization") != "" || h.Get("User-Agent") != "scafo-node-probe" {
		t.Errorf("probe request headers %v: want no Authorization, User-Agent scafo-node-probe", h)
	}
	app.Code.Store(http.StatusInternalServerError)
	a.rounds(a.cfg.Probe.DownAfter)
	if s := a.instance("shop"); testnode.RecordReady(t, a.st, "vps-a", "shop") || s.Probe.Kind != "http" || !strings.Contains(s.Probe.LastError, "500") {
		t.Errorf("a 500: %+v, want down naming the status", s.Probe)
	}
	app.Code.Store(http.StatusOK)
	a.rounds(a.cfg.Probe.UpAfter)
	if !testnode.RecordReady(t, a.st, "vps-a", "shop") {
		t.Error("200 again: not up")
	}
	if s := a.instance("hop"); !s.Ready || s.Probe.Kind != "http" {
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
	a.must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, inst.Port))
	a.rounds(1)
	start := inst.Accepts.Load()
	for range 200 {
		a.must(200, "GET", "/v1/health/instances/shop", "", "")
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
	a.must(201, "PUT", "/v1/apps/bank", testnode.AdminToken, `{"account":"bank","placement":["vps-a"]}`)
	a.must(201, "PUT", "/v1/apps/evil", testnode.AdminToken, `{"account":"evil","placement":["vps-a"]}`)
	var bank struct{ Port int }
	json.Unmarshal(a.must(201, "POST", "/v1/node/instances/bank", testnode.AdminToken, `{}`), &bank)
	bankLn, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(bank.Port))
	if err != nil {
		t.Skipf("port %d of the allocation range is taken on this machine: %v", bank.Port, err)
	}
	defer bankLn.Close()
	a.must(200, "PUT", "/v1/node/instances/bank", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, bank.Port))
	var it struct{ Token string }
	json.Unmarshal(a.must(201, "POST", "/v1/tokens", testnode.AdminToken, `{"account":"evil","app":"evil","roles":["instance"]}`), &it)
	a.must(409, "PUT", "/v1/node/instances/evil", it.Token, fmt.Sprintf(`{"port":%d,"ready":true}`, bank.Port))
	a.must(403, "PUT", "/v1/node/instances/evil", it.Token, fmt.Sprintf(`{"port":%d,"ready":true}`, cfg.Node.APIPort))

	a.must(200, "PUT", "/v1/node/instances/evil", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, cfg.Node.APIPort))
	a.rounds(3) // bank, on its own port, is probed in each: evil never is
	if testnode.RecordReady(t, a.st, "vps-a", "evil") || len(a.upstreams("evil.apps.example.com")) != 0 {
		t.Error("an instance on the node API's port is published ready, or routed")
	}
	if s := a.instance("evil"); s.Probe == nil || s.Probe.Up || !strings.Contains(s.Probe.Refused, "API port") || s.Probe.Probes != 0 {
		t.Errorf("status %+v %+v: want refused (API port), never probed", s, s.Probe)
	}
	a.must(503, "GET", "/v1/health/instances/evil", "", "")
	if !a.metric("scafo_instance_probe_down 1") || !testnode.RecordReady(t, a.st, "vps-a", "bank") {
		t.Error("the refused instance is not counted down, or bank is not published ready")
	}
}

// The prober's settings: defaults, and every invalid combination named.
func TestProbeSettings(t *testing.T) {
	t.Parallel()
	def := node.NewConfig().Probe
	if def.Interval != ptypes.Duration(time.Second) || def.EffectiveTimeout() != 500*time.Millisecond || def.DownAfter != 2 || def.UpAfter != 2 || def.Concurrency != 32 ||
		def.FlapWindow != ptypes.Duration(time.Minute) || def.FlapUps != 3 || def.HoldDown != ptypes.Duration(10*time.Second) || def.HoldDownMax != ptypes.Duration(5*time.Minute) {
		t.Errorf("defaults %+v (timeout %s)", def, def.EffectiveTimeout())
	}
	for _, tc := range []struct {
		name string
		set  func(*node.ProbeConfig)
		err  string // "" valid
	}{
		{"defaults", func(*node.ProbeConfig) {}, ""},
		{"disabled", func(p *node.ProbeConfig) { p.Interval = 0; p.DownAfter = 0 }, ""},
		{"negative interval", func(p *node.ProbeConfig) { p.Interval = -1 }, "probe.interval"},
		{"timeout above interval", func(p *node.ProbeConfig) { p.Timeout = ptypes.Duration(2 * time.Second) }, "probe.timeout"},
		{"negative timeout", func(p *node.ProbeConfig) { p.Timeout = -1 }, "probe.timeout"},
		{"downAfter 0", func(p *node.ProbeConfig) { p.DownAfter = 0 }, "probe.downAfter"},
		{"upAfter 0", func(p *node.ProbeConfig) { p.UpAfter = 0 }, "probe.upAfter"},
		{"concurrency 1", func(p *node.ProbeConfig) { p.Concurrency = 1 }, "probe.concurrency"},
		{"concurrency 5000", func(p *node.ProbeConfig) { p.Concurrency = 5000 }, "probe.concurrency"},
		{"damping off", func(p *node.ProbeConfig) { p.FlapWindow = 0; p.FlapUps = 0; p.HoldDown = 0 }, ""},
		{"negative flapWindow", func(p *node.ProbeConfig) { p.FlapWindow = -1 }, "probe.flapWindow"},
		{"flapUps 1", func(p *node.ProbeConfig) { p.FlapUps = 1 }, "probe.flapUps"},
		{"holdDown 0", func(p *node.ProbeConfig) { p.HoldDown = 0 }, "probe.holdDown"},
		{"holdDownMax below holdDown", func(p *node.ProbeConfig) { p.HoldDownMax = ptypes.Duration(time.Second) }, "probe.holdDownMax"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := node.NewConfig()
			cfg.StateDir = t.TempDir()
			tc.set(&cfg.Probe)
			err := cfg.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one naming %s", err, tc.err)
			}
		})
	}
}
