package testnode

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
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
)

// Stepped is a whole node without a listener or a loop: built over a store, driven by
// its steps (node.Steps, what Run schedules) on a clock the test advances (Now), its
// API served in process (Handler, httptest). A test acts between two steps, and nothing
// it checks waits on wall time but a probe round's dials. What needs a socket, a drain
// or a stop uses Start.
type Stepped struct {
	t     testing.TB
	Srv   *node.Server
	St    store.Store
	Cfg   *node.Config
	Logs  *proc.Buffer
	Steps node.Steps
	Now   time.Time // the virtual clock: each pass and probe round moves it by its interval
	Host  string    // the requests' host:port ("": node.address and node.apiPort)
	h     http.Handler
}

// NewStepped builds a node over st (nil: a dir store at cfg.Store.Dir.Path); no step
// has run. A node.apiPort of 0 becomes 7400, what its record publishes: nothing listens.
func NewStepped(t testing.TB, cfg *node.Config, st store.Store) *Stepped {
	t.Helper()
	if st == nil {
		st = OpenDir(t, cfg.Store.Dir.Path)
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
	return &Stepped{t: t, Srv: srv, St: st, Cfg: cfg, Logs: logs, Steps: srv.Steps(), h: srv.Handler(), Now: time.Now()}
}

// Pass runs one reconcile pass a reconcile interval after the last and hands served.json
// what it published, as Run's saver does.
func (n *Stepped) Pass() error {
	n.Now = n.Now.Add(time.Duration(n.Cfg.Reconcile.Interval))
	err := n.Steps.Reconcile(context.Background(), n.Now, false)
	n.Steps.SaveServed()
	return err
}

// MustPass is a Pass that must succeed.
func (n *Stepped) MustPass() {
	n.t.Helper()
	if err := n.Pass(); err != nil {
		n.t.Fatalf("%s: pass: %v", n.Cfg.Node.Name, err)
	}
}

// Beat writes this node's record (the heartbeat) at Now.
func (n *Stepped) Beat() { n.Steps.Heartbeat(context.Background(), n.Now) }

// Tick is what Run does first and at each heartbeat: the record, then a pass, which
// must succeed.
func (n *Stepped) Tick() {
	n.t.Helper()
	n.Beat()
	n.MustPass()
}

// Rounds runs k probe rounds a probe interval apart, each once the last one's probes
// have answered (every declared instance counts one more probe, or is refused), then a
// Tick: the record announces what the probes decided. A round's probes dial in the
// background: Rounds waits for their results in the status, not for time.
func (n *Stepped) Rounds(k int) {
	n.t.Helper()
	for range k {
		before := n.Status().Instances
		n.Now = n.Now.Add(time.Duration(n.Cfg.Probe.Interval))
		n.Steps.ProbeRound(context.Background(), n.Now)
		nodetest.WaitFor(n.t, 10*time.Second, "the round's probes", func() bool {
			for _, b := range before {
				if a := n.Instance(b.App); b.Declared && (a.Probe == nil || a.Probe.Refused == "" && (b.Probe != nil && a.Probe.Probes == b.Probe.Probes)) {
					return false
				}
			}
			return true
		})
	}
	n.Tick()
}

// ServeRequest serves req through the node's handler.
func (n *Stepped) ServeRequest(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	n.h.ServeHTTP(rec, req)
	return rec
}

// Do serves one request with the given token, body and headers (name, value, …).
func (n *Stepped) Do(method, path, token, body string, hdr ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	host := n.Host
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
	return n.ServeRequest(req)
}

// Get is a GET through the handler.
func (n *Stepped) Get(path, token string, hdr ...string) *httptest.ResponseRecorder {
	return n.Do(http.MethodGet, path, token, "", hdr...)
}

// Must is Do that fails the test unless the answer's status is code.
func (n *Stepped) Must(code int, method, path, token, body string) []byte {
	n.t.Helper()
	rec := n.Do(method, path, token, body)
	if rec.Code != code {
		n.t.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, code)
	}
	return rec.Body.Bytes()
}

// Routes is the routing document served now (a 200 required).
func (n *Stepped) Routes() []byte {
	n.t.Helper()
	return n.Must(http.StatusOK, http.MethodGet, "/v1/ingress/routes", IngressToken, "")
}

// RoutesDoc is the routing document served now, decoded.
func (n *Stepped) RoutesDoc() map[string]any {
	n.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(n.Routes(), &m); err != nil {
		n.t.Fatal(err)
	}
	return m
}

// Hosts are the hosts the routing document routes, joined by commas.
func (n *Stepped) Hosts() string {
	n.t.Helper()
	return strings.Join(HostsOf(n.RoutesDoc()), ",")
}

// Status is /v1/status, decoded (a 200 required).
func (n *Stepped) Status() api.Status {
	n.t.Helper()
	var s api.Status
	if err := json.Unmarshal(n.Must(http.StatusOK, http.MethodGet, "/v1/status", AdminToken, ""), &s); err != nil {
		n.t.Fatal(err)
	}
	return s
}

// Instance is app's instance in the status.
func (n *Stepped) Instance(app string) api.Instance {
	n.t.Helper()
	for _, i := range n.Status().Instances {
		if i.App == app {
			return i
		}
	}
	n.t.Fatalf("status lists no instance of %s", app)
	return api.Instance{}
}

// Metric reports whether /metrics holds line, whole.
func (n *Stepped) Metric(line string) bool {
	n.t.Helper()
	return strings.Contains(string(n.Must(http.StatusOK, http.MethodGet, "/metrics", "", "")), "\n"+line+"\n")
}

// Token mints an application token of account for app with roles (a JSON list's
// items: `"publish"`).
func (n *Stepped) Token(account, app, roles string) string {
	n.t.Helper()
	var it struct{ Token string }
	if err := json.Unmarshal(n.Must(http.StatusCreated, http.MethodPost, "/v1/tokens", AdminToken,
		`{"account":`+strconv.Quote(account)+`,"app":`+strconv.Quote(app)+`,"roles":[`+roles+`]}`), &it); err != nil {
		n.t.Fatal(err)
	}
	return it.Token
}
