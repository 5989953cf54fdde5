package node_test

import (
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
)

// This stays in the root package because it counts the publisher's renders
// (n.Srv.Pub().Renders()); the other applied-probe tests are node/ingress's.

// TestAppliedProbeBodiesAreStableAndCached: the body of one (state, ingress, probe) is
// the same bytes on every poll and from a second node of the fleet, is rendered once
// per revision, and only its probe's objects differ from the plain body.
func TestAppliedProbeBodiesAreStableAndCached(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	a := startNode(t, reportsConfig(t, "vps-a", storeDir))
	a.WaitReady()
	b := startNode(t, reportsConfig(t, "vps-b", storeDir))
	b.WaitReady()
	seedFleet(t, a.St, "shop")
	waitFor(t, 5*time.Second, "both nodes on one revision", func() bool {
		ra, _ := a.Get("/v1/ingress/traefik", testIngressToken)
		rb, _ := b.Get("/v1/ingress/traefik", testIngressToken)
		return ra.Header.Get(api.HeaderRevision) == rb.Header.Get(api.HeaderRevision)
	})
	poll := func(n *testNode) []byte {
		// Both nodes reached at one name, as behind one local address.
		_, body := n.Get("/v1/ingress/traefik", testIngressToken, api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, testProbeURL)
		return body
	}
	first := poll(a)
	renders := a.Srv.Pub().Renders()
	for range 5 {
		if got := poll(a); string(got) != string(first) {
			t.Fatal("two polls of one state got different probe bodies")
		}
	}
	if r := a.Srv.Pub().Renders() - renders; r != 0 {
		t.Errorf("5 polls of one state rendered %d bodies, want 0 (cached)", r)
	}
	// From vps-b (another URL: its callback service differs in that one URL alone).
	other := strings.ReplaceAll(string(poll(b)), b.URL, a.URL)
	if other != string(first) {
		t.Error("vps-b's probe body differs from vps-a's beyond the node URL")
	}
	_, plain := a.Get("/v1/ingress/traefik", testIngressToken)
	if callbackOf(t, plain) != "" || len(plain) >= len(first) {
		t.Error("the plain body carries the probe")
	}
}
