package fleetwrite_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
)

// TestPathMapEndToEndWithinOneInterval: a write kicks a reconcile pass (the node's
// wiring of fleetwrite.Config.OnCommit, node/wire.go), so with reconcile.interval far
// longer than the bound, only that kick publishes the map in time. The one whole-node
// test left here: it guards the node root's wiring, and belongs in node/ (no test there
// runs a long interval).
func TestPathMapEndToEndWithinOneInterval(t *testing.T) {
	t.Parallel()
	// Set the fleet up on the suite's short interval, then run the same node (same
	// store, same state) again with an interval far longer than the bound below: only
	// the pass the write kicks (publish-on-write) can publish the map in time.
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	setup := testnode.Start(t, cfg)
	setup.WaitReady()
	testnode.FleetOf(t, setup, "tito-classic", "tito-go")
	setup.Stop()

	const interval, bound = time.Minute, 2 * time.Second
	cfg.Reconcile.Interval = ptypes.Duration(interval)
	n := testnode.Start(t, cfg)
	n.WaitReady()
	before := testnode.RoutesDoc(t, n)
	if hosts := testnode.HostsOf(before); len(hosts) != 3 {
		t.Fatalf("after the restart the document routes %v, want the fleet's 3 hosts", hosts)
	}
	start := time.Now()
	n.Must(200, "PUT", testnode.PathsURL, testnode.AdminToken, `{"paths":{"paulca":"tito-go.apps.example.com"}}`)
	nodetest.WaitFor(t, bound, fmt.Sprintf("map published with reconcile.interval %s (only the write's kick can publish it in time)", interval), func() bool {
		p := testnode.PathsOf(t, n, "ti.to")
		return p["paulca"] == "tito-go.apps.example.com"
	})
	el := time.Since(start)
	if after := testnode.RoutesDoc(t, n); after["revision"] == before["revision"] {
		t.Fatalf("the map is routed but the revision %v did not move", after["revision"])
	}
	_, tr := n.Get("/v1/ingress/traefik", testnode.IngressToken)
	if !strings.Contains(string(tr), "Host(`ti.to`) && (Path(`/paulca`) || PathPrefix(`/paulca/`)") {
		t.Fatalf("no segment-exact router in the Traefik config:\n%s", tr)
	}
	t.Logf("PUT acknowledged → new revision published in %s (reconcile.interval %s)", el.Round(time.Millisecond), interval)
}
