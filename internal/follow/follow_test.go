package follow

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

// fakeNode serves one document at a time, long-polls on If-None-Match, and records
// the report headers of every poll.
type fakeNode struct {
	mu      sync.Mutex
	body    []byte
	etag    string
	serial  uint64
	changed chan struct{}
	down    bool
	reports []http.Header
	polled  chan struct{} // closed (and replaced) at every request
}

func newFakeNode() *fakeNode {
	return &fakeNode{changed: make(chan struct{}), polled: make(chan struct{})}
}

// waitReport waits for a request whose headers satisfy ok, and returns them.
func (n *fakeNode) waitReport(t *testing.T, ok func(http.Header) bool) http.Header {
	t.Helper()
	deadline := time.After(10 * time.Second)
	seen := 0
	for {
		n.mu.Lock()
		rs, ch := n.reports[seen:], n.polled
		seen = len(n.reports)
		n.mu.Unlock()
		for _, h := range rs {
			if ok(h) {
				return h
			}
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("no such request within 10 s")
		}
	}
}

func (n *fakeNode) set(t *testing.T, serial uint64, hosts ...string) {
	t.Helper()
	doc := &routing.Document{V: routing.Version}
	for _, h := range hosts {
		doc.Routes = append(doc.Routes, routing.Route{Host: h, Application: "app",
			Upstreams: []routing.Upstream{{Node: "n1", Address: "127.0.0.1:1000"}}, Passthrough: true})
	}
	doc.Seal()
	b, err := routing.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.body, n.etag, n.serial = b, `"`+doc.Revision+`"`, serial
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

func (n *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	down := n.down
	n.reports = append(n.reports, r.Header.Clone())
	close(n.polled)
	n.polled = make(chan struct{})
	n.mu.Unlock()
	if down || r.Header.Get("Authorization") != "Bearer tok" {
		http.Error(w, `{"error":"draining"}`, http.StatusServiceUnavailable)
		return
	}
	for {
		n.mu.Lock()
		body, etag, serial, ch := n.body, n.etag, n.serial, n.changed
		n.mu.Unlock()
		if body == nil || r.Header.Get("If-None-Match") != etag {
			w.Header().Set("ETag", etag)
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

func (n *fakeNode) setDown(d bool) { n.mu.Lock(); n.down = d; n.mu.Unlock() }

func start(t *testing.T, cfg Config) (*Follower, func()) {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = "tok"
	}
	cfg.HTTPClient = &http.Client{}
	cfg.Interval = 10 * time.Millisecond
	cfg.Name, cfg.Kind = "front-a", api.KindFront
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return f, stop
}

// waitFor waits until the follower holds serial (or fails after 10 s).
func waitFor(t *testing.T, f *Follower, serial uint64) *Held {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := f.Changed()
		if h := f.Current(); h != nil && h.Serial == serial {
			return h
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("serial %d never applied (holding %+v)", serial, f.Current())
		}
	}
}

func TestAChangeArrivesByLongPollAndIsReportedAsApplied(t *testing.T) {
	n := newFakeNode()
	n.set(t, 5, "db.example.org")
	srv := httptest.NewServer(n)
	t.Cleanup(srv.Close)
	f, _ := start(t, Config{Endpoints: []string{srv.URL}})
	waitFor(t, f, 5)
	n.set(t, 6, "db.example.org", "mq.example.org")
	h := waitFor(t, f, 6)
	if len(h.Doc.Routes) != 2 {
		t.Fatalf("routes = %d, want 2", len(h.Doc.Routes))
	}
	// The next poll reports serial 6 as applied, with the front's kind.
	last := n.waitReport(t, func(h http.Header) bool { return h.Get(api.HeaderAppliedSerial) == "6" })
	if last.Get(api.HeaderIngressKind) != api.KindFront || last.Get(api.HeaderIngress) != "front-a" ||
		last.Get(api.HeaderAppliedRevision) != h.Doc.Revision {
		t.Fatalf("report headers %v", last)
	}
}

func TestTheNextNodeServesWhenOneFails(t *testing.T) {
	a, b := newFakeNode(), newFakeNode()
	a.set(t, 3, "db.example.org")
	a.setDown(true)
	b.set(t, 4, "db.example.org", "mq.example.org")
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	t.Cleanup(sa.Close)
	t.Cleanup(sb.Close)
	f, _ := start(t, Config{Endpoints: []string{sa.URL, sb.URL}})
	waitFor(t, f, 4)
}

func TestAnOlderSerialNeverReplacesTheDocumentHeld(t *testing.T) {
	a, b := newFakeNode(), newFakeNode()
	a.set(t, 9, "db.example.org")
	b.set(t, 8, "old.example.org")
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	t.Cleanup(sa.Close)
	t.Cleanup(sb.Close)
	f, _ := start(t, Config{Endpoints: []string{sa.URL, sb.URL}})
	waitFor(t, f, 9)
	// a fails: the follower moves to b, which serves serial 8; it keeps 9.
	a.setDown(true)
	a.set(t, 9, "db.example.org") // release the long-poll
	// b is polled twice: the first answer (serial 8) was weighed and refused.
	b.waitReport(t, func(http.Header) bool { return true })
	b.waitReport(t, func(http.Header) bool { return true })
	if h := f.Current(); h.Serial != 9 || h.Doc.Routes[0].Host != "db.example.org" {
		t.Fatalf("holding serial %d %v: went back to an older document", h.Serial, h.Doc.Routes)
	}
}

func TestARestartWithEveryNodeDownRoutesFromTheStateFile(t *testing.T) {
	state := filepath.Join(t.TempDir(), "routes.json")
	n := newFakeNode()
	n.set(t, 7, "db.example.org")
	srv := httptest.NewServer(n)
	f, cancel := start(t, Config{Endpoints: []string{srv.URL}, StateFile: state})
	waitFor(t, f, 7)
	cancel()
	srv.Close()
	g, err := New(Config{Endpoints: []string{srv.URL}, Token: "tok", StateFile: state, HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Current()
	if h == nil || h.Serial != 7 || len(h.Doc.Routes) != 1 || h.Doc.Routes[0].Host != "db.example.org" {
		t.Fatalf("after a restart: %+v", h)
	}
}

func TestConfigIsValidated(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no endpoints": {Token: "t", HTTPClient: &http.Client{}},
		"bad endpoint": {Endpoints: []string{"ftp://x"}, Token: "t", HTTPClient: &http.Client{}},
		"userinfo":     {Endpoints: []string{"http://u:p@x"}, Token: "t", HTTPClient: &http.Client{}},
		"no token":     {Endpoints: []string{"http://x"}, HTTPClient: &http.Client{}},
		"no client":    {Endpoints: []string{"http://x"}, Token: "t"},
		"bad group":    {Endpoints: []string{"http://x"}, Token: "t", HTTPClient: &http.Client{}, Group: "A B"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
