package self_test

import (
	"context"
	"errors"
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

// runToRefusal runs a node built from cfg over st and returns why it stopped: its
// refusal, or nil when it started and ran until the test's deadline.
func runToRefusal(t *testing.T, cfg *node.Config, st store.Store) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Node.APIPort = ln.Addr().(*net.TCPAddr).Port
	srv, err := node.NewWithStore(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), st, testnode.IngressToken, testnode.AdminToken)
	if err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return srv.Run(ctx, ln)
}

// addressWarningOf is status.addressWarning decoded loosely (nil when none is reported).
func addressWarningOf(t *testing.T, n *testnode.Node) map[string]any {
	t.Helper()
	w, _ := testnode.StatusMap(t, n)["addressWarning"].(map[string]any)
	return w
}

// TestSecondNodeOnALiveNodesAddressIsRefusedAtStart: a node whose node.address a live
// node of another name publishes refuses to start, naming the setting, that node and its
// age, and writes no record; once that record is older than reconcile.nodeTTL the
// address is free.
func TestSecondNodeOnALiveNodesAddressIsRefusedAtStart(t *testing.T) {
	storeDir := t.TempDir()
	cfgA := testnode.Config(t, "vps-a", storeDir)
	cfgA.Node.Address = "127.0.0.21"
	a := testnode.Start(t, cfgA)
	a.WaitReady()

	cfgB := testnode.Config(t, "vps-b", storeDir)
	cfgB.Node.Address = "127.0.0.21"
	err := runToRefusal(t, cfgB, a.St)
	if err == nil {
		t.Fatal("a second node on a live node's address started")
	}
	for _, want := range []string{`node.address "127.0.0.21"`, `"vps-a"`, " ago"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %s: %v", want, err)
		}
	}
	if _, gerr := a.St.Get(context.Background(), fleet.NodeKey("vps-b")); !errors.Is(gerr, store.ErrNotFound) {
		t.Fatalf("the refused node wrote its record (err %v)", gerr)
	}

	// The same address written as an IPv4-mapped IPv6 address is the same socket.
	cfgB.Node.Address = "::ffff:127.0.0.21"
	if err := runToRefusal(t, cfgB, a.St); err == nil || !strings.Contains(err.Error(), `"vps-a"`) {
		t.Fatalf("a mapped spelling of a live node's address was not refused: %v", err)
	}
}

// TestAStaleRecordDoesNotHoldItsAddress: a record older than reconcile.nodeTTL (a node
// gone) does not keep its address from a new node.
func TestAStaleRecordDoesNotHoldItsAddress(t *testing.T) {
	gone := fmt.Sprintf(`{"name":"vps-old","address":"127.0.0.22","apiPort":7400,"seen":%q,"boot":{"node":"elsewhere","id":"b00b"}}`,
		time.Now().Add(-2*time.Minute).UTC().Format(time.RFC3339Nano))
	// Its view of the fleet holds the stale record (startOverAPlantedRecord waits for
	// that); nothing is reported.
	n := startOverAPlantedRecord(t, "vps-b", "127.0.0.22", "vps-old", gone)
	if w := addressWarningOf(t, n); w != nil {
		t.Fatalf("a stale record's address is reported: %v", w)
	}
	if !testnode.MetricLine(t, n, "scafo_node_address_conflict 0") {
		t.Fatal("scafo_node_address_conflict is not 0")
	}
}

// waitHeartbeatsAfterView waits until n's status lists node (the reconcile pass read
// its record), then for two more writes of n's own record: the heartbeat checks the
// fleet after each write, so the second one follows a check that saw node.
func waitHeartbeatsAfterView(t *testing.T, n *testnode.Node, node string) {
	t.Helper()
	nodetest.WaitFor(t, 5*time.Second, n.Cfg.Node.Name+" lists "+node, func() bool {
		for _, s := range testnode.StatusOf(t, n).Nodes {
			if s.Name == node {
				return true
			}
		}
		return false
	})
	for i := 0; i < 2; i++ {
		before := testnode.StoredRecord(t, n.St, n.Cfg.Node.Name)["seen"]
		nodetest.WaitFor(t, 5*time.Second, "a heartbeat of "+n.Cfg.Node.Name, func() bool {
			return testnode.StoredRecord(t, n.St, n.Cfg.Node.Name)["seen"] != before
		})
	}
}

// listHidingStore answers the first LIST of nodes/ with nothing: a node started at the
// same moment as another one (both checked the address before either wrote its record).
type listHidingStore struct {
	store.Store
	hidden atomic.Bool
}

func (h *listHidingStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if prefix == fleet.PrefixNodes && h.hidden.CompareAndSwap(false, true) {
		return nil, nil
	}
	return h.Store.List(ctx, prefix)
}

// TestSharedAddressAtRuntimeIsReported: two live nodes of different names on one
// address, both past the start check, each report the other (an error log,
// /v1/status addressWarning.sharedWith, scafo_node_address_conflict 1), and the report
// clears once the other's record is stale.
func TestSharedAddressAtRuntimeIsReported(t *testing.T) {
	storeDir := t.TempDir()
	cfg := func(name string) *node.Config {
		c := testnode.Config(t, name, storeDir)
		c.Node.Address = "127.0.0.23"
		c.Reconcile.Heartbeat = ptypes.Duration(100 * time.Millisecond)
		c.Reconcile.NodeTTL = ptypes.Duration(time.Second)
		return c
	}
	a := testnode.Start(t, cfg("vps-a"))
	a.WaitReady()
	b := testnode.StartWithStore(t, cfg("vps-b"), &listHidingStore{Store: a.St})
	b.WaitReady()

	for _, c := range []struct {
		n     *testnode.Node
		other string
	}{{a, "vps-b"}, {b, "vps-a"}} {
		nodetest.WaitFor(t, 5*time.Second, c.n.Cfg.Node.Name+" reports "+c.other, func() bool {
			w := addressWarningOf(t, c.n)
			return w != nil && fmt.Sprint(w["sharedWith"]) == "["+c.other+"]"
		})
		if !testnode.MetricLine(t, c.n, "scafo_node_address_conflict 1") {
			t.Errorf("%s: scafo_node_address_conflict is not 1", c.n.Cfg.Node.Name)
		}
		if logs := c.n.Logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "node.address") || !strings.Contains(logs, c.other) {
			t.Errorf("%s: no error logged naming node.address and %s:\n%s", c.n.Cfg.Node.Name, c.other, logs)
		}
	}

	b.Stop()
	nodetest.WaitFor(t, 5*time.Second, "the report to clear", func() bool {
		return addressWarningOf(t, a) == nil && testnode.MetricLine(t, a, "scafo_node_address_conflict 0")
	})
}

// TestLoopbackAddressInAFleetIsReported: a single node on 127.0.0.1 reports nothing;
// once a second live node joins, a loopback node.address is reported (a warning naming
// node.address, /v1/status addressWarning.loopback, scafo_node_address_loopback 1)
// until the fleet is one node again.
func TestLoopbackAddressInAFleetIsReported(t *testing.T) {
	storeDir := t.TempDir()
	cfg := func(name string) *node.Config {
		c := testnode.Config(t, name, storeDir)
		c.Reconcile.Heartbeat = ptypes.Duration(100 * time.Millisecond)
		c.Reconcile.NodeTTL = ptypes.Duration(time.Second)
		return c
	}
	a := testnode.Start(t, cfg("vps-a")) // 127.0.0.1
	a.WaitReady()
	waitHeartbeatsAfterView(t, a, "vps-a")
	if w := addressWarningOf(t, a); w != nil {
		t.Fatalf("a single node on 127.0.0.1 is reported: %v", w)
	}
	if !testnode.MetricLine(t, a, "scafo_node_address_loopback 0") {
		t.Fatal("scafo_node_address_loopback is not 0 on a single node")
	}
	if strings.Contains(a.Logs.String(), "node.address") {
		t.Fatalf("a single node on 127.0.0.1 logs about node.address:\n%s", a.Logs.String())
	}

	b := testnode.Start(t, cfg("vps-b"))
	b.WaitReady()
	for _, n := range []*testnode.Node{a, b} {
		nodetest.WaitFor(t, 5*time.Second, n.Cfg.Node.Name+" reports its loopback address", func() bool {
			w := addressWarningOf(t, n)
			return w != nil && w["loopback"] == true && w["liveNodes"] == float64(2) && w["address"] == n.Cfg.Node.Address
		})
		if !testnode.MetricLine(t, n, "scafo_node_address_loopback 1") {
			t.Errorf("%s: scafo_node_address_loopback is not 1", n.Cfg.Node.Name)
		}
		if !testnode.MetricLine(t, n, "scafo_node_address_conflict 0") {
			t.Errorf("%s: scafo_node_address_conflict is not 0 (distinct addresses)", n.Cfg.Node.Name)
		}
		if logs := n.Logs.String(); !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "node.address") {
			t.Errorf("%s: no warning naming node.address:\n%s", n.Cfg.Node.Name, logs)
		}
	}

	b.Stop()
	nodetest.WaitFor(t, 5*time.Second, "the report to clear once vps-b is stale", func() bool {
		return addressWarningOf(t, a) == nil && testnode.MetricLine(t, a, "scafo_node_address_loopback 0")
	})
}

// TestABootlessRecordOnTheAddressIsReportedNotRefused: a live record without a boot
// identity (a node that predates it, a record planted by hand) on this node's address
// does not stop the node, as with the name rule; it is warned about at start and
// reported while it stays live.
func TestABootlessRecordOnTheAddressIsReportedNotRefused(t *testing.T) {
	old := fmt.Sprintf(`{"name":"vps-old","address":"127.0.0.24","apiPort":7400,"seen":%q}`, time.Now().UTC().Format(time.RFC3339Nano))
	n := startOverAPlantedRecord(t, "vps-b", "127.0.0.24", "vps-old", old)
	nodetest.WaitFor(t, 5*time.Second, "vps-old reported", func() bool {
		w := addressWarningOf(t, n)
		return w != nil && fmt.Sprint(w["sharedWith"]) == "[vps-old]"
	})
	if logs := n.Logs.String(); !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "without a boot identity") {
		t.Fatalf("no warning at start:\n%s", logs)
	}
	if !testnode.MetricLine(t, n, "scafo_node_address_conflict 1") {
		t.Fatal("scafo_node_address_conflict is not 1")
	}
}
