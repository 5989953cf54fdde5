package node_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/render/fleet"
)

// §15, sticky ports: a node restarted with an empty state dir over the same store
// issues no port before it has read its own last record (503: server.go's
// RequireLastRecord), and then never gives another application a port that record
// still publishes (wire.go's LastRecord: the registry's HoldLastRecord). Hostile
// review 6, SP: only the simulator saw either, on one seed.
func TestARestartWithoutItsStateDirNeverGivesAwayItsLastRecordsPorts(t *testing.T) {
	t.Parallel()
	storeDir := filepath.Join(t.TempDir(), "store")
	cfg := testConfig(t, "vps-a", storeDir)
	cfg.Ports.Min, cfg.Ports.Max = 24000, 24001
	a := testnode.NewStepped(t, cfg, nil)
	a.Tick()
	for _, app := range []string{"app0", "app1"} {
		a.Must(201, "PUT", "/v1/apps/"+app, testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	}
	var got struct{ Port int }
	if err := json.Unmarshal(a.Must(201, "POST", "/v1/node/instances/app0", testAdminToken, `{}`), &got); err != nil || got.Port != 24000 {
		t.Fatalf("app0's instance: port %d (%v), want 24000, the range's first", got.Port, err)
	}
	a.Beat()
	var rec fleet.NodeRecord
	obj, err := a.St.Get(context.Background(), fleet.NodeKey("vps-a"))
	if err != nil || json.Unmarshal(obj.Value, &rec) != nil || rec.Instances["app0"].Port != 24000 {
		t.Fatalf("the record publishes %+v, want app0 on 24000", rec.Instances)
	}

	again := testConfig(t, "vps-a", storeDir) // a new, empty state dir
	again.Ports = cfg.Ports
	b := testnode.NewStepped(t, again, a.St)
	if r := b.Do("POST", "/v1/node/instances/app1", testAdminToken, `{}`); r.Code != 503 {
		t.Fatalf("an allocation before the node read its last record: %d %s, want 503", r.Code, r.Body)
	}
	b.Beat() // reads the record, then writes its own
	if err := json.Unmarshal(b.Must(201, "POST", "/v1/node/instances/app1", testAdminToken, `{}`), &got); err != nil || got.Port != 24001 {
		t.Fatalf("app1 was given port %d (%v), want 24001: 24000 is app0's in the last record", got.Port, err)
	}
}

// An application is never given the node's API port, even by a ports range covering it
// (server.go's Reserve; config validation refuses such a range, the registry holds the
// port regardless: hostile review 6, SP0).
func TestAPortsRangeCoveringTheAPIPortNeverHandsItOut(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	cfg.Node.APIPort = 7400
	cfg.Ports.Min, cfg.Ports.Max = 7400, 7401
	n := testnode.NewStepped(t, cfg, nil)
	n.Tick()
	for _, app := range []string{"app0", "app1"} {
		n.Must(201, "PUT", "/v1/apps/"+app, testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	}
	var got struct{ Port int }
	if err := json.Unmarshal(n.Must(201, "POST", "/v1/node/instances/app0", testAdminToken, `{}`), &got); err != nil || got.Port != 7401 {
		t.Fatalf("app0's instance in 7400..7401: port %d (%v), want 7401 (7400 is the API's)", got.Port, err)
	}
	if r := n.Do("POST", "/v1/node/instances/app1", testAdminToken, `{}`); r.Code == 201 || !strings.Contains(r.Body.String(), "no free port") {
		t.Fatalf("app1 beside app0's 7401 in 7400..7401: %d %s, want no free port", r.Code, r.Body)
	}
	// Nor may a tenant point its instance at the API port (the writer's APIPort: review 6, WX1).
	tok := n.Token("acme", "app1", `"instance"`)
	if r := n.Do("PUT", "/v1/node/instances/app1", tok, `{"port":7400,"ready":true}`); r.Code != 403 || !strings.Contains(r.Body.String(), "allocation range") {
		t.Fatalf("app1's token puts its instance on the API port 7400: %d %s, want 403 outside the allocation range", r.Code, r.Body)
	}
}
