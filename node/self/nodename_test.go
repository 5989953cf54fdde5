package self_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// duplicateOf is the address status.duplicateName names ("" when none is reported).
func duplicateOf(t *testing.T, n *testnode.Node) string {
	t.Helper()
	d, _ := testnode.StatusMap(t, n)["duplicateName"].(map[string]any)
	a, _ := d["address"].(string)
	return a
}

// TestDuplicateNodeNameRefusedAtStart (issue 12, item 10): a second node configured with
// the name of a live node (another state dir: another machine) refuses to start, naming
// the other record's address and age, and writes nothing; the same node restarted on its
// own state dir right away is not refused by its previous run's record.
func TestDuplicateNodeNameRefusedAtStart(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	cfgA := testnode.Config(t, "vps-a", storeDir)
	cfgA.Node.Address = "127.0.0.11"
	a := testnode.Start(t, cfgA)
	a.WaitReady()
	before := testnode.StoredRecord(t, a.St, "vps-a")

	cfgB := testnode.Config(t, "vps-a", storeDir)
	cfgB.Node.Address = "127.0.0.12"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfgB.Node.APIPort = ln.Addr().(*net.TCPAddr).Port
	b, err := node.NewWithStore(cfgB, slog.New(slog.NewTextHandler(io.Discard, nil)), a.St, testnode.IngressToken, testnode.AdminToken)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = b.Run(ctx, ln)
		cancel()
	}
	if err == nil {
		t.Fatal("a second node with a live node's name started")
	}
	if msg := err.Error(); !strings.Contains(msg, "127.0.0.11:") || !strings.Contains(msg, " ago") {
		t.Fatalf("the refusal does not name the other record's address and age: %v", err)
	}
	t.Logf("refused: %v", err)
	if after := testnode.StoredRecord(t, a.St, "vps-a"); after["address"] != "127.0.0.11" || after["seen"] != before["seen"] {
		t.Fatalf("the refused node wrote the record: %v", after)
	}

	// A crash-and-restart of the same node (same state dir) is not a duplicate.
	a.Stop()
	a2 := testnode.Start(t, cfgA)
	a2.WaitReady()
	select {
	case <-a2.Exited():
		t.Fatalf("the restarted node stopped: %v", a2.Err())
	default:
	}
	if d := duplicateOf(t, a2); d != "" {
		t.Fatalf("the restarted node reports its previous run as a duplicate: %s", d)
	}
	if !testnode.MetricLine(t, a2, "scafo_node_name_conflict 0") {
		t.Fatal("scafo_node_name_conflict is not 0 after a restart")
	}
}

// hidingStore hides key from the first Get: a node started at the same moment as
// another one (both checked the name before either wrote its record).
type hidingStore struct {
	store.Store
	key    string
	hidden atomic.Bool
}

func (h *hidingStore) Get(ctx context.Context, key string) (store.Object, error) {
	if key == h.key && h.hidden.CompareAndSwap(false, true) {
		return store.Object{}, store.ErrNotFound
	}
	return h.Store.Get(ctx, key)
}

// TestDuplicateNodeNameAtRuntimeIsReported (issue 12, item 10): two live nodes with one
// name overwrite each other's record; each reports the other (error log, /v1/status
// duplicateName, scafo_node_name_conflict 1), and the report clears once the other's
// record is older than the TTL.
func TestDuplicateNodeNameAtRuntimeIsReported(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	cfg := func(addr string) *node.Config {
		c := testnode.Config(t, "vps-a", storeDir)
		c.Node.Address = addr
		c.Reconcile.Heartbeat = ptypes.Duration(100 * time.Millisecond)
		c.Reconcile.NodeTTL = ptypes.Duration(time.Second)
		return c
	}
	a := testnode.Start(t, cfg("127.0.0.11"))
	a.WaitReady()
	b := testnode.StartWithStore(t, cfg("127.0.0.12"), &hidingStore{Store: a.St, key: fleet.NodeKey("vps-a")})

	for _, c := range []struct {
		n     *testnode.Node
		other string
	}{{a, "127.0.0.12"}, {b, "127.0.0.11"}} {
		nodetest.WaitFor(t, 5*time.Second, c.n.Cfg.Node.Address+" reports "+c.other, func() bool {
			return strings.HasPrefix(duplicateOf(t, c.n), c.other+":")
		})
		if !testnode.MetricLine(t, c.n, "scafo_node_name_conflict 1") {
			t.Errorf("%s: scafo_node_name_conflict is not 1", c.n.Cfg.Node.Address)
		}
		if logs := c.n.Logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, c.other) {
			t.Errorf("%s: no error logged naming %s:\n%s", c.n.Cfg.Node.Address, c.other, logs)
		}
	}

	// The other node goes away: the report clears once its record would be stale.
	b.Stop()
	nodetest.WaitFor(t, 5*time.Second, "the report to clear", func() bool {
		return duplicateOf(t, a) == "" && testnode.MetricLine(t, a, "scafo_node_name_conflict 0")
	})
}

// TestOverwrittenOwnRecordIsReportedWhateverItsClock: a node writes its record
// conditionally on its own last write, so a write by another node of the same name is
// caught at the next heartbeat even when that node's clock is far behind (its record
// looks older than this process and the reconcile pass alone would not count it).
func TestOverwrittenOwnRecordIsReportedWhateverItsClock(t *testing.T) {
	t.Parallel()
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Reconcile.Heartbeat = ptypes.Duration(100 * time.Millisecond)
	cfg.Reconcile.NodeTTL = ptypes.Duration(time.Minute)
	n := testnode.Start(t, cfg)
	n.WaitReady()
	skewed := fmt.Sprintf(`{"name":"vps-a","address":"10.9.9.9","apiPort":7400,"seen":%q,"boot":{"node":"elsewhere","id":"b00b"}}`,
		time.Now().Add(-30*time.Second).UTC().Format(time.RFC3339Nano))
	nodetest.PutRaw(t, n.St, fleet.NodeKey("vps-a"), []byte(skewed))
	nodetest.WaitFor(t, 5*time.Second, "the overwrite reported", func() bool {
		return strings.HasPrefix(duplicateOf(t, n), "10.9.9.9:")
	})
	if !testnode.MetricLine(t, n, "scafo_node_name_conflict 1") {
		t.Fatal("scafo_node_name_conflict is not 1")
	}
	// The report may come from the reconcile pass that read the other record before
	// the next heartbeat rewrote it: wait for that rewrite (100ms heartbeats).
	nodetest.WaitFor(t, 5*time.Second, "the node writing its own record again", func() bool {
		return testnode.StoredRecord(t, n.St, "vps-a")["address"] == "127.0.0.1"
	})
}
