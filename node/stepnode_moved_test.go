package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store"
)

// stepNode is a whole node without a listener or a loop: built over a store, driven by
// its steps (node.Steps, what Run schedules) on a clock the test advances, its API served
// in process (Handler, httptest). A test acts between two passes, and nothing it checks
// waits on wall time. What needs a socket, a drain or a stop uses testnode.Start.
type stepNode struct {
	t     testing.TB
	Srv   *node.Server
	St    store.Store
	Cfg   *node.Config
	Logs  *proc.Buffer
	steps node.Steps
	h     http.Handler
	now   time.Time
	host  string // the requests' host:port ("": node.address and node.apiPort)
}

// newStepNode builds a node over st (nil: a dir store at cfg.Store.Dir.Path); no step
// has run.
func newStepNode(t testing.TB, cfg *node.Config, st store.Store) *stepNode {
	t.Helper()
	if st == nil {
		st = openDir(t, cfg.Store.Dir.Path)
	}
	if cfg.Node.APIPort == 0 {
		cfg.Node.APIPort = 7400
	}
	log, logs := nodetest.Logger()
	srv, err := node.NewWithStore(cfg, log, st, cfg.Ingress.Token, cfg.Admin.Token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return &stepNode{t: t, Srv: srv, St: st, Cfg: cfg, Logs: logs, steps: srv.Steps(), h: srv.Handler(), now: time.Now()}
}

// pass runs one reconcile pass a reconcile interval after the last and hands served.json
// what it published, as Run's saver does.
func (n *stepNode) pass() error {
	n.now = n.now.Add(time.Duration(n.Cfg.Reconcile.Interval))
	err := n.steps.Reconcile(context.Background(), n.now, false)
	n.steps.SaveServed()
	return err
}

// mustPass is a pass that must succeed.
func (n *stepNode) mustPass() {
	n.t.Helper()
	if err := n.pass(); err != nil {
		n.t.Fatalf("pass: %v", err)
	}
}

// beat writes this node's record (the heartbeat).
func (n *stepNode) beat() { n.steps.Heartbeat(context.Background(), n.now) }

// start is what Run does first: the heartbeat, then a pass, which must succeed.
func (n *stepNode) start() {
	n.t.Helper()
	n.beat()
	n.mustPass()
}

// do serves one request through the node's handler.
func (n *stepNode) do(method, path, token, body string, hdr ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	host := n.host
	if host == "" {
		host = n.Cfg.Node.Address + ":" + strconv.Itoa(n.Cfg.Node.APIPort)
	}
	req := httptest.NewRequest(method, "http://"+host+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	n.h.ServeHTTP(rec, req)
	return rec
}

// get is a GET through the handler.
func (n *stepNode) get(path, token string, hdr ...string) *httptest.ResponseRecorder {
	return n.do(http.MethodGet, path, token, "", hdr...)
}

// must is do that fails the test unless the answer's status is code.
func (n *stepNode) must(code int, method, path, token, body string) []byte {
	n.t.Helper()
	rec := n.do(method, path, token, body)
	if rec.Code != code {
		n.t.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, code)
	}
	return rec.Body.Bytes()
}

// routes is the routing document served now (a 200 required).
func (n *stepNode) routes() []byte {
	n.t.Helper()
	return n.must(http.StatusOK, http.MethodGet, "/v1/ingress/routes", testIngressToken, "")
}

// hosts are the hosts the routing document routes, joined by commas.
func (n *stepNode) hosts() string {
	n.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(n.routes(), &m); err != nil {
		n.t.Fatal(err)
	}
	return strings.Join(hostsOf(m), ",")
}

// storeState is the store part of /v1/status.
func (n *stepNode) storeState() storeState {
	n.t.Helper()
	var s struct {
		Store storeState `json:"store"`
	}
	if err := json.Unmarshal(n.must(http.StatusOK, http.MethodGet, "/v1/status", testAdminToken, ""), &s); err != nil {
		n.t.Fatal(err)
	}
	return s.Store
}

// storeState is the part of /v1/status these tests read.
type storeState struct {
	Reachable        bool       `json:"reachable"`
	Error            string     `json:"error"`
	UnreachableSince *time.Time `json:"unreachableSince"`
}
