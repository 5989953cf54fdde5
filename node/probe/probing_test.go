package probe_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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
)

// instanceStatusOf is app's instance in n's /v1/status.
func instanceStatusOf(t *testing.T, n *testnode.Node, app string) api.Instance {
	t.Helper()
	_, b := n.Get("/v1/status", testnode.AdminToken)
	var st api.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("status %s: %v", b, err)
	}
	for _, i := range st.Instances {
		if i.App == app {
			return i
		}
	}
	t.Fatalf("status lists no instance of %s: %s", app, b)
	return api.Instance{}
}

// The guarantee of issue 13 item 2: an instance that stops accepting connections leaves
// its node's record (a serial bump, not the next heartbeat: heartbeats are an hour
// here) and, within a reconcile tick, the document of every node; it comes back when
// it listens again. The peer has no probes of its own: it learns only from the record.
func TestDeadInstanceLeavesTheDocumentOnEveryNodeWithinATick(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	a := testnode.Start(t, testnode.ProbeConfig(t, "vps-a", storeDir))
	a.WaitReady()
	b := testnode.Start(t, testnode.Config(t, "vps-b", storeDir))
	b.WaitReady()

	inst := testinst.StartTCP(t)
	a.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, inst.Port))
	const host = "shop.apps.example.com"
	addr := "127.0.0.1:" + strconv.Itoa(inst.Port)
	for _, n := range []*testnode.Node{a, b} {
		nodetest.WaitFor(t, 5*time.Second, n.Cfg.Node.Name+" routes the live instance", func() bool {
			u := testnode.UpstreamsOf(t, n, host)
			return len(u) == 1 && u[0] == addr
		})
	}
	nodetest.WaitFor(t, 5*time.Second, "probes of the live instance", func() bool {
		s := instanceStatusOf(t, a, "shop")
		return s.Probe != nil && s.Probe.Probes >= 3 && s.Probe.Up && s.Ready
	})
	if resp, body := a.Get("/v1/health/instances/shop", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("health of the live instance: %d %s", resp.StatusCode, body)
	}

	before := testnode.SerialOf(t, a.St)
	inst.Close()
	t0 := time.Now()
	nodetest.WaitFor(t, 5*time.Second, "vps-a's record says not ready", func() bool { return !testnode.RecordReady(t, a.St, "vps-a", "shop") })
	recorded := time.Since(t0)
	// The record is written, then the serial bumped (naming it): peers learn of it then.
	nodetest.WaitFor(t, 5*time.Second, "the serial bumped after the record", func() bool { return testnode.SerialOf(t, a.St) > before })
	for _, n := range []*testnode.Node{a, b} {
		nodetest.WaitFor(t, 5*time.Second, n.Cfg.Node.Name+" drops the dead upstream", func() bool { return len(testnode.UpstreamsOf(t, n, host)) == 0 })
	}
	t.Logf("dead instance out of the record after %s, out of both documents after %s", recorded.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	resp, body := a.Get("/v1/health/instances/shop", "")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health of the dead instance: %d %s, want 503", resp.StatusCode, body)
	}
	s := instanceStatusOf(t, a, "shop")
	if !s.Declared || s.Ready || s.Probe == nil || s.Probe.Up || s.Probe.LastError == "" || s.Probe.Kind != "tcp" {
		t.Errorf("status of the dead instance: %+v %+v, want declared, not ready, probe down with an error", s, s.Probe)
	}
	if !testnode.MetricLine(t, a, `scafo_instance_probe_transitions_total{to="down"} 1`) {
		_, m := a.Get("/metrics", "")
		t.Errorf("no down transition counted:\n%s", testnode.GrepLines(string(m), "scafo_instance_probe"))
	}

	inst.Open()
	for _, n := range []*testnode.Node{a, b} {
		nodetest.WaitFor(t, 5*time.Second, n.Cfg.Node.Name+" routes the instance again", func() bool {
			return len(testnode.UpstreamsOf(t, n, host)) == 1
		})
	}
	if !testnode.RecordReady(t, a.St, "vps-a", "shop") {
		t.Error("record not ready after the instance came back")
	}
}

// A declared-not-ready instance stays out whatever its probe says, and a probe never
// publishes an instance its owner did not declare ready.
func TestProbeNeverPublishesAnInstanceDeclaredNotReady(t *testing.T) {
	t.Parallel()
	a := testnode.Start(t, testnode.ProbeConfig(t, "vps-a", t.TempDir()))
	a.WaitReady()
	inst := testinst.StartTCP(t)
	a.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":false}`, inst.Port))
	nodetest.WaitFor(t, 5*time.Second, "probes of the instance", func() bool {
		s := instanceStatusOf(t, a, "shop")
		return s.Probe != nil && s.Probe.Probes >= 3
	})
	if s := instanceStatusOf(t, a, "shop"); s.Ready || !s.Probe.Up {
		t.Errorf("status %+v %+v: want probe up, published not ready", s, s.Probe)
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
	a := testnode.Start(t, testnode.ProbeConfig(t, "vps-a", t.TempDir()))
	a.WaitReady()
	app := testinst.StartHealth(t, "/healthz", http.StatusOK, "")
	a.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"],"health":{"path":"/healthz"}}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, app.Port))
	nodetest.WaitFor(t, 5*time.Second, "HTTP probes of the health path", func() bool {
		s := instanceStatusOf(t, a, "shop")
		return s.Probe.Kind == "http" && s.Probe.Probes >= 2 && app.Hits.Load() >= 2
	})
	if h := app.Header.Load(); h == nil || h.Get("Authorization") != "" || h.Get("User-Agent") != "scafo-node-probe" {
		t.Errorf("probe request headers %v: want no Authorization, User-Agent scafo-node-probe", h)
	}
	app.Code.Store(http.StatusInternalServerError)
	nodetest.WaitFor(t, 5*time.Second, "500 marks it down", func() bool { return !testnode.RecordReady(t, a.St, "vps-a", "shop") })
	if s := instanceStatusOf(t, a, "shop"); !strings.Contains(s.Probe.LastError, "500") {
		t.Errorf("lastError %q: want the status named", s.Probe.LastError)
	}
	app.Code.Store(http.StatusOK)
	nodetest.WaitFor(t, 5*time.Second, "200 marks it up", func() bool { return testnode.RecordReady(t, a.St, "vps-a", "shop") })

	// A redirect to another listener: up (3xx), and the target never hears of it.
	elsewhere := testinst.StartHealth(t, "/healthz", http.StatusOK, "")
	redir := testinst.StartHealth(t, "/healthz", 0, fmt.Sprintf("http://127.0.0.1:%d/healthz", elsewhere.Port))
	a.Must(201, "PUT", "/v1/apps/hop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"],"health":{"path":"/healthz"}}`)
	a.Must(200, "PUT", "/v1/node/instances/hop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, redir.Port))
	nodetest.WaitFor(t, 5*time.Second, "probes of the redirecting instance", func() bool {
		s := instanceStatusOf(t, a, "hop")
		return s.Probe.Kind == "http" && s.Probe.Probes >= 4
	})
	if s := instanceStatusOf(t, a, "hop"); !s.Ready {
		t.Errorf("a 302 health answer: %+v %+v, want up", s, s.Probe)
	}
	if n := elsewhere.Hits.Load(); n != 0 {
		t.Errorf("the redirect's target got %d probe requests, want 0 (redirects are never followed)", n)
	}
}

// The anonymous health endpoint answers from the prober and never dials: a burst of
// requests costs the instance nothing beyond the prober's own connections.
func TestInstanceHealthEndpointDoesNotDialPerRequest(t *testing.T) {
	t.Parallel()
	cfg := testnode.ProbeConfig(t, "vps-a", t.TempDir())
	cfg.Probe.Interval = ptypes.Duration(time.Second) // few probes during the burst
	cfg.Probe.Timeout = 0
	a := testnode.Start(t, cfg)
	a.WaitReady()
	inst := testinst.StartTCP(t)
	a.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, inst.Port))
	nodetest.WaitFor(t, 5*time.Second, "a first probe", func() bool { return inst.Accepts.Load() >= 1 })
	start := inst.Accepts.Load()
	t0 := time.Now()
	const burst = 200
	for range burst {
		if resp, b := a.Get("/v1/health/instances/shop", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("health: %d %s", resp.StatusCode, b)
		}
	}
	elapsed := time.Since(t0)
	got := inst.Accepts.Load() - start
	// The prober connects once a second; allow one extra for a round at the edge.
	if limit := int64(elapsed/time.Second) + 2; got > limit {
		t.Errorf("%d health requests in %s made %d connections to the instance, want at most %d (the prober's own)", burst, elapsed.Round(time.Millisecond), got, limit)
	}
}

// Tenant-controlled ports: an application token can point its instance only at a port
// of the allocation range that no other application holds (409 on another tenant's,
// 403 on the node API's); the admin can point one at the API's port, and the prober
// then holds it down without dialling: a public hostname must never reach the node API
// around the apex's denied paths.
func TestProbeNeverVouchesForAnInstanceOnTheAPIPortOrAnotherTenantsPort(t *testing.T) {
	t.Parallel()
	a := testnode.Start(t, testnode.ProbeConfig(t, "vps-a", t.TempDir()))
	a.WaitReady()
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
	_, evilTok := testnode.IssueToken(t, a, "evil", "evil", `"instance"`)
	a.Must(409, "PUT", "/v1/node/instances/evil", evilTok, fmt.Sprintf(`{"port":%d,"ready":true}`, bank.Port))
	a.Must(403, "PUT", "/v1/node/instances/evil", evilTok, fmt.Sprintf(`{"port":%d,"ready":true}`, a.Cfg.Node.APIPort))

	// The admin points evil at the node API's port (which accepts connections).
	a.Must(200, "PUT", "/v1/node/instances/evil", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, a.Cfg.Node.APIPort))
	nodetest.WaitFor(t, 5*time.Second, "the record written", func() bool {
		_, b := a.Get("/v1/status", testnode.AdminToken)
		return strings.Contains(string(b), `"app":"evil"`)
	})
	// Several probe rounds (bank, on its own port, is probed in each): evil never is.
	bankProbes := instanceStatusOf(t, a, "bank").Probe.Probes
	nodetest.WaitFor(t, 10*time.Second, "three more probe rounds", func() bool {
		return instanceStatusOf(t, a, "bank").Probe.Probes >= bankProbes+3
	})
	if testnode.RecordReady(t, a.St, "vps-a", "evil") {
		t.Error("an instance on the node API's port is published ready")
	}
	if u := testnode.UpstreamsOf(t, a, "evil.apps.example.com"); len(u) != 0 {
		t.Errorf("evil routes to %v: the node API behind a tenant's hostname", u)
	}
	s := instanceStatusOf(t, a, "evil")
	if s.Probe == nil || s.Probe.Up || !strings.Contains(s.Probe.Refused, "API port") || s.Probe.Probes != 0 {
		t.Errorf("status %+v %+v: want refused (API port), never probed", s, s.Probe)
	}
	if resp, b := a.Get("/v1/health/instances/evil", ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health of an instance on the API port: %d %s, want 503", resp.StatusCode, b)
	}
	if !testnode.MetricLine(t, a, "scafo_instance_probe_down 1") {
		_, m := a.Get("/metrics", "")
		t.Errorf("the refused instance is not counted down:\n%s", testnode.GrepLines(string(m), "scafo_instance_probe_down"))
	}
	nodetest.WaitFor(t, 5*time.Second, "bank published ready", func() bool { return testnode.RecordReady(t, a.St, "vps-a", "bank") })
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
