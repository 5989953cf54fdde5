package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// nodeWatch polls a node's Traefik endpoint (with the ingress token) every 20 ms while
// something happens, and records what it answered (Traefik's side: watchRouters).
type nodeWatch struct {
	mu       sync.Mutex
	statuses map[string]int // node endpoint: "200", "503", "refused", … → count
	firstBad time.Time
	lastBad  time.Time
	stop     func()
}

func watchNode(t *testing.T, n *node) *nodeWatch {
	t.Helper()
	w := &nodeWatch{statuses: map[string]int{}}
	client := &http.Client{Timeout: 2 * time.Second}
	w.stop = repeat(t, 20*time.Millisecond, func() {
		status := "refused"
		req, _ := http.NewRequest(http.MethodGet, n.url("/v1/ingress/traefik"), nil)
		req.Header.Set("Authorization", "Bearer "+testIngressToken)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			status = fmt.Sprint(resp.StatusCode)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.statuses[status]++
		if status != "200" {
			if w.firstBad.IsZero() {
				w.firstBad = time.Now()
			}
			w.lastBad = time.Now()
		}
	})
	return w
}

// Scenario 8.
func TestNodeRestartKeepsTraefikRouting(t *testing.T) {
	// Checks every second, so that one certainly falls in the node's outage: the
	// single-placement app without a health path below must not be checked at all.
	f := startFleet(t, 1, nodeOptions{args: []string{"--traefik.healthCheck.interval=1s"}})
	n1 := f.nodes[0]
	f.deploy(t, "shop", "acme", []*node{n1}, "/healthz")
	f.deploy(t, "blog", "acme", []*node{n1}, "/healthz")
	// No health path: before docs/design.md §4's "which leaves are checked", its lone leaf was
	// checked through the node, so stopping the node took it offline (503).
	f.deploy(t, "quiet", "acme", []*node{n1}, "")
	tr := startTraefik(t, "traefik", traefikOptions{node: n1})
	const host = "shop.apps.localhost"
	tr.waitServedBy(t, host, "/", "shop@n1", routeTimeout)
	tr.waitServedBy(t, "blog.apps.localhost", "/", "blog@n1", routeTimeout)
	tr.waitServedBy(t, "quiet.apps.localhost", "/", "quiet@n1", routeTimeout)

	rd, err := tr.rawData()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := rd.fromProvider("http")

	loop := startLoop(t, tr, host, "/", 20*time.Millisecond)
	quietLoop := startLoop(t, tr, "quiet.apps.localhost", "/", 20*time.Millisecond)
	watch := watchNode(t, n1)
	floor := watchRouters(t, tr, "http")
	t0 := time.Now()
	logFrom := tr.proc.LogSize()

	// Stop the node and keep it down until Traefik has failed a poll, so Traefik is
	// known to have lived through the outage, then start it again (its first reconcile
	// pass is the 503 "draining" window).
	n1.stop(t)
	if err := tr.proc.WaitLog(20*time.Second, logFrom, "cannot fetch configuration data"); err != nil {
		t.Fatalf("waiting for Traefik to fail a poll of the stopped node: %v", err)
	}
	// Down long enough for two health checks at 1 s to find its port closed.
	time.Sleep(2500 * time.Millisecond)
	n1.start(t)

	// Traefik is back in sync once a change made after the restart reaches it.
	f.deploy(t, "after", "acme", []*node{n1}, "/healthz")
	tr.waitServedBy(t, "after.apps.localhost", "/", "after@n1", routeTimeout)
	loop.stop()
	quietLoop.stop()
	watch.stop()
	floor.stop()

	sent, failures := loop.notFrom(t0, "shop@n1")
	quietSent, quietFailures := quietLoop.notFrom(t0, "quiet@n1")
	if len(quietFailures) > 0 {
		t.Errorf("%d of %d requests to the single-placement app without a health path failed across the node restart %v, want 0 (its lone leaf must not be checked through the node)",
			len(quietFailures), quietSent, quietFailures)
	}
	watch.mu.Lock()
	statuses := fmt.Sprint(watch.statuses)
	window := watch.lastBad.Sub(watch.firstBad).Round(time.Millisecond)
	saw503 := watch.statuses["503"] > 0
	watch.mu.Unlock()
	minRouters, _, apiErrors := floor.result()

	t.Logf("node endpoint during the restart: %s; non-200 for %s", statuses, window)
	t.Logf("requests through Traefik: %d sent, %d failed %v", sent, len(failures), failures)
	t.Logf("Traefik: %d failed polls logged; routers from the provider: %d before, at least %d throughout", countLines(tr.proc.Output()[logFrom:], "cannot fetch configuration data"), len(before), minRouters)
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed across the node restart, want 0", len(failures), sent)
	}
	if apiErrors > 0 {
		t.Errorf("Traefik's API failed %d times during the restart", apiErrors)
	}
	if minRouters < len(before) {
		t.Errorf("Traefik withdrew routes during the restart: %d routers at the low point, %d before", minRouters, len(before))
	}
	if !strings.Contains(tr.proc.Output(), "cannot fetch configuration data") {
		t.Error("Traefik never failed a poll: the restart was not observed")
	}
	results.add("Scenario 8: node restart",
		fmt.Sprintf("- node endpoint seen by a 20 ms poller: %s (non-200 for %s; 503 draining observed: %v)", statuses, window, saw503),
		fmt.Sprintf("- single placement, no health path (lone leaf, unchecked): %d requests during the restart, %d failed", quietSent, len(quietFailures)),
		fmt.Sprintf("- %d requests through Traefik during the restart, %d failed; routers from the provider never below %d (%d before)", sent, len(failures), minRouters, len(before)),
	)
	tr.requireProviderClean(t, "http")
}
