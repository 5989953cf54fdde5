package node_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

func TestRoutingEndpointsDrainBeforeFirstPass(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	st, _ := dir.New(cfg.Store.Dir.Path)
	srv, err := node.NewWithStore(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), st, testIngressToken, testAdminToken)
	if err != nil {
		t.Fatal(err)
	}
	// Not started: no reconcile pass has run.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	base := "http://" + ln.Addr().String() // the server is not run: no testNode
	for _, p := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/readyz"} {
		tok := testIngressToken
		resp, b := nodetest.Get(t, base+p, tok)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: status %d, want 503", p, resp.StatusCode)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", p)
		}
		if !strings.Contains(string(b), `"error":"draining"`) {
			t.Errorf("%s: body %s, want draining", p, b)
		}
		if strings.Contains(string(b), `"routes"`) {
			t.Errorf("%s: served a document before the first pass: %s", p, b)
		}
	}
}

func TestLastDocumentServedWhileStoreUnreadable(t *testing.T) {
	t.Parallel()
	storeDir := filepath.Join(t.TempDir(), "store")
	n := startNode(t, testConfig(t, "vps-a", storeDir))
	seedFleet(t, n.St, "shop")
	n.WaitReady()
	waitSeeded(t, n)
	_, before := n.Get("/v1/ingress/traefik", testIngressToken)

	// Make the store unreadable: as root permission bits are ignored, so move the
	// directory away and leave a plain file in its place.
	if err := os.Rename(storeDir, storeDir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(storeDir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "status reports the store unreachable", func() bool {
		_, b := n.Get("/v1/status", testAdminToken)
		return strings.Contains(string(b), `"reachable":false`) && strings.Contains(string(b), "unreachableSince")
	})
	for range 5 {
		resp, during := n.Get("/v1/ingress/traefik", testIngressToken)
		if resp.StatusCode != 200 || !bytes.Equal(before, during) {
			t.Fatalf("while the store is unreadable: %d, same bytes %v", resp.StatusCode, bytes.Equal(before, during))
		}
		n.WaitPasses(1) // a pass on the unreadable store
	}
	os.Remove(storeDir)
	if err := os.Rename(storeDir+".away", storeDir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "store reachable again", func() bool {
		_, b := n.Get("/v1/status", testAdminToken)
		return strings.Contains(string(b), `"reachable":true`)
	})
}

func TestMalformedObjectSkippedNotWithdrawn(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	seedFleet(t, n.St, "shop", "blog")
	n.WaitReady()
	waitFor(t, 5*time.Second, "two apps routed", func() bool { return len(hostsOf(routesDoc(t, n))) == 2 })

	// A malformed object is skipped and reported; everything else stays. It counts as
	// absent (not as its last good version), so a node restarted now derives the same
	// document as one that saw the good version.
	putRaw(t, n.St, "apps/broken.json", []byte(`{"name": "broken", "placement": [`))
	putRaw(t, n.St, "apps/blog.json", []byte(`{"name": 42}`))
	waitFor(t, 5*time.Second, "both reported in status", func() bool {
		_, b := n.Get("/v1/status", testAdminToken)
		return strings.Contains(string(b), "apps/broken.json") && strings.Contains(string(b), "apps/blog.json")
	})
	waitFor(t, 5*time.Second, "blog skipped, shop kept", func() bool {
		return strings.Join(hostsOf(routesDoc(t, n)), ",") == "shop.apps.example.com"
	})
	if !strings.Contains(n.Logs.String(), "apps/broken.json") {
		t.Error("malformed object not logged")
	}
	// A second node starting on the same store serves the same bytes.
	m := startNode(t, testConfig(t, "vps-c", n.Cfg.Store.Dir.Path))
	m.WaitReady()
	waitFor(t, 5*time.Second, "identical documents", func() bool {
		_, a := n.Get("/v1/ingress/traefik", testIngressToken)
		_, b := m.Get("/v1/ingress/traefik", testIngressToken)
		return bytes.Equal(a, b)
	})
}

// TestWipedStoreIsAnOutageNotAnEmptyFleet: a store directory replaced by an empty one
// (an unmounted volume, a wiped bucket) must not withdraw every route, even though this
// node's heartbeat keeps writing into it.
func TestWipedStoreIsAnOutageNotAnEmptyFleet(t *testing.T) {
	t.Parallel()
	storeDir := filepath.Join(t.TempDir(), "store")
	cfg := testConfig(t, "vps-a", storeDir)
	cfg.Reconcile.Heartbeat = ptypes.Duration(100 * time.Millisecond)
	cfg.Reconcile.NodeTTL = ptypes.Duration(time.Minute)
	n := startNode(t, cfg)
	seedFleet(t, n.St, "shop")
	n.WaitReady()
	waitSeeded(t, n)
	// The store's identity is what tells a wiped store from a new one: wait until the
	// served document was derived from a committed serial (the node's first heartbeat
	// creates it). Before that, the store this node reads has no identity at all.
	var before []byte
	waitFor(t, 5*time.Second, "a document derived from a committed serial", func() bool {
		resp, b := n.Get("/v1/ingress/routes", testIngressToken)
		before = b
		return resp.Header.Get("X-Scafo-Serial") != "" && resp.Header.Get("X-Scafo-Serial") != "0"
	})

	if err := os.Rename(storeDir, storeDir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(storeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "status reports the store unreachable", func() bool {
		_, b := n.Get("/v1/status", testAdminToken)
		return strings.Contains(string(b), `"reachable":false`)
	})
	// Several heartbeats later: still the last good document, and no serial recreated.
	// Checked after every few passes over the wiped store, for as many passes as fit in
	// five heartbeats (the passes are what the test counts; heartbeats run on their own ticker).
	passesPerHeartbeat := int(cfg.Reconcile.Heartbeat / cfg.Reconcile.Interval)
	for range 5 {
		n.WaitPasses(passesPerHeartbeat)
		_, during := n.Get("/v1/ingress/routes", testIngressToken)
		if !bytes.Equal(before, during) {
			t.Fatalf("document changed after the store was wiped:\n%s", during)
		}
	}
	if _, err := os.Stat(filepath.Join(storeDir, "serial")); err == nil {
		t.Fatal("the node recreated the serial in a wiped store")
	}
	// Writes are refused while the store is not the one this node served.
	req, _ := http.NewRequest("PUT", n.URL+"/v1/apps/blog", strings.NewReader(`{"account":"acme"}`))
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("write to a wiped store: %d, want 503", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(storeDir, "apps", "blog.json")); err == nil {
		t.Fatal("a write landed in the wiped store")
	}
	// Another writer recreating the serial (a fresh node on the wiped store) mints
	// another epoch: refused, and this node's heartbeats do not bump it along.
	if _, err := store.BumpSerial(context.Background(), n.St); err != nil {
		t.Fatal(err)
	}
	n.WaitPasses(5 * passesPerHeartbeat) // absence of change: the passes of several heartbeats
	if _, during := n.Get("/v1/ingress/routes", testIngressToken); !bytes.Equal(before, during) {
		t.Fatalf("a serial that went backwards was accepted\n%s", n.Logs.String())
	}
}

func TestTwoNodesOnOneStoreServeIdenticalBytes(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	a := startNode(t, testConfig(t, "vps-a", storeDir))
	b := startNode(t, testConfig(t, "vps-c", storeDir))
	seedFleet(t, a.St, "shop", "blog", "docs")
	a.WaitReady()
	b.WaitReady()
	for _, p := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/ingress/traefik?prefer=vps-b"} {
		waitFor(t, 5*time.Second, "identical "+p, func() bool {
			ra, ba := a.Get(p, testIngressToken)
			rb, bb := b.Get(p, testIngressToken)
			return bytes.Equal(ba, bb) && ra.Header.Get("ETag") == rb.Header.Get("ETag") && len(ba) > 0 &&
				strings.Contains(string(ba), "docs")
		})
	}
}

// TestTheAdminTokenMustDifferFromTheIngressToken: an admin token equal to the ingress
// token (both configured, or one token file a link to the other) gave every ingress,
// which holds the ingress token, the admin's rights. The node refuses to start, naming
// both settings, whichever way the tokens came.
func TestTheAdminTokenMustDifferFromTheIngressToken(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	cfg.Admin.Token = cfg.Ingress.Token
	if _, err := node.New(t.Context(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "admin.token") || !strings.Contains(err.Error(), "ingress.token") {
		t.Errorf("configured tokens equal: %v, want refused naming both", err)
	}
	cfg = testConfig(t, "vps-a", t.TempDir())
	cfg.Admin.Token, cfg.Ingress.Token = "", ""
	if err := os.WriteFile(filepath.Join(cfg.StateDir, "ingress-token"), []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ingress-token", filepath.Join(cfg.StateDir, "admin-token")); err != nil {
		t.Fatal(err)
	}
	if _, err := node.New(t.Context(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "hold the same token") {
		t.Errorf("token files linked: %v, want refused", err)
	}
}
