package httpapi_test

// The API in process: httpapi.New over a directory store, the real write domain, the
// real ingress book and a publisher holding one document, with fakes for what the
// reconcile loop and the node's own record would tell. Requests go through
// API.Handler() and httptest: no listener, no node, no ticker.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// The tokens of an in-process API, current and (mid-rotation) previous.
const (
	ipIngress          = "ingress-secret-0123456789"
	ipIngressPrevious  = "old-ingress-token-0001"
	ipAdmin            = "admin-secret-0123456789"
	ipAdminPrevious    = "old-admin-token-00001"
	ipReadOnly         = "readonly-secret-0123456789"
	ipReadOnlyPrevious = "old-readonly-token-01"
)

// inProcess is an API under test and what it was built over.
type inProcess struct {
	t      *testing.T
	api    *httpapi.API
	h      http.Handler
	st     store.Store
	writer *fleetwrite.Writer
	book   *ingress.Book
	pub    *publish.Publisher
	logs   *lockedWriter
}

// fakeReconciler is a reconcile loop that has passed once, knowing no application.
type fakeReconciler struct{ at time.Time }

func (f fakeReconciler) Status() reconcile.Status     { return reconcile.Status{LastPass: f.at} }
func (f fakeReconciler) KnownApps() reconcile.AppView { return nil }

// fakeSelf is a node record whose heartbeat is healthy and which announces nothing.
type fakeSelf struct{}

func (fakeSelf) Err() *string                       { return nil }
func (fakeSelf) FailingSince() time.Time            { return time.Time{} }
func (fakeSelf) Conflict(time.Time) *self.Conflict  { return nil }
func (fakeSelf) AddressReport() *self.AddressReport { return nil }
func (fakeSelf) Generation() uint64                 { return 0 }
func (fakeSelf) Await(context.Context, uint64, time.Time, func(map[string]fleet.Instance) string) (uint64, bool, string) {
	return 0, true, ""
}

// newInProcess builds the API of node vps-a, mid-rotation of its three tokens, with
// configure (may be nil) applied to its configuration first.
func newInProcess(t *testing.T, configure func(*httpapi.Config)) *inProcess {
	t.Helper()
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return newInProcessOn(t, st, configure)
}

// newInProcessOn is newInProcess over st (a store a test counts or shares between two
// APIs, as two nodes would).
func newInProcessOn(t *testing.T, st store.Store, configure func(*httpapi.Config)) *inProcess {
	t.Helper()
	logs := &lockedWriter{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	id := &store.Identity{}
	inst, err := fleetwrite.OpenRegistry(filepath.Join(t.TempDir(), "instances.json"), fleetwrite.DefaultPorts().Min, fleetwrite.DefaultPorts().Max, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pub := publish.New(render.Options{}, t.TempDir(), id.Mark)
	book := ingress.New(ingress.Options{Store: st, Log: log, Self: "vps-a", Config: ingress.Defaults(),
		Known: id.Mark, Current: func() (string, uint64) {
			if s := pub.Current(); s != nil {
				return s.Doc().Revision, id.Serial()
			}
			return "", 0
		}})
	cfg := httpapi.Config{
		NodeName: "vps-a", NodeAddress: "127.0.0.1", StateDir: t.TempDir(),
		Heartbeat: time.Hour, NodeTTL: 4 * time.Hour, PortsQuarantine: 10 * time.Minute,
		BodyTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, RejectLog: time.Minute,
		WriteRate: fleetwrite.DefaultWrites().Rate, WriteBurst: fleetwrite.DefaultWrites().Burst,
		IngressToken: ipIngress, AdminToken: ipAdmin, ReadOnlyToken: ipReadOnly,
		IngressPrevious: []string{ipIngressPrevious}, AdminPrevious: []string{ipAdminPrevious}, ReadOnlyPrevious: []string{ipReadOnlyPrevious},
		Hosts: []string{"apps.example.com"},
	}
	if configure != nil {
		configure(&cfg)
	}
	writer := fleetwrite.New(fleetwrite.Config{Node: "vps-a", PlatformDomains: []string{"apps.example.com"}, AuditRetention: 24 * time.Hour,
		Middlewares: cfg.Middlewares}, st, id, inst, log)
	a, err := httpapi.New(cfg, log, prometheus.NewRegistry(), httpapi.Deps{
		Store: st, Identity: id, Publisher: pub, Reconcile: fakeReconciler{at: time.Now()}, Self: fakeSelf{},
		Ingresses: book, Instances: inst, Writer: writer, KickHeartbeat: func() {},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	p := &inProcess{t: t, api: a, h: a.Handler(), st: st, writer: writer, book: book, pub: pub, logs: logs}
	// A first pass: the store has a serial, this node has accepted it, and its document
	// is published at it.
	if _, err := store.BumpSerial(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	o, err := id.Observe(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	id.Commit(o)
	p.publish("shop.example")
	return p
}

// publish makes a document routing hosts (each to one upstream on vps-b) the published
// one, as a reconcile pass would.
func (p *inProcess) publish(hosts ...string) {
	doc := &routing.Document{Routes: []routing.Route{}}
	for _, h := range hosts {
		doc.Routes = append(doc.Routes, routing.Route{Host: h, Application: strings.Split(h, ".")[0],
			Upstreams: []routing.Upstream{{Node: "vps-b", Address: "10.83.0.2:24000", APIPort: 7400}}})
	}
	doc.Seal()
	p.pub.Publish(doc, time.Now())
}

// do makes one request of the API (token "" sends none; hdr are name, value, …).
func (p *inProcess) do(method, path, token, body string, hdr ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, "http://127.0.0.1"+path, rd)
	r.RemoteAddr = "127.0.0.1:40000"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec
}

// must makes a request and fails the test unless it answers code.
func (p *inProcess) must(t *testing.T, code int, method, path, token, body string, hdr ...string) []byte {
	t.Helper()
	rec := p.do(method, path, token, body, hdr...)
	if rec.Code != code {
		t.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, code)
	}
	return rec.Body.Bytes()
}

// issue mints an application token of app (account's) with roles, through the write
// domain as the admin.
func (p *inProcess) issue(t *testing.T, account, app string, roles ...string) string {
	t.Helper()
	it, err := p.writer.IssueToken(context.Background(), fleetwrite.Actor{Admin: true}, account, app, roles)
	if err != nil {
		t.Fatal(err)
	}
	return it.Token
}

// lockedWriter is the API's log, written by concurrent requests and read by the test.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Do, Get and Must are the requests of testnode's Node (the shape the whole-node tests were
// written in), in process.

// Do makes one request; the body is read whole.
func (p *inProcess) Do(method, path, token, body string, hdr ...string) (*http.Response, []byte) {
	rec := p.do(method, path, token, body, hdr...)
	return rec.Result(), rec.Body.Bytes()
}

// Get makes a GET.
func (p *inProcess) Get(path, token string, hdr ...string) (*http.Response, []byte) {
	return p.Do(http.MethodGet, path, token, "", hdr...)
}

// Must makes a request and fails the test unless it answers code.
func (p *inProcess) Must(code int, method, path, token, body string, hdr ...string) []byte {
	p.t.Helper()
	return p.must(p.t, code, method, path, token, body, hdr...)
}

// IssueToken mints an application token through the admin API; roles is the JSON
// array's inside (`"publish"`).
func (p *inProcess) IssueToken(account, app, roles string) (id, tok string) {
	p.t.Helper()
	var it struct{ ID, Token string }
	json.Unmarshal(p.Must(201, "POST", "/v1/tokens", ipAdmin,
		`{"account":`+strconv.Quote(account)+`,"app":`+strconv.Quote(app)+`,"roles":[`+roles+`]}`), &it)
	return it.ID, it.Token
}

// raw sends target as the request line holds it (no client-side cleaning or escaping),
// parsed as Go's server parses a request; the test fails if it cannot be.
func (p *inProcess) raw(method, target, token, body string) (int, string) {
	p.t.Helper()
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, target)
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(req)))
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, target, err)
	}
	r.RemoteAddr = "127.0.0.1:40000"
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.String()
}

// serve serves r (a request a test built itself) from the API.
func (p *inProcess) serve(r *http.Request) *httptest.ResponseRecorder {
	if r.RemoteAddr == "" || r.RemoteAddr == "192.0.2.1:1234" {
		r.RemoteAddr = "127.0.0.1:40000"
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec
}

// statusMap is /v1/status, decoded loosely.
func (p *inProcess) statusMap() map[string]any {
	p.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(p.Must(200, "GET", "/v1/status", ipAdmin, ""), &m); err != nil {
		p.t.Fatal(err)
	}
	return m
}

// pathsURL is the path map of ti.to, the domain fleetOf claims for its first
// application.
const pathsURL = "/v1/apps/tito-classic/domains/ti.to/paths"

// fleetOf creates apps (account acme) placed on this node with ready instances, and
// claims ti.to for the first. Nothing is routed: no reconcile pass runs here.
func (p *inProcess) fleetOf(apps ...string) {
	p.t.Helper()
	for i, app := range apps {
		p.Must(201, "PUT", "/v1/apps/"+app, ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
		p.Must(200, "PUT", "/v1/node/instances/"+app, ipAdmin, fmt.Sprintf(`{"port":%d,"ready":true}`, 25000+i))
	}
	p.Must(201, "PUT", "/v1/apps/"+apps[0]+"/domains/ti.to", ipAdmin, "")
}
