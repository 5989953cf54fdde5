// Package nodetest is the harness the node's tests share: run a node on a listener and
// stop it at cleanup, wait for a condition, collect its logs (a proc.Buffer), write fleet objects the
// way a node's write API does. The root package's tests, the subsystems' tests and the
// Caddy module's (deploy/caddy/scafo, a module of its own) all use it.
//
// It lives at the top of the module, not under node/internal: Go lets only code below
// an internal directory's parent import it, and the Caddy module's path,
// github.com/scafo/ingress/deploy/caddy, is below github.com/scafo/ingress but not below
// github.com/scafo/ingress/node. It does not import the node package either: the root
// package's own tests (package node) use it, and a package they import may not import
// node back. A test hands Start the server it built (anything with Run).
package nodetest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/store"
)

// Runner is a node as the harness runs it: *node.Server is one.
type Runner interface {
	Run(ctx context.Context, ln net.Listener) error
}

// StopTimeout bounds how long Stop waits for a node to return from Run.
const StopTimeout = 20 * time.Second

// Node is a node running on a listener the test opened, until Stop or the test's end.
type Node struct {
	t      testing.TB
	URL    string // http://host:port of the listener
	cancel context.CancelFunc
	exited chan struct{}
	err    error // Run's result, once exited is closed
	once   sync.Once
}

// Start runs r on ln in a goroutine and stops it at the test's cleanup.
func Start(t testing.TB, r Runner, ln net.Listener) *Node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{t: t, URL: "http://" + ln.Addr().String(), cancel: cancel, exited: make(chan struct{})}
	go func() {
		n.err = r.Run(ctx, ln)
		close(n.exited)
	}()
	t.Cleanup(n.Stop)
	return n
}

// Cancel asks the node to stop (cancels Run's context) and does not wait.
func (n *Node) Cancel() { n.cancel() }

// Exited is closed when Run has returned; Err then holds its result.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// Err is what Run returned; call it after Exited is closed.
func (n *Node) Err() error { return n.err }

// Stop cancels the node and waits for Run to return, at most StopTimeout (an error of
// the test past it). Only the first call waits.
func (n *Node) Stop() {
	n.once.Do(func() {
		n.cancel()
		select {
		case <-n.exited:
		case <-time.After(StopTimeout):
			n.t.Errorf("node did not stop within %s", StopTimeout)
		}
	})
}

// Get sends a GET of path (with its query) to the node: see Get.
func (n *Node) Get(path, token string, hdr ...string) (*http.Response, []byte) {
	n.t.Helper()
	return Get(n.t, n.URL+path, token, hdr...)
}

// Get sends a GET of url, with the bearer token when not empty and the headers given
// as name, value pairs, and returns the response and its whole body. The client never
// asks for compression itself, so a gzip body is what the server chose to send.
func Get(t testing.TB, url, token string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// WaitFor polls cond every 10 ms until it holds, and fails the test naming what was
// awaited once d has passed without it.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		<-tick.C
	}
}

// Throughout checks cond every tick for d and fails the test naming what, the first
// time it does not hold: an absence asserted over a window of wall time the test chose
// (a lease, a TTL, an outage: where nothing the code does can say "it will not happen"),
// not a wait for a condition.
func Throughout(t testing.TB, d, every time.Duration, what string, cond func() bool) {
	t.Helper()
	window := time.NewTimer(d)
	defer window.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if !cond() {
			t.Fatalf("%s stopped holding within %s", what, d)
		}
		select {
		case <-window.C:
			return
		case <-tick.C:
		}
	}
}

// Logger is a debug-level text logger into a new buffer the test reads.
func Logger() (*slog.Logger, *proc.Buffer) {
	buf := &proc.Buffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// Put writes v as JSON under key straight into the fleet store and bumps the serial,
// the way any node's write API does.
func Put(t testing.TB, st store.Store, key string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	PutRaw(t, st, key, b)
}

// PutRaw writes b under key and bumps the serial (a malformed object, for one).
func PutRaw(t testing.TB, st store.Store, key string, b []byte) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Put(ctx, key, b, store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.BumpSerial(ctx, st); err != nil {
		t.Fatal(err)
	}
}
