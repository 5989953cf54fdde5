// Package apitest builds a node's HTTP API in process, for the tests of node/httpapi and
// node/ingress: httpapi.New over a directory store, the real write domain, the real
// ingress book and a publisher holding one document, with fakes for what the reconcile
// loop and the node's own record would tell. Requests go through API.Handler() and
// httptest: no listener, no node, no ticker.
package apitest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/internal/proc"
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
	Ingress          = "ingress-secret-0123456789"
	IngressPrevious  = "old-ingress-token-0001"
	Admin            = "admin-secret-0123456789"
	AdminPrevious    = "old-admin-token-00001"
	ReadOnly         = "readonly-secret-0123456789"
	ReadOnlyPrevious = "old-readonly-token-01"
)

// Options is what an API is built with; the zero value is node vps-a over a directory
// store of its own.
type Options struct {
	Store store.Store // nil: a directory store of its own
	// PassOnBump: every serial bump is taken at once by a pass of this node (no
	// reconcile loop runs here: a write is published as soon as it is announced).
	PassOnBump bool
	Wrap       func(store.Store) store.Store // nil: none (a store that fails some requests)
	// Record: this node's own record is self.Record over the store, its heartbeat a step
	// run at once when an instance write kicks it (else every instance write is
	// announced at once).
	Record    bool
	Hosts     []string                 // names the API answers to besides apps.example.com
	Configure func(*httpapi.Config)    // nil: none
	Write     func(*fleetwrite.Config) // nil: none (the write domain's configuration)
}

// API is an API under test and what it was built over.
type API struct {
	T        testing.TB
	Srv      *httpapi.API
	H        http.Handler
	Store    store.Store
	Identity *store.Identity
	Writer   *fleetwrite.Writer
	Book     *ingress.Book
	Pub      *publish.Publisher
	Logs     *proc.Buffer
}

// passedOnce is a reconcile loop that has passed once, knowing no application.
type passedOnce struct{ at time.Time }

func (f passedOnce) Status() reconcile.Status     { return reconcile.Status{LastPass: f.at} }
func (f passedOnce) KnownApps() reconcile.AppView { return nil }

// announcesAll is a node record whose heartbeat is healthy and which announces every
// instance write at once.
type announcesAll struct{}

func (announcesAll) Err() *string                       { return nil }
func (announcesAll) FailingSince() time.Time            { return time.Time{} }
func (announcesAll) Conflict(time.Time) *self.Conflict  { return nil }
func (announcesAll) AddressReport() *self.AddressReport { return nil }
func (announcesAll) Generation() uint64                 { return 0 }
func (announcesAll) Await(context.Context, uint64, time.Time, func(map[string]fleet.Instance) string) (uint64, bool, string) {
	return 0, true, ""
}

// passOnBump commits every serial bump to the node's identity at once.
type passOnBump struct {
	store.Store
	id *store.Identity
}

func (s passOnBump) Put(ctx context.Context, key string, v []byte, cond store.Condition) (string, error) {
	etag, err := s.Store.Put(ctx, key, v, cond)
	if err == nil && key == store.SerialKey {
		if o, oerr := s.id.Observe(ctx, s.Store); oerr == nil {
			s.id.Commit(o)
		}
	}
	return etag, err
}

// New builds the API of node vps-a, mid-rotation of its three tokens, with a first pass
// made: the store has a serial, the node has accepted it, and a document routing
// shop.example is published at it.
func New(t testing.TB, o Options) *API {
	t.Helper()
	st := o.Store
	if st == nil {
		d, err := dir.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		st = d
	}
	id := &store.Identity{}
	if o.PassOnBump {
		st = passOnBump{Store: st, id: id}
	}
	if o.Wrap != nil {
		st = o.Wrap(st)
	}
	logs := &proc.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
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
		IngressToken: Ingress, AdminToken: Admin, ReadOnlyToken: ReadOnly,
		IngressPrevious: []string{IngressPrevious}, AdminPrevious: []string{AdminPrevious}, ReadOnlyPrevious: []string{ReadOnlyPrevious},
		Hosts: append([]string{"apps.example.com"}, o.Hosts...),
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	wcfg := fleetwrite.Config{Node: "vps-a", PlatformDomains: []string{"apps.example.com"}, AuditRetention: 24 * time.Hour, Middlewares: cfg.Middlewares}
	if o.Write != nil {
		o.Write(&wcfg)
	}
	var rec httpapi.SelfRecord = announcesAll{}
	kick := func() {}
	if o.Record {
		r := self.New(self.Options{Store: st, Identity: id, Log: log, NodeID: "0123456789abcdef",
			Name: "vps-a", Address: "127.0.0.1", APIPort: 7400, NodeTTL: 4 * time.Hour,
			Settings: func() fleet.NodeSettings { return fleet.NodeSettings{} }, Instances: inst.Records, OnAnnounced: func() {}})
		wcfg.OnInstances = func() { r.Changed() }
		rec, kick = r, func() { r.Heartbeat(context.Background(), time.Now()) }
	}
	writer := fleetwrite.New(wcfg, st, id, inst, log)
	a, err := httpapi.New(cfg, log, prometheus.NewRegistry(), httpapi.Deps{
		Store: st, Identity: id, Publisher: pub, Reconcile: passedOnce{at: time.Now()}, Self: rec,
		Ingresses: book, Instances: inst, Writer: writer, KickHeartbeat: kick,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	p := &API{T: t, Srv: a, H: a.Handler(), Store: st, Identity: id, Writer: writer, Book: book, Pub: pub, Logs: logs}
	if _, err := store.BumpSerial(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	obs, err := id.Observe(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	id.Commit(obs)
	p.Publish("shop.example")
	return p
}

// Publish makes a document routing hosts (each to one upstream on vps-b) the published
// one, as a reconcile pass would.
func (p *API) Publish(hosts ...string) {
	doc := &routing.Document{Routes: []routing.Route{}}
	for _, h := range hosts {
		doc.Routes = append(doc.Routes, routing.Route{Host: h, Application: strings.Split(h, ".")[0],
			Upstreams: []routing.Upstream{{Node: "vps-b", Address: "10.83.0.2:24000", APIPort: 7400}}})
	}
	doc.Seal()
	p.Pub.Publish(doc, time.Now())
}

// Serve serves r (from 127.0.0.1 unless the test set another source).
func (p *API) Serve(r *http.Request) *httptest.ResponseRecorder {
	if r.RemoteAddr == "" || r.RemoteAddr == "192.0.2.1:1234" { // httptest's default
		r.RemoteAddr = "127.0.0.1:40000"
	}
	rec := httptest.NewRecorder()
	p.H.ServeHTTP(rec, r)
	return rec
}

// Rec makes one request (token "" sends none; hdr are name, value, …).
func (p *API) Rec(method, path, token, body string, hdr ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, "http://127.0.0.1"+path, rd)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return p.Serve(r)
}

// Do makes one request; the body is read whole.
func (p *API) Do(method, path, token, body string, hdr ...string) (*http.Response, []byte) {
	rec := p.Rec(method, path, token, body, hdr...)
	return rec.Result(), rec.Body.Bytes()
}

// Get makes a GET.
func (p *API) Get(path, token string, hdr ...string) (*http.Response, []byte) {
	return p.Do(http.MethodGet, path, token, "", hdr...)
}

// Must makes a request and fails the test unless it answers code.
func (p *API) Must(code int, method, path, token, body string, hdr ...string) []byte {
	p.T.Helper()
	rec := p.Rec(method, path, token, body, hdr...)
	if rec.Code != code {
		p.T.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, code)
	}
	return rec.Body.Bytes()
}

// IssueToken mints an application token through the admin API; roles is the JSON
// array's inside (`"publish"`).
func (p *API) IssueToken(account, app, roles string) (id, tok string) {
	p.T.Helper()
	var it struct{ ID, Token string }
	json.Unmarshal(p.Must(201, "POST", "/v1/tokens", Admin,
		`{"account":`+strconv.Quote(account)+`,"app":`+strconv.Quote(app)+`,"roles":[`+roles+`]}`), &it)
	return it.ID, it.Token
}
