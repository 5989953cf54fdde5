package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// serverStatus returns Traefik's view ("UP"/"DOWN") of the server at addr (ip:port) in
// any service of our provider, or "" when no service lists it.
func (tr *traefik) serverStatus(addr string) (string, error) {
	rd, err := tr.rawData()
	if err != nil {
		return "", err
	}
	_, services := rd.fromProvider("http")
	status := ""
	for _, s := range services {
		if st, ok := s.ServerStatus["http://"+addr]; ok {
			if status != "" && status != st {
				return "", fmt.Errorf("%s is %s in one service and %s in another", addr, status, st)
			}
			status = st
		}
	}
	return status, nil
}

func (tr *traefik) waitServerStatus(t *testing.T, addr, want string, timeout time.Duration) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s: server %s %s", tr.name, addr, want), timeout, func() error {
		st, err := tr.serverStatus(addr)
		if err != nil {
			return err
		}
		if st != want {
			return fmt.Errorf("status %q", st)
		}
		return nil
	})
}

// switchStep is one event of a failover scenario and where traffic must end up.
type switchStep struct {
	name string
	act  func()
	want string
}

// runSwitches applies each step under a steady request loop and returns what each
// switch cost. Every switch must settle on its target within the timeout.
func runSwitches(t *testing.T, loop *requestLoop, steps []switchStep) []switchResult {
	t.Helper()
	var out []switchResult
	for _, st := range steps {
		t0 := time.Now()
		st.act()
		res := loop.waitSwitch(t, t0, st.want, 25, routeTimeout)
		t.Logf("%s → %s: %d failed requests, %d served by the old target, switched after %s %v",
			st.name, st.want, res.failed, res.stale, res.latency.Round(time.Millisecond), res.failures)
		out = append(out, res)
	}
	return out
}

// Scenario 2.
func TestOrderedFailoverAcrossThreeNodes(t *testing.T) {
	f := startFleet(t, 3, nodeOptions{})
	n1, n2, n3 := f.nodes[0], f.nodes[1], f.nodes[2]
	shop := f.deploy(t, "shop", "acme", []*node{n1, n2, n3}, "/healthz")
	tr := startTraefik(t, "traefik", traefikOptions{node: n1})

	const host = "shop.apps.localhost"
	tr.waitServedBy(t, host, "/", "shop@n1", routeTimeout)
	for _, n := range f.nodes {
		tr.waitServerStatus(t, shop.on(n).addr(), "UP", routeTimeout)
	}

	loop := startLoop(t, tr, host, "/", 20*time.Millisecond)
	steps := []switchStep{
		{"kill the primary (n1)", shop.on(n1).stop, "shop@n2"},
		{"kill the second (n2)", shop.on(n2).stop, "shop@n3"},
		{"restart the primary (n1)", func() { shop.on(n1).start(t) }, "shop@n1"},
	}
	res := runSwitches(t, loop, steps)
	loop.stop()

	lines := []string{
		"Three nodes, `failover(n1, failover(n2, n3))`, n1 and n2 with an active health check " +
			"(node default: automatic, 5s at this size; 2s timeout) and a passive one, n3 (the last) with none; a request every 20 ms, one at a time.",
		"",
		"| switch | failed requests | served by the old target | time to switch |",
		"|---|---|---|---|",
	}
	for i, st := range steps {
		lines = append(lines, fmt.Sprintf("| %s → %s | %d | %d | %s |", st.name, st.want, res[i].failed, res[i].stale, res[i].latency.Round(time.Millisecond)))
		// The design expects at most one lost request per switch with active + passive
		// checks: the request that finds the dead primary, which the passive check then
		// marks down.
		if res[i].failed > 1 {
			t.Errorf("%s: %d failed requests (%v), the design expects at most 1", st.name, res[i].failed, res[i].failures)
		}
	}
	results.add("Scenario 2: ordered failover", lines...)

	shop.on(n2).start(t)
	for _, n := range f.nodes {
		tr.waitServerStatus(t, shop.on(n).addr(), "UP", routeTimeout)
	}
	tr.requireProviderClean(t, "http")
}

// Scenario 10.
func TestNodeDelegatedHealthFailsOver(t *testing.T) {
	f := startFleet(t, 2, nodeOptions{})
	n1, n2 := f.nodes[0], f.nodes[1]
	quiet := f.deploy(t, "quiet", "acme", []*node{n1, n2}, "") // no health path
	tr := startTraefik(t, "traefik", traefikOptions{node: n1})

	const host = "quiet.apps.localhost"
	tr.waitServedBy(t, host, "/", "quiet@n1", routeTimeout)
	for _, n := range f.nodes {
		tr.waitServerStatus(t, quiet.on(n).addr(), "UP", routeTimeout)
	}
	requireNodeDelegatedCheck(t, tr, "quiet")

	// The node marks its instance not ready: traffic moves to n2 with nothing lost (the
	// instance itself still answers while Traefik moves away from it).
	loop := startLoop(t, tr, host, "/", 20*time.Millisecond)
	port1 := quiet.on(n1).port
	res := runSwitches(t, loop, []switchStep{
		{"n1 marks its instance not ready", func() { n1.setInstance(t, "quiet", port1, false) }, "quiet@n2"},
		{"n1 marks it ready again", func() { n1.setInstance(t, "quiet", port1, true) }, "quiet@n1"},
	})
	loop.stop()
	for i, name := range []string{"not ready", "ready again"} {
		if res[i].failed > 0 {
			t.Errorf("%s: %d failed requests %v, want 0 (the instance kept answering)", name, res[i].failed, res[i].failures)
		}
	}
	tr.waitServerStatus(t, quiet.on(n1).addr(), "UP", routeTimeout)

	// The instance's port stops accepting while it is still declared ready. No request
	// is sent meanwhile, so a passive check cannot see it: the node's probe does, and
	// answers the node-delegated check with 503 (Traefik marks the server DOWN) and
	// drops it from the document (the server leaves Traefik's configuration), whichever
	// comes first. The node's own answers, 200 then 503: node/probe's
	// TestDeadInstanceLeavesTheDocumentOnEveryNodeWithinATick.
	quiet.on(n1).stop()
	waitFor(t, "n1's instance DOWN in Traefik or gone from its configuration", routeTimeout, func() error {
		st, err := tr.serverStatus(quiet.on(n1).addr())
		if err != nil {
			return err
		}
		if st != "DOWN" && st != "" {
			return fmt.Errorf("status %q", st)
		}
		return nil
	})
	seenBefore := len(quiet.on(n2).requests())
	for range 20 {
		tr.expectServedBy(t, host, "/", "quiet@n2")
	}
	if got := len(quiet.on(n2).requests()) - seenBefore; got != 20 {
		t.Errorf("n2 answered %d of 20 requests after the node-delegated check failed n1", got)
	}

	quiet.on(n1).start(t)
	tr.waitServedBy(t, host, "/", "quiet@n1", routeTimeout)

	results.add("Scenario 10: node-delegated health",
		fmt.Sprintf("- instance marked not ready → n2: %d failed, switched after %s", res[0].failed, res[0].latency.Round(time.Millisecond)),
		fmt.Sprintf("- marked ready again → n1: %d failed, switched after %s", res[1].failed, res[1].latency.Round(time.Millisecond)),
		"- port stopped accepting (still declared ready): the node's probe failed it (node-delegated check 503, and the upstream left the document) with no traffic; 20/20 requests then served by n2.")
	tr.requireProviderClean(t, "http")
}

// requireNodeDelegatedCheck asserts that app's leaves that have a fallback check health
// through their node (path /v1/health/instances/<app> on the node's API port), and the
// last leaf of the chain is not checked.
func requireNodeDelegatedCheck(t *testing.T, tr *traefik, app string) {
	t.Helper()
	var services []struct {
		Name         string `json:"name"`
		LoadBalancer *struct {
			HealthCheck *struct {
				Path string `json:"path"`
				Port int    `json:"port"`
			} `json:"healthCheck"`
		} `json:"loadBalancer"`
	}
	if err := tr.api("/api/http/services?search="+app+"&per_page=100", &services); err != nil {
		t.Fatal(err)
	}
	leaves, checked := 0, 0
	for _, s := range services {
		if !strings.HasSuffix(s.Name, "@http") || s.LoadBalancer == nil {
			continue
		}
		leaves++
		hc := s.LoadBalancer.HealthCheck
		if hc == nil {
			continue // the last leaf of the chain: nothing to fail over to, not checked
		}
		checked++
		if hc.Path != "/v1/health/instances/"+app || hc.Port == 0 {
			t.Errorf("service %s: health check %+v, want path /v1/health/instances/%s on the node's API port", s.Name, hc, app)
		}
	}
	if leaves == 0 {
		t.Errorf("no load-balancer leaves of %s found", app)
	}
	if checked != leaves-1 {
		t.Errorf("%s: %d of %d leaves checked, want every leaf but the last", app, checked, leaves)
	}
}

// Scenario 3.
func TestPreferPutsTheChosenNodeFirst(t *testing.T) {
	f := startFleet(t, 2, nodeOptions{})
	n1, n2 := f.nodes[0], f.nodes[1]
	shop := f.deploy(t, "shop", "acme", []*node{n1, n2}, "/healthz")

	const host = "shop.apps.localhost"
	var trs []*traefik
	for _, tc := range []struct {
		name  string
		poll  *node
		query string // "" keeps the shipped prefer=self
		want  string
	}{
		{"n1-self", n1, "", "shop@n1"},
		{"n2-self", n2, "", "shop@n2"},
		{"n1-prefer-n2", n1, "prefer=n2", "shop@n2"},
		{"n2-prefer-n1", n2, "prefer=n1", "shop@n1"},
	} {
		tr := startTraefik(t, "traefik-"+tc.name, traefikOptions{node: tc.poll, query: tc.query})
		tr.waitServedBy(t, host, "/", tc.want, routeTimeout)
		for range 10 {
			tr.expectServedBy(t, host, "/", tc.want)
		}
		trs = append(trs, tr)
	}

	// Preferring does not drop the others: the two ingresses preferring their own node
	// both fall back to the survivor when one node's instance dies.
	trA, trB := trs[0], trs[1]
	shop.on(n2).stop()
	trB.waitServedBy(t, host, "/", "shop@n1", routeTimeout)
	trA.expectServedBy(t, host, "/", "shop@n1")
	shop.on(n2).start(t)
	trB.waitServedBy(t, host, "/", "shop@n2", routeTimeout)
	for _, tr := range trs {
		tr.requireProviderClean(t, "http")
	}
}
