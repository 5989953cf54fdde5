package reconcile_test

import (
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/store"
)

// Heartbeats bump no serial, yet a heartbeating peer never goes stale: liveness comes
// from the modification times of one LIST of nodes/ per heartbeat interval. Once its
// heartbeats stop, it goes stale within the TTL plus a heartbeat interval.
func TestHeartbeatsBumpNothingAndKeepPeersLive(t *testing.T) {
	const (
		heartbeat = 100 * time.Millisecond
		ttl       = 600 * time.Millisecond
	)
	storeDir := t.TempDir()
	var nodes []*testnode.Node
	for _, name := range []string{"vps-a", "vps-b"} {
		cfg := testnode.Config(t, name, storeDir)
		cfg.Reconcile.Interval = ptypes.Duration(20 * time.Millisecond)
		cfg.Reconcile.Heartbeat = ptypes.Duration(heartbeat)
		cfg.Reconcile.NodeTTL = ptypes.Duration(ttl)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, testnode.Start(t, cfg))
	}
	for _, n := range nodes {
		n.WaitReady()
	}
	peerStale := func(n *testnode.Node, peer string) (found, stale bool) {
		for _, ns := range testnode.StatusOf(t, n).Nodes {
			if ns.Name == peer {
				return true, ns.Stale
			}
		}
		return false, false
	}
	nodetest.WaitFor(t, 5*time.Second, "vps-a sees vps-b", func() bool {
		found, stale := peerStale(nodes[0], "vps-b")
		return found && !stale
	})
	serial, _, err := store.ReadSerial(t.Context(), nodes[0].St)
	if err != nil {
		t.Fatal(err)
	}
	// Four TTLs of heartbeats: the serial stays put, and vps-b never looks stale.
	nodetest.Throughout(t, 4*ttl, 25*time.Millisecond, "vps-a sees heartbeating vps-b, not stale", func() bool {
		found, stale := peerStale(nodes[0], "vps-b")
		if !found || stale {
			t.Logf("vps-a: heartbeating vps-b found=%v stale=%v", found, stale)
		}
		return found && !stale
	})
	if now, _, _ := store.ReadSerial(t.Context(), nodes[0].St); now != serial {
		t.Errorf("the serial moved from %d to %d over %s of heartbeats alone", serial, now, 4*ttl)
	}
	stopped := time.Now()
	nodes[1].Stop()
	nodetest.WaitFor(t, 10*time.Second, "vps-a marks stopped vps-b stale", func() bool {
		_, stale := peerStale(nodes[0], "vps-b")
		return stale
	})
	if took := time.Since(stopped); took > ttl+heartbeat+time.Second {
		t.Errorf("vps-b went stale %s after it stopped, want within TTL %s + heartbeat %s (+1s slack)", took, ttl, heartbeat)
	}
}
