package node_test

import (
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// The other applied-probe tests are node/ingress's; that a probe body is rendered once
// per (revision, ingress, probe) and cached is publish's
// TestProbeBodiesAreCachedPerIngressAndBounded.

// TestAppliedProbeBodiesAreStableAndCached: the body of one (state, ingress, probe) is
// the same bytes on every poll and from a second node of the fleet (but for the node's
// URL), and only its probe's objects differ from the plain body.
func TestAppliedProbeBodiesAreStableAndCached(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	a := testnode.NewStepped(t, reportsConfig(t, "vps-a", storeDir), nil)
	b := testnode.NewStepped(t, reportsConfig(t, "vps-b", storeDir), nil)
	seedFleet(t, a.St, "shop")
	a.Tick()
	b.Tick()
	a.MustPass() // b's record: both nodes on one revision
	if ra, rb := a.Get("/v1/ingress/traefik", testIngressToken), b.Get("/v1/ingress/traefik", testIngressToken); ra.Header().Get(api.HeaderRevision) != rb.Header().Get(api.HeaderRevision) {
		t.Fatalf("the two nodes serve revisions %q and %q", ra.Header().Get(api.HeaderRevision), rb.Header().Get(api.HeaderRevision))
	}
	poll := func(n *testnode.Stepped) []byte {
		// Both nodes reached at one name, as behind one local address.
		return n.Get("/v1/ingress/traefik", testIngressToken, api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, testProbeURL).Body.Bytes()
	}
	first := poll(a)
	if callbackOf(t, first) == "" {
		t.Fatalf("the probe body carries no callback: %s", first)
	}
	if got := poll(a); string(got) != string(first) {
		t.Fatal("two polls of one state got different probe bodies")
	}
	// From vps-b (another URL: its callback service differs in that one URL alone).
	a.Host, b.Host = "127.0.0.1:7400", "127.0.0.1:7401"
	first = poll(a)
	fromB := string(poll(b))
	if !strings.Contains(fromB, "http://"+b.Host) {
		t.Fatalf("vps-b's probe body does not name the URL it was reached at: %s", fromB)
	}
	if other := strings.ReplaceAll(fromB, "http://"+b.Host, "http://"+a.Host); other != string(first) {
		t.Errorf("vps-b's probe body differs from vps-a's beyond the node URL:\n%s\n%s", other, first)
	}
	plain := a.Get("/v1/ingress/traefik", testIngressToken).Body.Bytes()
	if callbackOf(t, plain) != "" || len(plain) >= len(first) {
		t.Error("the plain body carries the probe")
	}
}
