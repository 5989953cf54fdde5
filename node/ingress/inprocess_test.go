package ingress_test

// The ingress book behind the node's HTTP API, in process: httpapi.New over a directory
// store, the real write domain, this package's book and a publisher holding one
// document, with fakes for what the reconcile loop and the node's own record would tell
// (the shape of node/httpapi's inprocess_test.go). Requests go through API.Handler()
// and httptest: no listener, no node, no ticker. What needs one of those is tested
// with the books alone (sharedreports_test.go, await_test.go).

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
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

const (
	ipIngress = "ingress-secret-0123456789"
	ipAdmin   = "admin-secret-0123456789"
)

// inProcess is the API of node vps-a under test, and what it was built over.
type inProcess struct {
	t      testing.TB
	h      http.Handler
	writer *fleetwrite.Writer
	book   *ingress.Book
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

// passOnBump is a store on which every serial bump is taken at once by a pass of this
// node (no reconcile loop runs here: a write is published as soon as it is announced).
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

// newInProcess builds the API of node vps-a, answering to the names hosts too, with a
// first pass made: the store has a serial, the node has accepted it, and a document
// routing shop.example is published at it. The published document is known to be
// derived from the node's serial, which every write's bump moves (passOnBump).
func newInProcess(t testing.TB, hosts ...string) *inProcess {
	t.Helper()
	return newInProcessWith(t, setup{hosts: hosts})
}

// setup is what an in-process API is built with beyond newInProcess's.
type setup struct {
	hosts []string
	// wrap (nil: none) wraps the directory store (a store that fails some requests).
	wrap func(store.Store) store.Store
	// record: this node's own record is self.Record over the store, its heartbeat a
	// step run at once when an instance write kicks it (else every instance write is
	// announced at once).
	record bool
}

func newInProcessWith(t testing.TB, o setup) *inProcess {
	t.Helper()
	d, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	id := &store.Identity{}
	var st store.Store = passOnBump{Store: d, id: id}
	if o.wrap != nil {
		st = o.wrap(st)
	}
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
		IngressToken: ipIngress, AdminToken: ipAdmin, ReadOnlyToken: "readonly-secret-0123456789",
		Hosts: append([]string{"apps.example.com"}, o.hosts...),
	}
	wcfg := fleetwrite.Config{Node: "vps-a", PlatformDomains: []string{"apps.example.com"}, AuditRetention: 24 * time.Hour}
	var rec httpapi.SelfRecord = announcesAll{}
	kick := func() {}
	if o.record {
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
	if _, err := store.BumpSerial(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	obs, err := id.Observe(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	id.Commit(obs)
	doc := &routing.Document{Routes: []routing.Route{{Host: "shop.example", Application: "shop",
		Upstreams: []routing.Upstream{{Node: "vps-b", Address: "10.83.0.2:24000", APIPort: 7400}}}}}
	doc.Seal()
	pub.Publish(doc, time.Now())
	return &inProcess{t: t, h: a.Handler(), writer: writer, book: book}
}

// serve serves r from the API, as from 127.0.0.1.
func (p *inProcess) serve(r *http.Request) *httptest.ResponseRecorder {
	r.RemoteAddr = "127.0.0.1:40000"
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec
}

// do makes one request (token "" sends none; hdr are name, value, …).
func (p *inProcess) do(method, path, token, body string, hdr ...string) *httptest.ResponseRecorder {
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
	return p.serve(r)
}

// must makes a request and fails the test unless it answers code.
func (p *inProcess) must(code int, method, path, token, body string, hdr ...string) []byte {
	p.t.Helper()
	rec := p.do(method, path, token, body, hdr...)
	if rec.Code != code {
		p.t.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, code)
	}
	return rec.Body.Bytes()
}
