// Package testnode runs whole nodes for tests: a configuration for loopback, a node over a
// directory store (or the store a test gives) on a listener (Start), or without one,
// driven by its steps on the test's clock (Stepped), and the requests tests make of it.
// The root package's tests and the subsystems' tests that need a whole node (package
// X_test, which may import the node) use it; the node-free half of the harness
// (waiting, logs, fleet objects) is internal/nodetest, which the subsystems' own
// internal tests import too.
package testnode

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/listengate"
	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// The tokens every test node holds.
const (
	IngressToken = "ingress-secret-0123456789"
	AdminToken   = "admin-secret-0123456789"
	// ReadOnlyToken is the nodes' read-only token (readonly.token).
	ReadOnlyToken = "readonly-secret-0123456789"
)

// Node is a node running on loopback over a dir store (or the store a test gave), until
// Stop or the test's end.
type Node struct {
	*nodetest.Node
	t    testing.TB
	Srv  *node.Server
	St   store.Store
	Cfg  *node.Config
	Logs *proc.Buffer
}

// Config is a node's configuration for a test: name on its own loopback address (Address),
// the test tokens, apps.example.com, a 40 ms reconcile without heartbeats or probes, the
// store in storeDir.
func Config(t testing.TB, name, storeDir string) *node.Config {
	t.Helper()
	cfg := node.NewConfig()
	cfg.StateDir = t.TempDir()
	cfg.Node.Name = name
	cfg.Node.Address = Address(name) // two live nodes never share one (node/self/address.go)
	cfg.Ingress.Token = IngressToken
	cfg.Admin.Token = AdminToken
	cfg.Readonly.Token = ReadOnlyToken
	cfg.Platform.Domains = []string{"apps.example.com"}
	cfg.Listen = "127.0.0.1:0"
	cfg.Store.Dir.Path = storeDir
	cfg.Reconcile.Interval = ptypes.Duration(40 * time.Millisecond)
	cfg.Reconcile.Heartbeat = ptypes.Duration(time.Hour)
	cfg.Reconcile.NodeTTL = ptypes.Duration(4 * time.Hour)
	cfg.Ports.Quarantine = ptypes.Duration(10 * time.Minute)
	// Most tests declare instances on ports nothing listens on: they test the store and
	// the document, not the probes, which the probe tests turn on.
	cfg.Probe.Interval = 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Start builds and runs a node over a directory store at cfg.Store.Dir.Path; it is
// stopped at cleanup.
func Start(t testing.TB, cfg *node.Config) *Node {
	t.Helper()
	st, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	return StartWithStore(t, cfg, st)
}

// StartWithStore runs a node over st on a fresh loopback listener; before runs on the
// built server before Run.
func StartWithStore(t testing.TB, cfg *node.Config, st store.Store, before ...func(*node.Server)) *Node {
	t.Helper()
	ln, err := listengate.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return StartOn(t, cfg, st, ln, before...)
}

// StartOn runs a node on a listener the test opened (its port is known before the node
// starts: Pebble validates on it).
func StartOn(t testing.TB, cfg *node.Config, st store.Store, ln net.Listener, before ...func(*node.Server)) *Node {
	t.Helper()
	log, logs := nodetest.Logger()
	if cfg.Node.APIPort == 0 { // the port the node announces: the listener's
		_, p, _ := net.SplitHostPort(ln.Addr().String())
		cfg.Node.APIPort, _ = strconv.Atoi(p)
	}
	srv, err := node.NewWithStore(cfg, log, st, cfg.Ingress.Token, cfg.Admin.Token)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(srv) // before Run: nothing reads the server yet
	}
	return &Node{Node: nodetest.Start(t, srv, ln), t: t, Srv: srv, St: st, Cfg: cfg, Logs: logs}
}

// Get sends a GET with the given token and headers (name, value, …).
func (n *Node) Get(path, token string, hdr ...string) (*http.Response, []byte) {
	n.t.Helper()
	return nodetest.Get(n.t, n.URL+path, token, hdr...)
}

// Do sends a request with the given token, body and headers; the body is read whole.
func (n *Node) Do(method, path, token string, body string, hdr ...string) (*http.Response, []byte) {
	n.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, n.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// Must is Do that fails the test unless the answer's status is code.
func (n *Node) Must(code int, method, path, token, body string, hdr ...string) []byte {
	n.t.Helper()
	resp, b := n.Do(method, path, token, body, hdr...)
	if resp.StatusCode != code {
		n.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, code)
	}
	return b
}

// WaitReady waits for readyz and for this node's own record to be in the document (the
// API apex lists it), so the revision no longer moves on its own.
func (n *Node) WaitReady() {
	n.t.Helper()
	nodetest.WaitFor(n.t, 5*time.Second, "readyz 200", func() bool {
		resp, _ := n.Get("/v1/readyz", "")
		return resp.StatusCode == http.StatusOK
	})
	nodetest.WaitFor(n.t, 5*time.Second, "own record published", func() bool {
		_, b := n.Get("/v1/ingress/routes", IngressToken)
		return strings.Contains(string(b), `"node":"`+n.Cfg.Node.Name+`"`)
	})
}

// SeedFleet writes apps (account acme) running on peer node "vps-b".
func SeedFleet(t testing.TB, st store.Store, apps ...string) {
	t.Helper()
	inst := map[string]fleet.Instance{}
	for i, a := range apps {
		nodetest.Put(t, st, "apps/"+a+".json", fleet.App{Name: a, Account: "acme", Placement: []string{"vps-b"}})
		inst[a] = fleet.Instance{Port: 24000 + i, Ready: true}
	}
	nodetest.Put(t, st, "nodes/vps-b.json", fleet.NodeRecord{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400,
		Instances: inst, Seen: time.Now().UTC()})
}

// RoutesDoc is n's routing document, decoded.
func RoutesDoc(t testing.TB, n *Node) map[string]any {
	t.Helper()
	resp, b := n.Get("/v1/ingress/routes", IngressToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("routes: %d %s", resp.StatusCode, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// WaitSeeded waits until n's document holds what SeedFleet(…, "shop") wrote, settled:
// shop routed with its upstream on vps-b, and both vps-a (this node) and vps-b in the
// api section. A document read earlier can still change for the order a pass read the
// objects in (this node's own record, vps-b's), which a test comparing documents
// before and after must not mistake for its own effect.
func WaitSeeded(t testing.TB, n *Node) {
	t.Helper()
	nodetest.WaitFor(t, 5*time.Second, "shop routed, settled", func() bool {
		d := RoutesDoc(t, n)
		api, _ := d["api"].(map[string]any)
		ups, _ := api["upstreams"].([]any)
		rs, _ := d["routes"].([]any)
		if len(rs) != 1 || len(ups) != 2 {
			return false
		}
		r, _ := rs[0].(map[string]any)
		rup, _ := r["upstreams"].([]any)
		return r["host"] == "shop.apps.example.com" && len(rup) == 1
	})
}

// HostsOf lists a decoded document's route hosts, in its order.
func HostsOf(doc map[string]any) []string {
	var out []string
	rs, _ := doc["routes"].([]any)
	for _, r := range rs {
		out = append(out, r.(map[string]any)["host"].(string))
	}
	return out
}

// IssueToken mints an application token through the admin API; roles is the JSON
// array's inside (`"publish"`).
func IssueToken(t testing.TB, n *Node, account, app, roles string) (id, tok string) {
	t.Helper()
	var it struct{ ID, Token string }
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", AdminToken,
		`{"account":`+strconv.Quote(account)+`,"app":`+strconv.Quote(app)+`,"roles":[`+roles+`]}`), &it)
	return it.ID, it.Token
}
