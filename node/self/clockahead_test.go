package self_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// aYearAhead is a node record's seen a year ahead of this machine's clock: a node whose
// clock ran ahead and then died, or a planted record.
func aYearAhead() string {
	return time.Now().Add(8760 * time.Hour).UTC().Format(time.RFC3339Nano)
}

// startOverAPlantedRecord starts node name (on address, when given) with a 100 ms
// heartbeat and a 1 min TTL over a store holding record at nodes/<planted>.json, and
// waits until it is ready and has read that record.
func startOverAPlantedRecord(t *testing.T, name, address, planted, record string) *testnode.Node {
	t.Helper()
	storeDir := t.TempDir()
	cfg := testnode.Config(t, name, storeDir)
	if address != "" {
		cfg.Node.Address = address
	}
	cfg.Reconcile.Heartbeat = ptypes.Duration(100 * time.Millisecond)
	cfg.Reconcile.NodeTTL = ptypes.Duration(time.Minute)
	st, err := dir.New(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.PutRaw(t, st, fleet.NodeKey(planted), []byte(record))
	n := testnode.Start(t, cfg)
	n.WaitReady()
	select {
	case <-n.Exited():
		t.Fatalf("the node stopped: %v", n.Err())
	default:
	}
	waitHeartbeatsAfterView(t, n, planted)
	return n
}

// TestARecordDatedBeyondTheTTLAheadHoldsNoAddressAndIsNotRouted: a record of another
// node dated more than reconcile.nodeTTL ahead of this node's clock, on this node's
// address, is not live (fleet.NodeLive): the node starts (warning at start, naming the
// record and the skew), the render drops it from the API upstreams, /v1/status lists it
// stale with a skipped entry, and no address conflict is reported.
func TestARecordDatedBeyondTheTTLAheadHoldsNoAddressAndIsNotRouted(t *testing.T) {
	ghost := fmt.Sprintf(`{"name":"ghost","address":"127.0.0.44","apiPort":7400,"seen":%q,"boot":{"node":"elsewhere","id":"b00b"}}`, aYearAhead())
	n := startOverAPlantedRecord(t, "vps-b", "127.0.0.44", "ghost", ghost)

	s := testnode.StatusOf(t, n)
	for _, sn := range s.Nodes {
		if sn.Name == "ghost" && !sn.Stale {
			t.Errorf("/v1/status lists the record dated a year ahead as live: %+v", sn)
		}
	}
	var reported bool
	for _, sk := range s.Skipped {
		reported = reported || (sk.Object == "nodes/ghost.json" && strings.Contains(sk.Reason, "ahead of this node's clock"))
	}
	if !reported {
		t.Errorf("/v1/status skipped does not report the record dated ahead: %+v", s.Skipped)
	}
	resp, body := n.Get("/v1/ingress/routes", testnode.IngressToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("routes: %d %s", resp.StatusCode, body)
	}
	if got := testnode.APINodes(t, body); !slices.Equal(got, []string{"vps-b"}) {
		t.Errorf("api upstreams %v, want [vps-b]: the record dated ahead is routed", got)
	}
	if w := addressWarningOf(t, n); w != nil {
		t.Errorf("the record dated ahead is reported as holding the address: %v", w)
	}
	if !testnode.MetricLine(t, n, "scafo_node_address_conflict 0") {
		t.Error("scafo_node_address_conflict is not 0")
	}
	if logs := n.Logs.String(); !strings.Contains(logs, "record=nodes/ghost.json") || !namesAYearsSkew(logs) {
		t.Errorf("no warning naming the record and the skew:\n%s", logs)
	}
}

// namesAYearsSkew: logs carry a skew of a year (rounded to the second, less the time
// the test took to start the node).
func namesAYearsSkew(logs string) bool {
	return strings.Contains(logs, "skew=8760h0m0s") || strings.Contains(logs, "skew=8759h59m")
}

// TestARecordDatedBeyondTheTTLAheadHoldsNoName: this node's own key holding another
// node's record dated more than reconcile.nodeTTL ahead does not stop it from starting,
// and is not reported as a duplicate once this node has overwritten it.
func TestARecordDatedBeyondTheTTLAheadHoldsNoName(t *testing.T) {
	planted := fmt.Sprintf(`{"name":"vps-c","address":"127.0.0.45","apiPort":7400,"seen":%q,"boot":{"node":"elsewhere","id":"b00b"}}`, aYearAhead())
	n := startOverAPlantedRecord(t, "vps-c", "", "vps-c", planted)
	if got := testnode.StoredRecord(t, n.St, "vps-c")["address"]; got != n.Cfg.Node.Address {
		t.Fatalf("the node's record holds address %v, want %s", got, n.Cfg.Node.Address)
	}
	if d := duplicateOf(t, n); d != "" {
		t.Fatalf("the record dated ahead is reported as a duplicate: %s", d)
	}
	if logs := n.Logs.String(); !strings.Contains(logs, "record=nodes/vps-c.json") || !namesAYearsSkew(logs) {
		t.Errorf("no warning at start naming the record and the skew:\n%s", logs)
	}
}
