package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 38, item 4: what an open status page costs a node. The page (node/httpapi/ui/app.js)
// polls the node's JSON API on a fixed schedule; this test makes the same requests on the same
// schedule (plain HTTP with the admin token: the browser adds nothing the node sees) against
// every node of a fleet, and counts the store requests the nodes make
// (scafo_store_requests_total) per reconcile pass with and without it.

// pageSchedule is the status page's polling, read from the page's own script.
type pageSchedule struct {
	refresh, slow time.Duration // REFRESH_MS, SLOW_REFRESH_MS
	auditLimit    int           // AUDIT_LIMIT
}

// fast and slow are the requests of one refresh and of one slow refresh (app.js refresh()).
func (s pageSchedule) fast() []string { return []string{"/v1/status", "/v1/ingress/routes"} }
func (s pageSchedule) slowPaths() []string {
	return []string{"/v1/apps", "/v1/audit?limit=" + strconv.Itoa(s.auditLimit)}
}

// perMinute is what one open page requests in a minute.
func (s pageSchedule) perMinute() float64 {
	return float64(len(s.fast()))*float64(time.Minute)/float64(s.refresh) + float64(len(s.slowPaths()))*float64(time.Minute)/float64(s.slow)
}

var pageConstRE = regexp.MustCompile(`(?m)^const (REFRESH_MS|SLOW_REFRESH_MS|AUDIT_LIMIT) = ([0-9]+);`)

func readPageSchedule(t *testing.T) pageSchedule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bins.root, "node", "httpapi", "ui", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]int{}
	for _, m := range pageConstRE.FindAllStringSubmatch(string(b), -1) {
		v[m[1]], _ = strconv.Atoi(m[2])
	}
	s := pageSchedule{refresh: time.Duration(v["REFRESH_MS"]) * time.Millisecond, slow: time.Duration(v["SLOW_REFRESH_MS"]) * time.Millisecond, auditLimit: v["AUDIT_LIMIT"]}
	if s.refresh <= 0 || s.slow < s.refresh || s.auditLimit <= 0 {
		t.Fatalf("app.js: REFRESH_MS, SLOW_REFRESH_MS, AUDIT_LIMIT = %v: not the page's schedule", v)
	}
	return s
}

// openPage polls n as the page does, from now: a refresh at once and every s.refresh, the
// slow requests with the first and then once every s.slow. After `refreshes` refreshes it
// calls done (once); stop ends it.
func openPage(t *testing.T, n *node, s pageSchedule, refreshes int, done func(), stop <-chan struct{}) {
	get := func(path string) {
		req, err := http.NewRequest(http.MethodGet, n.url(path), nil)
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		resp, err := apiClient.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", n.name, path, err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s: %d", n.name, path, resp.StatusCode)
		}
	}
	tick := time.NewTicker(s.refresh)
	defer tick.Stop()
	var lastSlow time.Time
	for i := 0; ; i++ {
		paths := s.fast()
		if lastSlow.IsZero() || time.Since(lastSlow) >= s.slow {
			lastSlow = time.Now()
			paths = append(paths, s.slowPaths()...)
		}
		var wg sync.WaitGroup
		for _, p := range paths { // app.js asks them together (Promise.all)
			wg.Add(1)
			go func() { defer wg.Done(); get(p) }()
		}
		wg.Wait()
		if i+1 == refreshes {
			done()
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// storeCounts are one node's reconcile passes and store requests by op, from its /metrics.
type storeCounts struct {
	passes float64
	ops    map[string]float64
}

func readStoreCounts(t *testing.T, n *node) storeCounts {
	t.Helper()
	_, samples := scrapeSamples(t, apiClient, n.url("/metrics"), "scafo", n.name, "scafo_reconcile_duration_seconds", "scafo_store_requests_total")
	c := storeCounts{ops: map[string]float64{}}
	for key, s := range samples {
		switch {
		case strings.HasPrefix(key, "scafo_reconcile_duration_seconds_count{"):
			c.passes = s.value
		case strings.HasPrefix(key, "scafo_store_requests_total{"):
			c.ops[s.labels["op"]] = s.value
		}
	}
	return c
}

// TestAnOpenStatusPageOnEveryNodeLeavesTheReconcileCostFlat: three nodes (default 2 s tick, a
// shared store, an application on all three), measured over one slow period of the page
// (SLOW_REFRESH_MS: the page's requests of exactly that long, the slow ones once) first with
// no page, then with a page open on every node. The reconcile's own store request, the
// conditional read of the serial, stays at one per pass on every node (to the one request a
// scrape can race), and the page writes nothing (PUTs: the heartbeats alone, ±1 per node for
// where a 15 s heartbeat falls in the window). The page's own reads (LISTs and GETs beyond
// the window without it) are logged per page per minute: the figure in docs/operating.md.
func TestAnOpenStatusPageOnEveryNodeLeavesTheReconcileCostFlat(t *testing.T) {
	requireBinaries(t)
	s := readPageSchedule(t)
	f := startFleet(t, 3, nodeOptions{args: ownPorts()})
	f.deploy(t, "shop", "acme", f.nodes, "")

	// A window: counts on every node at its start and when end is closed.
	window := func(during func(start func(), end chan struct{})) (map[string]storeCounts, map[string]storeCounts, time.Duration) {
		before, after := map[string]storeCounts{}, map[string]storeCounts{}
		end := make(chan struct{})
		var t0 time.Time
		start := func() {
			for _, n := range f.nodes {
				before[n.name] = readStoreCounts(t, n)
			}
			t0 = time.Now()
		}
		during(start, end)
		<-end
		took := time.Since(t0)
		for _, n := range f.nodes {
			after[n.name] = readStoreCounts(t, n)
		}
		return before, after, took
	}
	// The page's refreshes of one slow period: the slow requests once.
	refreshes := int(s.slow / s.refresh)

	// Without a page: as long as the page's window will last, timed by the page's own ticker
	// on a node it does not ask (an unrouted path would cost the same nothing).
	quiet0, quiet1, quietTook := window(func(start func(), end chan struct{}) {
		start()
		go func() {
			tick := time.NewTicker(s.refresh)
			defer tick.Stop()
			for range refreshes - 1 {
				<-tick.C
			}
			close(end)
		}()
	})

	// The pages have been open a while: a page's first audit read lists every day back to
	// the retention horizon once (the node remembers the days that listed empty: a page
	// left open costs the recent days' lists, measured below), before the window.
	for _, n := range f.nodes {
		warmed, stopWarm := make(chan struct{}), make(chan struct{})
		go openPage(t, n, s, 1, func() { close(warmed) }, stopWarm)
		<-warmed
		close(stopWarm)
	}

	// With a page open on every node.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	open0, open1, openTook := window(func(start func(), end chan struct{}) {
		start()
		var once sync.Once
		left := len(f.nodes)
		var mu sync.Mutex
		for _, n := range f.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				openPage(t, n, s, refreshes, func() {
					mu.Lock()
					defer mu.Unlock()
					if left--; left == 0 {
						once.Do(func() { close(end) })
					}
				}, stop)
			}()
		}
	})
	close(stop)
	wg.Wait()

	var pageLists, pageGets float64
	for _, n := range f.nodes {
		q, o := quiet1[n.name].minus(quiet0[n.name]), open1[n.name].minus(open0[n.name])
		t.Logf("%s, %s without a page: %v passes, store %v; %s with one: %v passes, store %v", n.name, ms(quietTook), q.passes, q.ops, ms(openTook), o.passes, o.ops)
		if q.passes < 5 || o.passes < 5 {
			t.Fatalf("%s: %v and %v passes in the windows: too few to measure", n.name, q.passes, o.passes)
		}
		// The reconcile's read: one per pass, with and without a page (a scrape reads the
		// pass counter and the store counter a moment apart: one request either way).
		for _, c := range []storeCounts{q, o} {
			if d := c.ops["get_if_changed"] - c.passes; d < -1 || d > 1 {
				t.Errorf("%s: %v conditional reads in %v passes, want one per pass", n.name, c.ops["get_if_changed"], c.passes)
			}
		}
		if d := o.ops["put"] - q.ops["put"]; d < -1 || d > 1 || o.ops["delete"] != q.ops["delete"] {
			t.Errorf("%s: %v PUTs and %v DELETEs with a page, %v and %v without: the page wrote", n.name, o.ops["put"], o.ops["delete"], q.ops["put"], q.ops["delete"])
		}
		pageLists += o.ops["list"] - q.ops["list"]*o.passes/q.passes
		pageGets += o.ops["get"] - q.ops["get"]*o.passes/q.passes
	}
	// The windows last one slow period: a minute is that many of them.
	perMinute := float64(time.Minute) / float64(s.slow) / float64(len(f.nodes))
	t.Logf("an open page: %.0f requests a minute (every %s: %s; every %s: %s); its own store requests a minute on the node it is open on: %.0f LISTs, %.0f GETs (1 application, %d audit records at most)",
		s.perMinute(), s.refresh, strings.Join(s.fast(), ", "), s.slow, strings.Join(s.slowPaths(), ", "), pageLists*perMinute, pageGets*perMinute, s.auditLimit)
	results.add("Scenario 36: what an open status page costs a node", fmt.Sprintf("An open status page: %.0f requests a minute; on its node %.0f store LISTs and %.0f GETs a minute; the reconcile's reads per pass unchanged (3 nodes, 2 s tick).",
		s.perMinute(), pageLists*perMinute, pageGets*perMinute))
}

// minus is a's counts less b's.
func (a storeCounts) minus(b storeCounts) storeCounts {
	out := storeCounts{passes: a.passes - b.passes, ops: map[string]float64{}}
	for op, v := range a.ops {
		out.ops[op] = v - b.ops[op]
	}
	return out
}
