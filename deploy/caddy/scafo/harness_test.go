package scafo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/follow"
	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

const (
	testIngressToken = testnode.IngressToken
	testAdminToken   = testnode.AdminToken
)

// testNode is a real scafo node, in process, on a loopback port from :0, run by the
// node's shared test harness (internal/testnode).
type testNode struct {
	*testnode.Node
	t    testing.TB
	name string
	url  string
	st   store.Store
}

// startNode runs node name over the fleet store at root (a dir store: several nodes
// may share one root, as nodes share a bucket), each name on its own node.address.
func startNode(t testing.TB, name, root string) *testNode {
	t.Helper()
	n := testnode.Start(t, testnode.Config(t, name, root))
	return &testNode{Node: n, t: t, name: name, url: n.URL, st: n.St}
}

// stop stops the node and waits for it (once; the cleanup's stop then does nothing).
func (n *testNode) stop() { n.Stop() }

// waitDocument follows the node's routing document as an ingress does (internal/follow:
// long-polls, the 503 before the node's first pass asked again every 20 ms) until ok
// holds.
func (n *testNode) waitDocument(what string, ok func(*routing.Document) bool) *routing.Document {
	n.t.Helper()
	f, err := follow.New(follow.Config{Endpoints: []string{n.url}, Token: testIngressToken, HTTPClient: &http.Client{}, Interval: 20 * time.Millisecond})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	timeout := time.After(30 * time.Second)
	for {
		ch := f.Changed()
		if h := f.Current(); h != nil && ok(h.Doc) {
			return h.Doc
		}
		select {
		case <-ch:
		case <-timeout:
			n.t.Fatalf("node %s: no document with %s within 30s (last: %+v)", n.name, what, f.Current())
		}
	}
}

// fleetStore writes fleet objects the way a node's write API does (object, then a
// serial bump naming it).
type fleetStore struct {
	t  testing.TB
	st store.Store
}

func (f fleetStore) put(key string, v any) {
	f.t.Helper()
	nodetest.Put(f.t, f.st, key, v)
}

func (f fleetStore) app(name, account string, placement ...string) {
	f.put(fleet.AppKey(name), fleet.App{Name: name, Account: account, Placement: placement})
}

func (f fleetStore) claim(host, account, app string, paths map[string]string) {
	f.put(fleet.ClaimKey(host), fleet.Claim{Host: host, Account: account, App: app, Paths: paths})
}

// peer writes the record of a node that runs instances at 127.0.0.1 (the test's
// upstream servers), seen now.
func (f fleetStore) peer(name string, instances map[string]fleet.Instance) {
	f.put(fleet.NodeKey(name), fleet.NodeRecord{Name: name, Address: "127.0.0.1", APIPort: 1, Instances: instances, Seen: time.Now().UTC()})
}

// upstream is a real HTTP server on 127.0.0.1 that names itself and records the
// request targets it received, exactly as they arrived.
type upstream struct {
	name string
	ln   net.Listener
	srv  *http.Server
	port int

	mu      sync.Mutex
	targets []string
	hits    atomic.Int64
}

func startUpstream(t testing.TB, name string) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{name: name, ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	u.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.targets = append(u.targets, r.RequestURI)
		u.mu.Unlock()
		u.hits.Add(1)
		w.Header().Set("X-Upstream", u.name)
		fmt.Fprintf(w, "%s %s %s", u.name, r.Host, r.RequestURI)
	})}
	go u.srv.Serve(ln)
	t.Cleanup(func() { u.srv.Close() })
	return u
}

func (u *upstream) instance() fleet.Instance { return fleet.Instance{Port: u.port, Ready: true} }

func (u *upstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.targets...)
}

// rawGet sends one HTTP/1.1 request with the request target written byte for byte
// (no client-side cleaning or escaping) and returns the status and the answering
// upstream's name ("" when no upstream answered).
func rawGet(t *testing.T, addr, host, target string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s %s: %v", host, target, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Upstream")
}

// hostsOf lists a document's route hosts.
func hostsOf(d *routing.Document) string {
	var hs []string
	for _, r := range d.Routes {
		hs = append(hs, r.Host+fmt.Sprint(len(r.Upstreams)))
	}
	return strings.Join(hs, ",")
}

// routeOf returns the document's route for host (nil when absent).
func routeOf(d *routing.Document, host string) *routing.Route {
	for i := range d.Routes {
		if d.Routes[i].Host == host {
			return &d.Routes[i]
		}
	}
	return nil
}

// waitFirstPass waits until the node serves a document (its first reconcile pass).
func (n *testNode) waitFirstPass() {
	n.t.Helper()
	n.waitDocument("a first pass", func(*routing.Document) bool { return true })
}
