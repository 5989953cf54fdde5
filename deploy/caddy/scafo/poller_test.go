package scafo

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// faultProxy stands in front of a real node: it forwards every request, or answers 503
// draining the way a node does before its first pass, and records the requests.
type faultProxy struct {
	url      string
	draining atomic.Bool
	// replay, when set, is answered instead of forwarding: a node's earlier answer.
	replay atomic.Pointer[recordedAnswer]
	srv    *http.Server

	mu       sync.Mutex
	requests []*http.Request
	answered chan string // the status of each answer ("200", "304", "503")
}

func startFaultProxy(t *testing.T, n *testNode) *faultProxy {
	t.Helper()
	target, _ := url.Parse(n.url)
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &faultProxy{answered: make(chan string, 1000)}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, r.Clone(context.Background()))
		p.mu.Unlock()
		if p.draining.Load() {
			w.Header().Set("Retry-After", "2")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"draining","detail":"no complete reconcile pass yet"}`))
			p.note("503")
			return
		}
		if old := p.replay.Load(); old != nil {
			for k, v := range old.header {
				w.Header()[k] = v
			}
			w.WriteHeader(http.StatusOK)
			w.Write(old.body)
			p.note("replayed")
			return
		}
		rec := &statusWriter{ResponseWriter: w}
		rp.ServeHTTP(rec, r)
		p.note(http.StatusText(rec.status))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.url = "http://" + ln.Addr().String()
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

func (p *faultProxy) note(s string) {
	select {
	case p.answered <- s:
	default:
	}
}

func (p *faultProxy) seen() []*http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*http.Request(nil), p.requests...)
}

// recordedAnswer is one 200 of a node, as it was sent.
type recordedAnswer struct {
	header http.Header
	body   []byte
}

// record fetches the node's current document answer (prefer=self, as the poller asks).
func record(t *testing.T, n *testNode) *recordedAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.url+"/v1/ingress/routes?prefer=self", nil)
	req.Header.Set("Authorization", "Bearer "+testIngressToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("X-Scafo-Serial") == "" || resp.Header.Get("X-Scafo-Epoch") == "" {
		t.Fatalf("recording the node's answer: %d, serial %q, epoch %q", resp.StatusCode, resp.Header.Get("X-Scafo-Serial"), resp.Header.Get("X-Scafo-Epoch"))
	}
	h := resp.Header.Clone()
	h.Del("Content-Length")
	h.Del("Content-Encoding")
	return &recordedAnswer{header: h, body: b}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// waitAnswer waits for the proxy to answer with status.
func (p *faultProxy) waitAnswer(t *testing.T, status string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s := <-p.answered:
			if s == status {
				return
			}
		case <-timeout:
			t.Fatalf("the proxy never answered %s", status)
		}
	}
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

func seedShop(t *testing.T, fs fleetStore, up *upstream) {
	t.Helper()
	fs.app("shop", "acme", "vps-b")
	fs.peer("vps-b", map[string]fleet.Instance{"shop": up.instance()})
}

// A flip reaches the poller through a long-poll: with the retry interval at an hour,
// only a held request that the node answers when its revision moves can deliver it.
// The poller asks with prefer=self and If-None-Match, and reports itself.
func TestPollerAppliesAFlipWithinOneLongPoll(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, "vps-a", root)
	fs := fleetStore{t, n.st}
	seedShop(t, fs, startUpstream(t, "shop"))
	n.waitDocument("shop", func(d *routing.Document) bool { return routeOf(d, "shop.apps.example.com") != nil })
	px := startFaultProxy(t, n)

	p, _ := newTestPoller(t, PollerConfig{Endpoints: []string{px.url}, Wait: 20 * time.Second, Interval: time.Hour})
	p.Start()
	t.Cleanup(p.Stop)
	waitTable(t, p, "shop", func(tab *Table) bool { return tab.Lookup("shop.apps.example.com", "/").Kind == KindRoute })

	flipped := time.Now()
	fs.app("bob", "acme", "vps-b")
	fs.peer("vps-b", map[string]fleet.Instance{"shop": {Port: 1, Ready: true}, "bob": {Port: 2, Ready: true}})
	tab := waitTable(t, p, "bob", func(tab *Table) bool { return tab.Lookup("bob.apps.example.com", "/").Kind == KindRoute })
	t.Logf("flip latency (store write → Caddy's table): %s", time.Since(flipped))
	if tab.ETag == "" || !tab.HasSerial {
		t.Fatalf("table without the node's ETag or serial: %+v", tab)
	}
	var longPolls int
	for _, r := range px.seen() {
		q := r.URL.Query()
		if q.Get("prefer") != "self" || r.Header.Get("Authorization") != "Bearer "+testIngressToken ||
			r.Header.Get("X-Scafo-Ingress") != "caddy-test" || r.Header.Get("X-Scafo-Ingress-Kind") != "plugin" {
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
	root := t.TempDir()
	na := startNode(t, "vps-a", root)
	fs := fleetStore{t, na.st}
	seedShop(t, fs, startUpstream(t, "shop"))
	na.waitDocument("shop", func(d *routing.Document) bool { return routeOf(d, "shop.apps.example.com") != nil })
	nb := startNode(t, "vps-c", root)
	nb.waitDocument("shop", func(d *routing.Document) bool { return routeOf(d, "shop.apps.example.com") != nil })
	pa, pb := startFaultProxy(t, na), startFaultProxy(t, nb)
	state := filepath.Join(t.TempDir(), "routes.json")

	p, logs := newTestPoller(t, PollerConfig{Endpoints: []string{pa.url, pb.url}, StateFile: state, Wait: 300 * time.Millisecond, Interval: 50 * time.Millisecond})
	p.Start()
	t.Cleanup(p.Stop)
	good := waitTable(t, p, "shop", func(tab *Table) bool { return tab.Lookup("shop.apps.example.com", "/").Kind == KindRoute })

	// Both nodes drain: every answer is 503, the document stays.
	pa.draining.Store(true)
	pb.draining.Store(true)
	pa.waitAnswer(t, "503")
	pb.waitAnswer(t, "503")
	pa.waitAnswer(t, "503")
	if p.Table() != good {
		t.Fatalf("the held document changed while every node answered 503")
	}
	if logs.FilterMessageSnippet("keeping the last good document").Len() == 0 {
		t.Fatal("no log line says the last good document is kept")
	}

	// The first node stays draining; a change arrives through the second.
	pb.draining.Store(false)
	fs.app("bob", "acme", "vps-b")
	fs.peer("vps-b", map[string]fleet.Instance{"shop": {Port: 1, Ready: true}, "bob": {Port: 2, Ready: true}})
	waitTable(t, p, "bob through the second node", func(tab *Table) bool { return tab.Lookup("bob.apps.example.com", "/").Kind == KindRoute })

	// Both nodes die; a new poller (Caddy restarted) routes from the state file.
	p.Stop()
	na.stop()
	nb.stop()
	p2, _ := newTestPoller(t, PollerConfig{Endpoints: []string{pa.url, pb.url}, StateFile: state, Interval: 50 * time.Millisecond})
	if tab := p2.Table(); tab == nil || tab.Lookup("bob.apps.example.com", "/").Kind != KindRoute ||
		tab.Lookup("shop.apps.example.com", "/").Kind != KindRoute {
		t.Fatalf("restarted with no node: table from the state file = %+v, want shop and bob", tab)
	}
}

// The permission module answers from the document held by the poller, exactly, and
// follows the current document: a name whose claim is removed is refused from the next
// document on.
func TestPermissionFollowsTheCurrentDocumentExactly(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, "vps-a", root)
	fs := fleetStore{t, n.st}
	seedShop(t, fs, startUpstream(t, "shop"))
	fs.claim("shop.example.org", "acme", "shop", nil)
	fs.claim("*.shop.example.org", "acme", "shop", nil)
	n.waitDocument("the claims", func(d *routing.Document) bool { return routeOf(d, "*.shop.example.org") != nil })

	p, _ := newTestPoller(t, PollerConfig{Endpoints: []string{n.url}, Wait: 20 * time.Second})
	p.Start()
	t.Cleanup(p.Stop)
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

	if err := n.st.Delete(ctx, fleet.ClaimKey("shop.example.org"), ""); err != nil {
		t.Fatal(err)
	}
	fs.app("shop", "acme", "vps-b") // a write that bumps the serial
	waitTable(t, p, "the claim gone", func(tab *Table) bool { return !tab.Allowed("shop.example.org") })
	if err := perm.CertificateAllowed(ctx, "shop.example.org"); !errors.Is(err, caddytls.ErrPermissionDenied) {
		t.Fatalf("a name whose claim was removed: CertificateAllowed = %v, want ErrPermissionDenied", err)
	}
}

// A node behind the one already read (it serves a document derived from an older store
// serial: here, its earlier answer, replayed byte for byte) never takes Caddy back.
func TestPollerNeverAppliesAnOlderSerial(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, "vps-a", root)
	fs := fleetStore{t, n.st}
	seedShop(t, fs, startUpstream(t, "shop"))
	fs.app("carol", "acme", "vps-b") // a document published at a serial of the store's epoch
	n.waitDocument("carol", func(d *routing.Document) bool { return routeOf(d, "carol.apps.example.com") != nil })
	old := record(t, n)
	fs.app("bob", "acme", "vps-b")
	fs.peer("vps-b", map[string]fleet.Instance{"shop": {Port: 1, Ready: true}, "bob": {Port: 2, Ready: true}})
	n.waitDocument("bob", func(d *routing.Document) bool { return routeOf(d, "bob.apps.example.com") != nil })

	px := startFaultProxy(t, n)
	p, logs := newTestPoller(t, PollerConfig{Endpoints: []string{px.url}, Wait: 200 * time.Millisecond, Interval: 20 * time.Millisecond})
	p.Start()
	t.Cleanup(p.Stop)
	held := waitTable(t, p, "bob", func(tab *Table) bool { return tab.Lookup("bob.apps.example.com", "/").Kind == KindRoute })

	px.replay.Store(old)
	px.waitAnswer(t, "replayed")
	px.waitAnswer(t, "replayed") // a second poll: the first answer was handled
	if p.Table() != held {
		t.Fatalf("a document of an older serial replaced the held one: %+v", p.Table())
	}
	if logs.FilterMessageSnippet("older than the one held").Len() == 0 {
		t.Fatal("no log line says the node serves an older document")
	}
}
