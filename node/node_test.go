package node_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store"
)

// TestRoutingEndpointsDrainBeforeFirstPass: a node built and serving, before any pass,
// answers 503 draining on its routing endpoints and readyz, never a document.
func TestRoutingEndpointsDrainBeforeFirstPass(t *testing.T) {
	t.Parallel()
	n := newStepNode(t, testConfig(t, "vps-a", t.TempDir()), nil)
	n.beat() // the heartbeat may run first: still no pass
	assertDraining(t, n, "before the first pass")
}

func TestLastDocumentServedWhileStoreUnreadable(t *testing.T) {
	t.Parallel()
	storeDir := filepath.Join(t.TempDir(), "store")
	n := newStepNode(t, testConfig(t, "vps-a", storeDir), nil)
	seedFleet(t, n.St, "shop")
	n.start()
	before := n.get("/v1/ingress/traefik", testIngressToken).Body.Bytes()

	// Make the store unreadable: as root permission bits are ignored, so move the
	// directory away and leave a plain file in its place.
	if err := os.Rename(storeDir, storeDir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(storeDir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := n.pass(); err == nil {
			t.Fatalf("pass %d on an unreadable store succeeded", i)
		}
		rec := n.get("/v1/ingress/traefik", testIngressToken)
		if rec.Code != http.StatusOK || !bytes.Equal(before, rec.Body.Bytes()) {
			t.Fatalf("while the store is unreadable: %d, same bytes %v", rec.Code, bytes.Equal(before, rec.Body.Bytes()))
		}
	}
	if b := n.get("/v1/status", testAdminToken).Body.String(); !strings.Contains(b, `"reachable":false`) || !strings.Contains(b, "unreachableSince") {
		t.Fatalf("status while the store is unreadable: %s", b)
	}
	os.Remove(storeDir)
	if err := os.Rename(storeDir+".away", storeDir); err != nil {
		t.Fatal(err)
	}
	n.mustPass()
	if !n.storeState().Reachable {
		t.Fatal("the store is not reachable again once readable")
	}
}

func TestMalformedObjectSkippedNotWithdrawn(t *testing.T) {
	t.Parallel()
	n := newStepNode(t, testConfig(t, "vps-a", t.TempDir()), nil)
	seedFleet(t, n.St, "shop", "blog")
	n.start()
	if h := n.hosts(); h != "blog.apps.example.com,shop.apps.example.com" {
		t.Fatalf("hosts %s, want blog and shop", h)
	}

	// A malformed object is skipped and reported; everything else stays. It counts as
	// absent (not as its last good version), so a node restarted now derives the same
	// document as one that saw the good version.
	putRaw(t, n.St, "apps/broken.json", []byte(`{"name": "broken", "placement": [`))
	putRaw(t, n.St, "apps/blog.json", []byte(`{"name": 42}`))
	n.mustPass()
	if b := n.get("/v1/status", testAdminToken).Body.String(); !strings.Contains(b, "apps/broken.json") || !strings.Contains(b, "apps/blog.json") {
		t.Fatalf("status does not report both malformed objects: %s", b)
	}
	if h := n.hosts(); h != "shop.apps.example.com" {
		t.Fatalf("hosts %s, want blog skipped, shop kept", h)
	}
	if !strings.Contains(n.Logs.String(), "apps/broken.json") {
		t.Error("malformed object not logged")
	}
	// A second node starting on the same store serves the same bytes (once each has
	// read the other's record).
	m := newStepNode(t, testConfig(t, "vps-c", n.Cfg.Store.Dir.Path), nil)
	m.start()
	n.mustPass()
	a, b := n.get("/v1/ingress/traefik", testIngressToken).Body.Bytes(), m.get("/v1/ingress/traefik", testIngressToken).Body.Bytes()
	if !bytes.Equal(a, b) {
		t.Fatalf("two nodes on one store serve different documents:\n%s\n%s", a, b)
	}
}

// TestWipedStoreIsAnOutageNotAnEmptyFleet: a store directory replaced by an empty one
// (an unmounted volume, a wiped bucket) must not withdraw every route, even though this
// node's heartbeat keeps writing into it.
func TestWipedStoreIsAnOutageNotAnEmptyFleet(t *testing.T) {
	t.Parallel()
	storeDir := filepath.Join(t.TempDir(), "store")
	n := newStepNode(t, testConfig(t, "vps-a", storeDir), nil)
	seedFleet(t, n.St, "shop")
	n.start()
	// The store's identity is what tells a wiped store from a new one: the served
	// document was derived from a committed serial.
	rec := n.get("/v1/ingress/routes", testIngressToken)
	if s := rec.Header().Get("X-Scafo-Serial"); s == "" || s == "0" {
		t.Fatalf("the first document has serial %q, want one committed", s)
	}
	before := rec.Body.Bytes()

	if err := os.Rename(storeDir, storeDir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(storeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Heartbeats and passes over the wiped store: still the last good document, the
	// store reported unreachable, and no serial recreated.
	for range 5 {
		n.beat()
		n.pass()
		assertServing(t, n, before, "after the store was wiped")
	}
	if n.storeState().Reachable {
		t.Fatal("status: the wiped store reported reachable")
	}
	if _, err := os.Stat(filepath.Join(storeDir, "serial")); err == nil {
		t.Fatal("the node recreated the serial in a wiped store")
	}
	// Writes are refused while the store is not the one this node served.
	if rec := n.do("PUT", "/v1/apps/blog", testAdminToken, `{"account":"acme"}`); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("write to a wiped store: %d, want 503", rec.Code)
	}
	if _, err := os.Stat(filepath.Join(storeDir, "apps", "blog.json")); err == nil {
		t.Fatal("a write landed in the wiped store")
	}
	// Another writer recreating the serial (a fresh node on the wiped store) mints
	// another epoch: refused, and this node's heartbeats do not bump it along.
	if _, err := store.BumpSerial(context.Background(), n.St); err != nil {
		t.Fatal(err)
	}
	_, _, epoch := readSerial(t, n.St)
	for range 5 {
		n.beat()
		n.pass()
		assertServing(t, n, before, "a serial recreated by another writer")
	}
	if raw, c, e := readSerial(t, n.St); c != 1 || e != epoch {
		t.Fatalf("this node bumped the recreated serial: %q", raw)
	}
}

func TestTwoNodesOnOneStoreServeIdenticalBytes(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	a := newStepNode(t, testConfig(t, "vps-a", storeDir), nil)
	b := newStepNode(t, testConfig(t, "vps-c", storeDir), nil)
	seedFleet(t, a.St, "shop", "blog", "docs")
	a.start()
	b.start()
	a.mustPass() // b's record
	for _, p := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/ingress/traefik?prefer=vps-b"} {
		ra, rb := a.get(p, testIngressToken), b.get(p, testIngressToken)
		if !bytes.Equal(ra.Body.Bytes(), rb.Body.Bytes()) || ra.Header().Get("ETag") != rb.Header().Get("ETag") ||
			!strings.Contains(ra.Body.String(), "docs") {
			t.Errorf("%s: the two nodes serve different answers (ETag %q, %q):\n%s\n%s", p, ra.Header().Get("ETag"), rb.Header().Get("ETag"), ra.Body, rb.Body)
		}
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
