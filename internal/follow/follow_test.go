package follow

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/fakenode"
	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

// doc routes each host to one passthrough application.
func doc(hosts ...string) *routing.Document {
	d := &routing.Document{V: routing.Version}
	for _, h := range hosts {
		d.Routes = append(d.Routes, routing.Route{Host: h, Application: "app",
			Upstreams: []routing.Upstream{{Node: "n1", Address: "127.0.0.1:1000"}}, Passthrough: true})
	}
	d.Seal()
	return d
}

// node starts a fake node serving doc(hosts) at serial.
func node(t *testing.T, serial uint64, hosts ...string) *fakenode.Node {
	n := fakenode.New(t, "")
	n.SetDoc(t, serial, doc(hosts...))
	return n
}

const wait = 10 * time.Second

func start(t *testing.T, cfg Config) (*Follower, func()) {
	t.Helper()
	cfg.Token, cfg.HTTPClient = fakenode.Token, &http.Client{}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Millisecond
	}
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
	n := node(t, 5, "db.example.org")
	f, _ := start(t, Config{Endpoints: []string{n.URL()}, Group: "eu"})
	waitFor(t, f, 5)
	n.SetDoc(t, 6, doc("db.example.org", "mq.example.org"))
	h := waitFor(t, f, 6)
	if len(h.Doc.Routes) != 2 {
		t.Fatalf("routes = %d, want 2", len(h.Doc.Routes))
	}
	// The next poll reports serial 6 as applied, with the front's kind.
	n.WaitFor(t, "a poll reporting serial 6", wait, func(n *fakenode.Node) bool { return n.Reqs[len(n.Reqs)-1].AppliedSerial == "6" })
	for i, r := range n.Requests() {
		if r.Prefer != "self" || r.Group != "eu" || r.Kind != api.KindFront || r.Ingress != "front-a" || (i > 0 && (r.Wait == "" || r.IfNoneMatch == "")) {
			t.Fatalf("poll %d: %+v, want prefer=self, group=eu, the front's report, then long-polls", i, r)
		}
	}
	if last := n.Requests(); last[len(last)-1].AppliedRevision != h.Doc.Revision {
		t.Fatalf("reported revision %q, want %q", last[len(last)-1].AppliedRevision, h.Doc.Revision)
	}
}

// Every node failing (503, or gone) never drops the document held; the next node that
// answers serves.
func TestTheLastDocumentOutlivesFailuresAndTheNextNodeServes(t *testing.T) {
	a, b := node(t, 3, "db.example.org"), node(t, 3, "db.example.org")
	var logs proc.Buffer
	f, _ := start(t, Config{Endpoints: []string{a.URL(), b.URL()}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	held := waitFor(t, f, 3)
	a.SetMode(fakenode.Draining)
	b.SetMode(fakenode.Draining)
	a.Srv.CloseClientConnections() // the held long-poll
	asked := len(a.Requests())
	a.WaitFor(t, "a round of both nodes draining", wait, func(n *fakenode.Node) bool {
		return len(n.Reqs) >= asked+2 && n.Reqs[asked+1].Status == http.StatusServiceUnavailable
	})
	if f.Current() != held {
		t.Fatal("the document held changed while every node answered 503")
	}
	if !strings.Contains(logs.String(), "keeping the last good document") {
		t.Fatalf("no log line says the last good document is kept:\n%s", logs.String())
	}
	b.SetDoc(t, 4, doc("db.example.org", "mq.example.org"))
	b.SetMode(fakenode.Serve)
	waitFor(t, f, 4)
}

func TestAnOlderSerialNeverReplacesTheDocumentHeld(t *testing.T) {
	a, b := node(t, 9, "db.example.org"), node(t, 8, "old.example.org")
	var logs proc.Buffer
	f, _ := start(t, Config{Endpoints: []string{a.URL(), b.URL()}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitFor(t, f, 9)
	// a fails: the follower moves to b, which serves serial 8; it keeps 9.
	a.SetMode(fakenode.Draining)
	a.Srv.CloseClientConnections() // the held long-poll
	// b is polled twice: the first answer (serial 8) was weighed and refused.
	b.WaitFor(t, "two polls", wait, func(n *fakenode.Node) bool { return len(n.Reqs) >= 2 })
	if h := f.Current(); h.Serial != 9 || h.Doc.Routes[0].Host != "db.example.org" {
		t.Fatalf("holding serial %d %v: went back to an older document", h.Serial, h.Doc.Routes)
	}
	if !strings.Contains(logs.String(), "older than the one held") {
		t.Fatalf("no log line says the node serves an older document:\n%s", logs.String())
	}
}

// A node (or a proxy in front of it) that answers without an ETag cannot be
// long-polled: it is asked again after Interval, not as fast as it answers (each round
// a decode, an Apply and an fsync'd state file).
func TestANodeWithoutETagsIsAskedOncePerInterval(t *testing.T) {
	n := node(t, 7, "db.example.org")
	n.NoETag = true
	const interval = 100 * time.Millisecond
	begin := time.Now()
	start(t, Config{Endpoints: []string{n.URL()}, Interval: interval, StateFile: filepath.Join(t.TempDir(), "routes.json")})
	// Six requests: the five gaps between them are the follower's pauses. One that
	// spins asks again as soon as the node answers (milliseconds).
	n.WaitFor(t, "six polls", wait, func(n *fakenode.Node) bool { return len(n.Reqs) >= 6 })
	if took, least := time.Since(begin), 5*interval/2; took < least {
		t.Fatalf("6 polls in %s of a node without ETags (Interval %s): the follower spins (want at least %s)", took, interval, least)
	}
}

func TestARestartWithEveryNodeDownRoutesFromTheStateFile(t *testing.T) {
	state := filepath.Join(t.TempDir(), "routes.json")
	n := node(t, 7, "db.example.org")
	f, cancel := start(t, Config{Endpoints: []string{n.URL()}, StateFile: state})
	waitFor(t, f, 7)
	cancel()
	n.Srv.Close()
	g, err := New(Config{Endpoints: []string{n.URL()}, Token: "tok", StateFile: state, HTTPClient: &http.Client{}})
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
