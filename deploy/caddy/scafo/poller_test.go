package scafo

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

// fakeNode is a node's /v1/ingress/routes in the test's process (the loop is
// internal/follow's, tested there; these tests are of what the poller makes of it): one
// document at a time with its ETag (unless noETag), serial and epoch, a long-poll held
// on If-None-Match until the document changes, 503 draining while draining or before a
// document, and every request recorded.
type fakeNode struct {
	*httptest.Server
	mu       sync.Mutex
	body     []byte
	etag     string
	serial   uint64
	noETag   bool
	draining bool
	reqs     []*http.Request
	changed  chan struct{} // closed (and replaced) when the document or draining changes
	asked    chan struct{} // closed (and replaced) at every request
}

func startFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	n := &fakeNode{changed: make(chan struct{}), asked: make(chan struct{})}
	n.Server = httptest.NewServer(n)
	t.Cleanup(n.Close)
	return n
}

func (n *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	n.reqs = append(n.reqs, r.Clone(context.Background()))
	close(n.asked)
	n.asked = make(chan struct{})
	n.mu.Unlock()
	for {
		n.mu.Lock()
		body, etag, serial, draining, ch := n.body, n.etag, n.serial, n.draining, n.changed
		n.mu.Unlock()
		if draining || body == nil {
			w.Header().Set("Retry-After", "2")
			http.Error(w, `{"error":"draining"}`, http.StatusServiceUnavailable)
			return
		}
		if n.noETag || r.Header.Get("If-None-Match") != etag {
			if !n.noETag {
				w.Header().Set("ETag", etag)
			}
			w.Header().Set(api.HeaderSerial, strconv.FormatUint(serial, 10))
			w.Header().Set(api.HeaderEpoch, "0123456789abcdef")
			w.Write(body)
			return
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
}

func (n *fakeNode) update(f func()) {
	n.mu.Lock()
	f()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

// set serves d, derived from the store's serial.
func (n *fakeNode) set(t testing.TB, serial uint64, d *routing.Document) {
	t.Helper()
	b, err := routing.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	n.update(func() { n.body, n.etag, n.serial = b, `"`+d.Revision+`"`, serial })
}

func (n *fakeNode) drain(on bool) { n.update(func() { n.draining = on }) }

func (n *fakeNode) requests() []*http.Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*http.Request(nil), n.reqs...)
}

// waitAsked waits until the node has received k requests in all.
func (n *fakeNode) waitAsked(t *testing.T, k int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		n.mu.Lock()
		got, ch := len(n.reqs), n.asked
		n.mu.Unlock()
		if got >= k {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("the node was asked %d times, want %d", got, k)
		}
	}
}

// hostsDoc routes each host to one application.
func hostsDoc(hosts ...string) *routing.Document {
	d := &routing.Document{V: 1}
	for _, h := range hosts {
		d.Routes = append(d.Routes, routing.Route{Host: h, Application: "app", Upstreams: ups("10.0.0.1:1")})
	}
	d.Seal()
	return d
}

func routes(host string) func(*Table) bool {
	return func(tab *Table) bool { return tab.Lookup(host, "/").Kind == KindRoute }
}

func newTestPoller(t *testing.T, cfg PollerConfig) (*Poller, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	cfg.Token = testIngressToken
	cfg.Logger = zap.New(core)
	if cfg.Name == "" {
		cfg.Name = "caddy-test"
	}
	p, err := NewPoller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, logs
}

func startTestPoller(t *testing.T, cfg PollerConfig) (*Poller, *observer.ObservedLogs) {
	t.Helper()
	p, logs := newTestPoller(t, cfg)
	p.Start()
	t.Cleanup(p.Stop)
	return p, logs
}

// A flip reaches the poller through a long-poll: with the retry interval at an hour,
// only a held request that the node answers when its revision moves can deliver it.
// The poller asks with prefer=self and If-None-Match, and reports itself.
func TestPollerAppliesAFlipWithinOneLongPoll(t *testing.T) {
	n := startFakeNode(t)
	n.set(t, 1, hostsDoc("shop.apps.example.com"))
	p, _ := startTestPoller(t, PollerConfig{Endpoints: []string{n.URL}, Wait: 20 * time.Second, Interval: time.Hour})
	waitTable(t, p, "shop", routes("shop.apps.example.com"))
	n.set(t, 2, hostsDoc("shop.apps.example.com", "bob.apps.example.com"))
	tab := waitTable(t, p, "bob", routes("bob.apps.example.com"))
	if tab.ETag == "" || !tab.HasSerial || tab.Serial != 2 {
		t.Fatalf("table without the node's ETag or serial: %+v", tab)
	}
	var longPolls int
	for _, r := range n.requests() {
		q := r.URL.Query()
		if q.Get("prefer") != "self" || r.Header.Get("Authorization") != "Bearer "+testIngressToken ||
			r.Header.Get(api.HeaderIngress) != "caddy-test" || r.Header.Get(api.HeaderIngressKind) != "plugin" {
			t.Fatalf("poll %s with headers %v: want prefer=self, the token and the ingress report", r.URL, r.Header)
		}
		if q.Get("wait") != "" && r.Header.Get("If-None-Match") != "" {
			longPolls++
		}
	}
	if longPolls == 0 {
		t.Fatal("no long-poll (wait + If-None-Match) was sent")
	}
}

// 503 draining, an error, or a dead node never withdraws a route: the last good
// document stays in memory, and the poller moves to the next endpoint; a poller started
// with no node answering routes from the state file.
func TestPollerKeepsTheLastGoodDocumentThroughDrainingAndOutages(t *testing.T) {
	na, nb := startFakeNode(t), startFakeNode(t)
	na.set(t, 1, hostsDoc("shop.apps.example.com"))
	nb.set(t, 1, hostsDoc("shop.apps.example.com"))
	state := filepath.Join(t.TempDir(), "routes.json")
	cfg := PollerConfig{Endpoints: []string{na.URL, nb.URL}, StateFile: state, Wait: 300 * time.Millisecond, Interval: 50 * time.Millisecond}
	p, logs := startTestPoller(t, cfg)
	good := waitTable(t, p, "shop", routes("shop.apps.example.com"))

	// Both nodes drain: every answer is 503 (the second's, then the first's again), the
	// document stays.
	asked := len(na.requests())
	na.drain(true)
	nb.drain(true)
	na.waitAsked(t, asked+2)
	if p.Table() != good {
		t.Fatalf("the held document changed while every node answered 503")
	}
	if logs.FilterMessageSnippet("keeping the last good document").Len() == 0 {
		t.Fatal("no log line says the last good document is kept")
	}

	// The first node stays draining; a change arrives through the second.
	nb.set(t, 2, hostsDoc("shop.apps.example.com", "bob.apps.example.com"))
	nb.drain(false)
	waitTable(t, p, "bob through the second node", routes("bob.apps.example.com"))

	// Both nodes die; a new poller (Caddy restarted) routes from the state file.
	p.Stop()
	na.Close()
	nb.Close()
	p2, _ := newTestPoller(t, cfg)
	if tab := p2.Table(); tab == nil || !routes("bob.apps.example.com")(tab) || !routes("shop.apps.example.com")(tab) {
		t.Fatalf("restarted with no node: table from the state file = %+v, want shop and bob", tab)
	}
}

// The permission module answers from the document held by the poller, exactly, and
// follows the current document: a name whose route is gone is refused from the next
// document on.
func TestPermissionFollowsTheCurrentDocumentExactly(t *testing.T) {
	doc := func(hosts ...string) *routing.Document {
		d := &routing.Document{V: 1, API: &routing.API{Hosts: []string{"apps.example.com"}, Upstreams: ups("10.0.0.9:7400"), Denied: routing.DeniedAPIPrefixes}}
		for _, h := range hosts {
			d.Routes = append(d.Routes, routing.Route{Host: h, Application: "shop", Upstreams: ups("10.0.0.1:1")})
		}
		d.Seal()
		return d
	}
	n := startFakeNode(t)
	n.set(t, 1, doc("*.shop.example.org", "shop.apps.example.com", "shop.example.org"))
	p, _ := startTestPoller(t, PollerConfig{Endpoints: []string{n.URL}, Wait: 20 * time.Second})
	perm := &Permission{app: &App{poller: p}}
	waitTable(t, p, "the claims", func(tab *Table) bool { return tab.Allowed("shop.example.org") })

	ctx := context.Background()
	for _, name := range []string{"shop.example.org", "shop.apps.example.com", "apps.example.com"} {
		if err := perm.CertificateAllowed(ctx, name); err != nil {
			t.Errorf("CertificateAllowed(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"a.shop.example.org", "*.shop.example.org", "SHOP.example.org", "shop.example.org.",
		"shop.example.org:443", "127.0.0.1", "[::1]", "::1", "x.shop.apps.example.com", "", "shop.example.org\x00"} {
		if err := perm.CertificateAllowed(ctx, name); !errors.Is(err, caddytls.ErrPermissionDenied) {
			t.Errorf("CertificateAllowed(%q) = %v, want ErrPermissionDenied", name, err)
		}
	}

	n.set(t, 2, doc("*.shop.example.org", "shop.apps.example.com"))
	waitTable(t, p, "the claim gone", func(tab *Table) bool { return !tab.Allowed("shop.example.org") })
	if err := perm.CertificateAllowed(ctx, "shop.example.org"); !errors.Is(err, caddytls.ErrPermissionDenied) {
		t.Fatalf("a name whose claim was removed: CertificateAllowed = %v, want ErrPermissionDenied", err)
	}
}

// A node behind the one already read (it serves a document derived from an older store
// serial) never takes Caddy back.
func TestPollerNeverAppliesAnOlderSerial(t *testing.T) {
	n := startFakeNode(t)
	n.set(t, 5, hostsDoc("shop.apps.example.com", "bob.apps.example.com"))
	p, logs := startTestPoller(t, PollerConfig{Endpoints: []string{n.URL}, Wait: 200 * time.Millisecond, Interval: 20 * time.Millisecond})
	held := waitTable(t, p, "bob", routes("bob.apps.example.com"))

	asked := len(n.requests())
	n.set(t, 3, hostsDoc("shop.apps.example.com", "carol.apps.example.com"))
	n.waitAsked(t, asked+2) // a poll after the one that got the older document: it was handled
	if p.Table() != held {
		t.Fatalf("a document of an older serial replaced the held one: %+v", p.Table())
	}
	if logs.FilterMessageSnippet("older than the one held").Len() == 0 {
		t.Fatal("no log line says the node serves an older document")
	}
}

// A node (or a proxy in front of it) that answers without an ETag cannot be
// long-polled: the poller then asks again after Interval, not in a loop as fast as the
// node answers (each round a decode, a table swap and an fsync'd state file).
func TestPollerDoesNotSpinOnANodeWithoutETags(t *testing.T) {
	n := startFakeNode(t)
	n.noETag = true
	n.set(t, 7, hostsDoc("shop.example.org"))
	const interval = 200 * time.Millisecond
	start := time.Now()
	p, _ := startTestPoller(t, PollerConfig{Endpoints: []string{n.URL}, Interval: interval, StateFile: t.TempDir() + "/routes.json"})
	// Six requests: the five gaps between them are the poller's pauses. A poller that
	// spins asks again as soon as the node answers (milliseconds).
	n.waitAsked(t, 6)
	if p.Table() == nil {
		t.Fatal("no document applied")
	}
	if took, least := time.Since(start), 5*interval/2; took < least {
		t.Fatalf("6 requests in %s to a node without ETags (Interval %s): the poller spins (want at least %s)", took, interval, least)
	}
}

// A Caddy of one ingress group routes only that group's hosts. A group's document
// (?group=) also carries the routes its path maps target in other groups, for their
// upstreams only: Traefik renders no router for them ("their hosts are another
// group's"), and neither may Caddy route their host nor approve a certificate for it.
// The path map still reaches the target.
func TestGroupCaddyNeverRoutesAnotherGroupsHost(t *testing.T) {
	full := &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "go.tito.io", Application: "tito-go", Group: "us", Upstreams: ups("10.0.0.1:4")},
		{Host: "other.example.org", Application: "other", Group: "us", Upstreams: ups("10.0.0.1:5")},
		{Host: "ti.to", Application: "tito-classic", Group: "eu", Upstreams: ups("10.0.0.1:3"),
			Paths: map[string]string{"paulca": "go.tito.io"}},
	}}
	full.Seal()
	doc := routing.ForGroups(full, []string{"eu"})
	if routeOf(doc, "go.tito.io") == nil {
		t.Fatal("the group document does not carry the path target; the test proves nothing")
	}
	n := startFakeNode(t)
	n.set(t, 1, doc)
	p, _ := startTestPoller(t, PollerConfig{Endpoints: []string{n.URL}, Group: "eu"})
	tab := waitTable(t, p, "a document", func(*Table) bool { return true })
	if g := n.requests()[0].URL.Query().Get("group"); g != "eu" {
		t.Fatalf("the poller asked for group %q, want eu", g)
	}
	if sel := tab.Lookup("go.tito.io", "/"); sel.Kind != KindNone {
		t.Errorf("go.tito.io (group us) routed by the eu Caddy: %+v", sel)
	}
	if tab.Allowed("go.tito.io") {
		t.Error("on-demand TLS approves go.tito.io, a host of group us")
	}
	if sel := tab.Lookup("ti.to", "/paulca/x"); sel.Target != "go.tito.io" || len(sel.Dials) != 1 || sel.Dials[0] != "10.0.0.1:4" {
		t.Errorf("ti.to/paulca: %+v, want the target go.tito.io", sel)
	}
	if sel := tab.Lookup("ti.to", "/"); sel.Kind != KindRoute || sel.Application != "tito-classic" {
		t.Errorf("ti.to: %+v", sel)
	}
	if !tab.Allowed("ti.to") {
		t.Error("ti.to not approved")
	}
}
