package fleetwrite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// TestATenantsRoutingChangesAreBudgetedFleetWide (issue 25 item 5): every readiness or
// port change of a tenant's instance makes every Traefik of the fleet reload, and
// writes.rate is per token per node, so a tenant alternating readiness through the
// nodes of its placement reloaded the fleet several times a second. The account now
// has one budget of routing changes for the whole fleet: past it, both nodes answer 429
// naming the budget, with Retry-After, and count the refusal; a no-op costs nothing;
// the admin is never refused.
func TestATenantsRoutingChangesAreBudgetedFleetWide(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	var nodes []*testnode.Node
	for _, name := range []string{"vps-a", "vps-b"} {
		cfg := testnode.Config(t, name, storeDir)
		cfg.Writes.Rate, cfg.Writes.Burst = 1000, 1000 // not the per-token limit
		cfg.Writes.RouteBurst, cfg.Writes.RoutePerMinute = 6, 0.01
		nodes = append(nodes, testnode.Start(t, cfg))
	}
	a, b := nodes[0], nodes[1]
	a.WaitReady()
	b.WaitReady()
	a.Must(201, "PUT", "/v1/apps/evil", testnode.AdminToken, `{"account":"mallory","placement":["vps-a","vps-b"]}`)
	_, tok := testnode.IssueToken(t, a, "mallory", "evil", `"instance"`)
	for _, n := range nodes {
		n.Must(201, "POST", "/v1/node/instances/evil", tok, `{}`)
	}
	ready := map[*testnode.Node]bool{}
	changes := 0
	for i := 0; ; i++ {
		n := nodes[i%2]
		body := fmt.Sprintf(`{"ready":%v}`, !ready[n])
		resp, rb := n.Do("PUT", "/v1/node/instances/evil", tok, body)
		if resp.StatusCode == 429 {
			break
		}
		if resp.StatusCode != 200 {
			t.Fatalf("change %d on %s: %d %s", i+1, n.Cfg.Node.Name, resp.StatusCode, rb)
		}
		ready[n] = !ready[n]
		changes++
		// The same state again: nothing routed changes, so it costs nothing.
		n.Must(200, "PUT", "/v1/node/instances/evil", tok, fmt.Sprintf(`{"ready":%v}`, ready[n]))
		if changes > 30 {
			t.Fatalf("%d readiness flips through two nodes, none refused (budget of 6 for the fleet)", changes)
		}
	}
	if changes != 6 {
		t.Errorf("%d routing changes passed through two nodes, want the account's budget of 6 (fleet-wide, not per node)", changes)
	}
	for _, n := range nodes {
		resp, rb := n.Do("PUT", "/v1/node/instances/evil", tok, fmt.Sprintf(`{"ready":%v}`, !ready[n]))
		var e api.Error
		json.Unmarshal(rb, &e)
		if resp.StatusCode != 429 || e.Error != "routing change budget" ||
			!strings.Contains(e.Detail, "writes.routeBurst") || !strings.Contains(e.Detail, "mallory") {
			t.Errorf("%s past the budget: %d %s, want 429 naming the routing change budget", n.Cfg.Node.Name, resp.StatusCode, rb)
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Errorf("%s: Retry-After %q", n.Cfg.Node.Name, resp.Header.Get("Retry-After"))
		}
		// A no-op is still free past the budget.
		n.Must(200, "PUT", "/v1/node/instances/evil", tok, fmt.Sprintf(`{"ready":%v}`, ready[n]))
		_, m := n.Get("/metrics", "")
		if !strings.Contains(string(m), `scafo_routing_changes_refused_total{change="instance"}`) {
			t.Errorf("%s: no scafo_routing_changes_refused_total{change=\"instance\"} in /metrics", n.Cfg.Node.Name)
		}
	}
	// The admin is never refused.
	for i := range 8 {
		nodes[i%2].Must(200, "PUT", "/v1/node/instances/evil", testnode.AdminToken, fmt.Sprintf(`{"ready":%v}`, i%4 < 2))
	}
}

// TestADeployOfATenPlacementAppPassesTheDefaultRouteBudget: the defaults must never
// refuse an ordinary tenant. A 10-placement application's first rollout (an instance
// made ready on each node), a deploy that drains each node then moves it to the idle
// port of its pair, and the same drained rollback (50 routing changes, back to back,
// through 10 nodes of one store) all pass at NewConfig's writes.routeBurst and
// writes.routePerMinute.
func TestADeployOfATenPlacementAppPassesTheDefaultRouteBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	def := node.NewConfig().Writes
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ws []*fleetwrite.Writer
	var placement []string
	for i := range 10 {
		reg, err := fleetwrite.OpenRegistry(filepath.Join(t.TempDir(), "instances.json"), 24000, 24099, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("vps-%d", i)
		placement = append(placement, name)
		ws = append(ws, fleetwrite.New(fleetwrite.Config{
			Node:        name,
			RouteBudget: fleetwrite.RouteBudget{Burst: def.RouteBurst, PerMinute: def.RoutePerMinute},
		}, st, &store.Identity{}, reg, log))
	}
	app, _, _, err := ws[0].PutApp(ctx, fleetwrite.Actor{Admin: true}, "shop", fleet.App{Account: "acme", Placement: placement}, "")
	if err != nil {
		t.Fatal(err)
	}
	tok := fleetwrite.Actor{Token: fleet.TokenRecord{ID: "ci", Account: "acme", App: "shop", AppID: app.ID, Roles: []string{fleet.RoleInstance}}}
	pairs := make([][2]int, len(ws))
	for i, w := range ws {
		inst, _, err := w.AllocateInstance(ctx, tok, "shop")
		if err != nil {
			t.Fatal(err)
		}
		pairs[i] = inst.Ports
		if _, err := w.SetInstance(ctx, tok, "shop", &inst.Port, true); err != nil {
			t.Fatalf("first rollout on %s: %v", w.Instances()[0].Node, err)
		}
	}
	for step, to := range []int{1, 0} { // deploy to the idle member, then roll back
		for i, w := range ws {
			if _, err := w.SetInstance(ctx, tok, "shop", nil, false); err != nil {
				t.Fatalf("step %d, draining node %d: %v", step, i, err)
			}
			if _, err := w.SetInstance(ctx, tok, "shop", &pairs[i][to], true); err != nil {
				t.Fatalf("step %d, moving node %d within its pair: %v", step, i, err)
			}
		}
	}
}
