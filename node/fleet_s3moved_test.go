package node_test

// Fleet behaviours that ran on a real MinIO with whole nodes on listeners, now on the
// dir store, in process (testnode.Stepped): what an unnamed bump costs in store calls, a node
// run with different settings. What S3 adds is the backend's
// (storetest, s3's TestGetIfChangedIsOneConditionalRequest); the cost of a fleet is
// TestCostModel's; a store outage, a stale node and identical bytes across nodes are the
// simulator's (node/internal/fleetsim) and their owners' (reconcile, render/fleet).

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// putObjectNoBump writes a fleet object without bumping the serial (the caller bumps
// once for a batch).
func putObjectNoBump(t *testing.T, st store.Store, key string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), key, b, store.Condition{}); err != nil {
		t.Fatal(err)
	}
}

// ---- 1. cost of a pass ----

// TestAnUnnamedBumpReadsOnlyTheChangedObjects: k changed objects announced by a bump
// without names (an old node's, or a gap) cost one round of lists (apps/, domains/,
// nodes/), k GETs (the etags that moved) and the serial's re-check; the next pass is
// idle. The idle pass and a named bump are TestCostModel's, over a fleet.
func TestAnUnnamedBumpReadsOnlyTheChangedObjects(t *testing.T) {
	t.Parallel()
	const apps = 20
	cfg := fleetConfig(t, "vps-a", "127.0.0.2", 50*time.Millisecond, time.Hour, 4*time.Hour)
	writer := openDir(t, cfg.Store.Dir.Path)
	app := func(i int, health string) fleet.App {
		name := fmt.Sprintf("app-%02d", i)
		return fleet.App{Name: name, Account: "acme", Placement: []string{"vps-b"}, Health: &fleet.Health{Path: health}}
	}
	inst := map[string]fleet.Instance{}
	for i := range apps {
		putObject(t, writer, fmt.Sprintf("apps/app-%02d.json", i), app(i, "/"))
		inst[fmt.Sprintf("app-%02d", i)] = fleet.Instance{Port: 24000 + i, Ready: true}
	}
	putObject(t, writer, "nodes/vps-b.json", fleet.NodeRecord{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400,
		Instances: inst, Seen: time.Now().UTC()})
	n := testnode.NewStepped(t, cfg, nil)
	n.Tick()
	n.MustPass() // its own record, written by the start's heartbeat
	for round, k := range []int{1, 5, 20} {
		rev := n.Status().Revision
		for i := range k {
			putObjectNoBump(t, writer, fmt.Sprintf("apps/app-%02d.json", i), app(i, fmt.Sprintf("/healthz-%d", round)))
		}
		if _, err := store.BumpSerial(t.Context(), writer); err != nil {
			t.Fatal(err)
		}
		before := storeRequests(n.Srv)
		n.MustPass() // the change: serial, 3 lists, k GETs, the serial's re-check
		n.MustPass() // idle again
		if d, want := storeRequestsSince(n.Srv, before), map[string]int{"get_if_changed": 3, "list": 3, "get": k}; !maps.Equal(d, want) {
			t.Errorf("k=%d: store calls %v over the change pass and the next, want %v", k, d, want)
		}
		if got := n.Status().Revision; got == rev {
			t.Errorf("k=%d: revision did not move (%s)", k, got)
		}
	}
}

// ---- 2. several nodes on one store ----

// passAll runs one pass on every node.
func passAll(nodes []*testnode.Stepped) {
	for _, n := range nodes {
		n.MustPass()
	}
}

// A node started with different platform domains is named in every node's
// /v1/status (mismatchedSettings) and logged; nodes with the same settings are not.
func TestFleetNodeWithDifferentSettingsIsReported(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	var nodes []*testnode.Stepped
	for i, name := range []string{"vps-a", "vps-b", "vps-d"} {
		cfg := fleetConfig(t, name, fmt.Sprintf("127.0.0.%d", i+2), time.Second, time.Hour, 4*time.Hour)
		cfg.Store.Dir.Path = storeDir
		if name == "vps-d" {
			cfg.Platform.Domains = []string{"apps.other.example"}
		}
		nodes = append(nodes, testnode.NewStepped(t, cfg, nil))
	}
	for _, n := range nodes {
		n.Tick()
	}
	passAll(nodes)                                                              // every node has read every record
	for i, want := range [][]string{{"vps-d"}, {"vps-d"}, {"vps-a", "vps-b"}} { // from vps-d's side, the others differ
		n := nodes[i]
		if got := n.Status().MismatchedConfig; !slices.Equal(got, want) {
			t.Errorf("%s reports mismatched settings %v, want %v", n.Cfg.Node.Name, got, want)
		}
		logs := n.Logs.String()
		if !strings.Contains(logs, "different fleet settings") || !strings.Contains(logs, want[0]) {
			t.Errorf("%s: mismatch not logged:\n%s", n.Cfg.Node.Name, logs)
		}
	}
}
