package scafo

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// freePort returns a loopback port nothing listens on now (from :0).
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// runningCaddy is Caddy, in process, on deploy/caddy/Caddyfile as shipped.
type runningCaddy struct {
	httpAddr, httpsAddr string
	dataDir             string
}

// startShippedCaddy adapts and loads the shipped Caddyfile with the environment an
// operator would set, on free ports, against the given node endpoints.
func startShippedCaddy(t *testing.T, endpoints string) *runningCaddy {
	t.Helper()
	return startShippedCaddyOn(t, endpoints, freePort(t), t.TempDir(), nil)
}

// startShippedCaddyOn is startShippedCaddy on a given HTTP port, with its data and
// config directories under home (a restart reuses it), and a test's change to the
// adapted JSON (nil for none). A running Caddy is replaced.
func startShippedCaddyOn(t *testing.T, endpoints string, httpPort int, home string, tweak func(map[string]any)) *runningCaddy {
	t.Helper()
	httpsPort := freePort(t)
	t.Setenv("CADDY_HTTP_PORT", strconv.Itoa(httpPort))
	t.Setenv("CADDY_HTTPS_PORT", strconv.Itoa(httpsPort))
	t.Setenv("CADDY_ADMIN", "off")
	t.Setenv("ACME_CA", "https://127.0.0.1:1/directory") // nothing here asks for a certificate
	t.Setenv("SCAFO_ENDPOINTS", endpoints)
	t.Setenv("SCAFO_INGRESS_TOKEN", testIngressToken)
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	body, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(body, map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatalf("adapting the shipped Caddyfile: %v", err)
	}
	for _, w := range warnings {
		t.Logf("Caddyfile warning: %s", w.String())
	}
	if err := caddy.Load(noAutosave(t, cfg, tweak), true); err != nil {
		t.Fatalf("loading the shipped Caddyfile: %v", err)
	}
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("stopping Caddy: %v", err)
		}
	})
	return &runningCaddy{
		httpAddr:  "127.0.0.1:" + strconv.Itoa(httpPort),
		httpsAddr: "127.0.0.1:" + strconv.Itoa(httpsPort),
		dataDir:   filepath.Join(home, "data", "caddy"),
	}
}

// activePoller is the running configuration's document poller.
func activePoller(t *testing.T) *Poller {
	t.Helper()
	v, err := caddy.ActiveContext().App("scafo")
	if err != nil {
		t.Fatal(err)
	}
	return v.(*App).Poller()
}

// waitTable waits, on the poller's change events, until its table satisfies ok.
func waitTable(t *testing.T, p *Poller, what string, ok func(*Table) bool) *Table {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		ch := p.Changed()
		if tab := p.Table(); tab != nil && ok(tab) {
			return tab
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("Caddy's document never had %s (held: %+v)", what, p.Table())
		}
	}
}

// A fleet for the routing tests: shop on vps-b then vps-c (two upstreams), tito's
// legacy app on ti.to with paulca flipped to go.tito.io, a custom wildcard, and an
// application with nothing ready.
type routingFleet struct {
	node                         *testNode
	fs                           fleetStore
	shopB, shopC, legacy, goTito *upstream
	doc                          *routing.Document
}

func startRoutingFleet(t *testing.T) *routingFleet {
	t.Helper()
	root := t.TempDir()
	n := startNode(t, "vps-a", root)
	f := &routingFleet{node: n, fs: fleetStore{t, n.st},
		shopB: startUpstream(t, "shop-b"), shopC: startUpstream(t, "shop-c"),
		legacy: startUpstream(t, "tito-legacy"), goTito: startUpstream(t, "tito-go")}
	f.fs.app("shop", "acme", "vps-b", "vps-c")
	f.fs.app("tito-classic", "tito", "vps-b")
	f.fs.app("tito-go", "tito", "vps-b")
	f.fs.app("closed", "acme", "vps-b")
	f.fs.peer("vps-b", map[string]fleet.Instance{
		"shop": f.shopB.instance(), "tito-classic": f.legacy.instance(), "tito-go": f.goTito.instance(),
		"closed": {Port: freePort(t), Ready: false},
	})
	f.fs.peer("vps-c", map[string]fleet.Instance{"shop": f.shopC.instance()})
	f.fs.claim("go.tito.io", "tito", "tito-go", nil)
	f.fs.claim("ti.to", "tito", "tito-classic", map[string]string{"paulca": "go.tito.io"})
	f.fs.claim("*.shop.example.org", "acme", "shop", nil)
	apiAddr := strings.TrimPrefix(n.url, "http://")
	f.doc = n.waitDocument("the test fleet, settled", func(d *routing.Document) bool {
		ti, shop := routeOf(d, "ti.to"), routeOf(d, "shop.apps.example.com")
		// The node's own API upstream at its real address: the last thing to settle
		// (the node writes its record with the port it listens on once it runs).
		return ti != nil && ti.Paths["paulca"] == "go.tito.io" && shop != nil && len(shop.Upstreams) == 2 &&
			routeOf(d, "*.shop.example.org") != nil && routeOf(d, "closed.apps.example.com") != nil &&
			d.API != nil && len(d.API.Upstreams) > 0 && d.API.Upstreams[0].Node == "vps-a" && d.API.Upstreams[0].Address == apiAddr
	})
	return f
}

// The shipped Caddyfile routes by the document exactly as DESIGN §2 and §14 say, through
// a real Caddy to real upstreams: exact host, one-label wildcard once, 404 for what the
// document does not name, 503 (not another route) for a host with nothing ready, path
// maps in raw and normalised spellings with the original bytes sent upstream, the
// refused escapes answered 400, and the API apex without its denied paths. The rows are
// what only a real Caddy shows (its answer to each kind of lookup, the spellings it must
// pass upstream verbatim); the lookup's rules case by case are
// TestLookupFollowsTheDocumentsRules' and TestRefusedEscapes'.
func TestShippedCaddyfileRoutesByTheDocument(t *testing.T) {
	f := startRoutingFleet(t)
	c := startShippedCaddy(t, f.node.url)
	waitTable(t, activePoller(t), "the node's revision", func(tab *Table) bool { return tab.Doc.Revision == f.doc.Revision })

	cases := []struct {
		host, target string
		status       int
		upstream     string
	}{
		{"shop.apps.example.com", "/", 200, "shop-b"},
		{"SHOP.apps.example.com:80", "/x", 200, "shop-b"},
		{"a.shop.example.org", "/", 200, "shop-b"},
		{"unknown.apps.example.com", "/", 404, ""},
		{"closed.apps.example.com", "/", 503, ""},
		{"ti.to", "/", 200, "tito-legacy"},
		{"ti.to", "/paulca", 200, "tito-go"},
		{"ti.to", "/paulca/x?y=1", 200, "tito-go"},
		{"ti.to", "/%70aulca/x", 200, "tito-go"},
		{"ti.to", "//paulca/x", 200, "tito-go"},
		{"ti.to", "/bob/../paulca/x", 200, "tito-go"},
		{"ti.to", "/%2E%2E/paulca", 200, "tito-go"},
		{"ti.to", "/paulca/../x", 200, "tito-go"},
		{"ti.to", "/paulca%2Fx", 400, ""},
		{"unknown.apps.example.com", "/a%2Fb", 400, ""},
		{"go.tito.io", "/", 200, "tito-go"},
		{"apps.example.com", "/v1/storage/keys/x", 404, ""},
		{"apps.example.com", "/v1/%69ngress/traefik", 404, ""},
	}
	for _, tc := range cases {
		status, up := rawGet(t, c.httpAddr, tc.host, tc.target)
		if status != tc.status || up != tc.upstream {
			t.Errorf("Host %s, GET %s: %d from %q, want %d from %q", tc.host, tc.target, status, up, tc.status, tc.upstream)
		}
	}
	// No prefix stripping, no cleaning: the upstream receives the request target's bytes.
	got := f.goTito.received()
	for _, want := range []string{"/paulca", "/paulca/x?y=1", "/%70aulca/x", "//paulca/x", "/bob/../paulca/x", "/%2E%2E/paulca", "/paulca/../x"} {
		if !slices.Contains(got, want) {
			t.Errorf("tito-go never received %q verbatim; it received %q", want, got)
		}
	}
	for _, target := range f.legacy.received() {
		if RawFirstSegment(target) == "paulca" || NormalisedFirstSegment(target) == "paulca" {
			t.Errorf("the legacy app received %q, a flipped prefix", target)
		}
	}
	// The API apex reaches the node API (vps-a first, the only node with a listener).
	req, _ := http.NewRequest(http.MethodGet, "http://"+c.httpAddr+"/v1/healthz", nil)
	req.Host = "apps.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("API apex /v1/healthz: %d, want 200 from the node", resp.StatusCode)
	}

	// A flip (bob's prefix to go.tito.io) is routed once Caddy's table has it.
	if status, up := rawGet(t, c.httpAddr, "ti.to", "/bob/x"); status != 200 || up != "tito-legacy" {
		t.Fatalf("before the flip: /bob/x %d from %q", status, up)
	}
	flipped := time.Now()
	f.fs.claim("ti.to", "tito", "tito-classic", map[string]string{"paulca": "go.tito.io", "bob": "go.tito.io"})
	waitTable(t, activePoller(t), "bob flipped", func(tab *Table) bool { return tab.Lookup("ti.to", "/bob").Target == "go.tito.io" })
	t.Logf("flip latency through Caddy (store write → table): %s", time.Since(flipped))
	for _, target := range []string{"/bob", "/bob/x", "/%62ob", "//bob/"} {
		if status, up := rawGet(t, c.httpAddr, "ti.to", target); status != 200 || up != "tito-go" {
			t.Errorf("after the flip: %s %d from %q, want tito-go", target, status, up)
		}
	}
}

// Upstream order is failover order (lb_policy first): while the first upstream answers,
// it serves every request; once it refuses connections, every request is served by the
// next one, none fails.
func TestShippedCaddyfileFailsOverInUpstreamOrder(t *testing.T) {
	f := startRoutingFleet(t)
	c := startShippedCaddy(t, f.node.url)
	waitTable(t, activePoller(t), "the node's revision", func(tab *Table) bool { return tab.Doc.Revision == f.doc.Revision })
	for i := range 5 {
		if status, up := rawGet(t, c.httpAddr, "shop.apps.example.com", "/"+strconv.Itoa(i)); status != 200 || up != "shop-b" {
			t.Fatalf("request %d with both up: %d from %q, want 200 from shop-b", i, status, up)
		}
	}
	if f.shopC.hits.Load() != 0 {
		t.Fatalf("the second upstream served %d requests while the first was up", f.shopC.hits.Load())
	}
	f.shopB.srv.Close() // the primary dies: its port refuses connections
	for i := range 10 {
		if status, up := rawGet(t, c.httpAddr, "shop.apps.example.com", "/after/"+strconv.Itoa(i)); status != 200 || up != "shop-c" {
			t.Fatalf("request %d after the primary died: %d from %q, want 200 from shop-c", i, status, up)
		}
	}
}

// noAutosave turns off Caddy's config autosave (its path is fixed when the caddy package
// initialises, outside the test's directories); nothing else changes.
func noAutosave(t testing.TB, cfg []byte, tweak func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(cfg, &m); err != nil {
		t.Fatal(err)
	}
	admin, _ := m["admin"].(map[string]any)
	if admin == nil {
		admin = map[string]any{}
	}
	admin["config"] = map[string]any{"persist": false}
	m["admin"] = admin
	if tweak != nil {
		tweak(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A write made with ?wait=applied answers 200 only once this Caddy routes by it: the
// poller reports what it applied (X-Scafo-Applied-Serial), and it applies a document
// the moment it swaps it in, so the flip is live when the write returns.
func TestAWriteWaitingForAppliedIsLiveInCaddyWhenItAnswers(t *testing.T) {
	f := startRoutingFleet(t)
	c := startShippedCaddy(t, f.node.url)
	p := activePoller(t)
	waitTable(t, p, "the node's revision", func(tab *Table) bool { return tab.Doc.Revision == f.doc.Revision })
	body := strings.NewReader(`{"paths": {"paulca": "go.tito.io", "bob": "go.tito.io"}}`)
	req, _ := http.NewRequest(http.MethodPut, f.node.url+"/v1/apps/tito-classic/domains/ti.to/paths?wait=applied&timeout=20s", body)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ans struct {
		Applied   bool `json:"applied"`
		Ingresses int  `json:"ingresses"`
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &ans); err != nil || resp.StatusCode != 200 || !ans.Applied || ans.Ingresses != 1 {
		t.Fatalf("PUT paths ?wait=applied: %d %s, want 200 applied by the one ingress (this Caddy)", resp.StatusCode, b)
	}
	// No wait here: applied means routed.
	if got := p.Table().Lookup("ti.to", "/bob"); got.Target != "go.tito.io" {
		t.Fatalf("the write answered applied, but Caddy routes /bob by %+v", got)
	}
	if status, up := rawGet(t, c.httpAddr, "ti.to", "/bob/now"); status != 200 || up != "tito-go" {
		t.Fatalf("right after the applied write: /bob/now %d from %q, want tito-go", status, up)
	}
}
