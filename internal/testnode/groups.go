package testnode

import (
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// GroupConfig is vps-a's configuration with platform domains apps.example.com (default)
// and eu1.example.com (group eu-1); a group for a domain that is no platform domain is
// refused.
func GroupConfig(t testing.TB) *node.Config {
	t.Helper()
	cfg := Config(t, "vps-a", t.TempDir())
	cfg.Platform.Domains = []string{"apps.example.com", "eu1.example.com"}
	cfg.Platform.Groups = []string{"eu1.example.com=eu-1", "spare.example.com=spare"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "platform.groups[1]") {
		t.Fatalf("a group for a domain that is not a platform domain: %v, want an error naming platform.groups[1]", err)
	}
	cfg.Platform.Groups = []string{"eu1.example.com=eu-1"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// SeedGroups writes the fleet of "shop" (default), "blog" (eu-1) and "back" (eu-1, a
// path target of shop's custom domain shop.example.org... from another group), all on
// peer node vps-b.
func SeedGroups(t testing.TB, st store.Store) {
	t.Helper()
	eu := &fleet.Ingress{Group: "eu-1"}
	nodetest.Put(t, st, "apps/shop.json", fleet.App{Name: "shop", Account: "acme", Placement: []string{"vps-b"}})
	nodetest.Put(t, st, "apps/blog.json", fleet.App{Name: "blog", Account: "acme", Placement: []string{"vps-b"}, Ingress: eu})
	nodetest.Put(t, st, "apps/back.json", fleet.App{Name: "back", Account: "acme", Placement: []string{"vps-b"}, Ingress: eu})
	nodetest.Put(t, st, "domains/shop.example.org.json", fleet.Claim{Host: "shop.example.org", Account: "acme", App: "shop",
		Paths: map[string]string{"api": "back.eu1.example.com"}})
	nodetest.Put(t, st, "nodes/vps-b.json", fleet.NodeRecord{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400, Seen: time.Now().UTC(),
		Instances: map[string]fleet.Instance{"shop": {Port: 24001, Ready: true}, "blog": {Port: 24002, Ready: true}, "back": {Port: 24003, Ready: true}}})
}

// GroupNode runs a node of GroupConfig over the fleet of SeedGroups, settled.
func GroupNode(t testing.TB) *Node {
	t.Helper()
	n := Start(t, GroupConfig(t))
	SeedGroups(t, n.St)
	n.WaitReady()
	// Settled: the four hosts routed and both nodes' records read (this node's own record
	// can land a pass after the rest; a document taken earlier differs from later ones
	// for that reason alone).
	nodetest.WaitFor(t, 5*time.Second, "the fleet routed and both nodes in the api section", func() bool {
		d := RoutesDoc(t, n)
		api, _ := d["api"].(map[string]any)
		ups, _ := api["upstreams"].([]any)
		return len(HostsOf(d)) == 4 && len(ups) == 2
	})
	return n
}
