package e2e

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Scenario 4.
func TestPathPrefixesRouteSegmentExactlyAndFlipBack(t *testing.T) {
	f := startFleet(t, 1, nodeOptions{})
	n1 := f.nodes[0]
	f.deploy(t, "site", "acme", []*node{n1}, "/healthz")
	f.deploy(t, "blog", "acme", []*node{n1}, "/healthz")
	const host, target = "paths.example.org", "blog.apps.localhost"
	n1.claim(t, "site", host)
	tr := startTraefik(t, "traefik", traefikOptions{node: n1})

	// "keep" stays flipped throughout: a republish must not disturb other prefixes.
	withB := map[string]string{"b": target, "keep": target}
	withoutB := map[string]string{"keep": target}
	n1.putPaths(t, "site", host, withB)
	tr.waitServedBy(t, host, "/b", "blog@n1", routeTimeout)

	for _, tc := range []struct {
		path, want string
	}{
		{"/b", "blog@n1"},
		{"/b/", "blog@n1"},
		{"/b/x", "blog@n1"},
		{"/b/x/y?q=1", "blog@n1"},
		{"/b?q=1", "blog@n1"},
		{"/keep", "blog@n1"},
		{"/bat", "site@n1"}, // a prefix is a whole segment, not a string prefix
		{"/b.", "site@n1"},
		{"/b-x", "site@n1"},
		{"/", "site@n1"},
		{"/c", "site@n1"},
		{"/c/b", "site@n1"}, // only the first segment selects
		{"/B", "site@n1"},   // prefixes are lowercase; paths are case-sensitive
		{"/keepx", "site@n1"},
	} {
		r := tr.expectServedBy(t, host, tc.path, tc.want)
		// No prefix stripping: the upstream gets the path Traefik routed on, and the
		// original Host.
		if r.echo != nil && (r.echo.RawPath != tc.path || r.echo.Host != host) {
			t.Errorf("%s: upstream saw %q on Host %q, want it unchanged", tc.path, r.echo.RawPath, r.echo.Host)
		}
	}

	// Flip latency: PUT acknowledged → first request served by the new target, polling
	// every 5 ms, 10 flips each way. The node publishes on the write itself, so this is
	// mostly Traefik's pollInterval (1s) plus its 100ms throttle.
	var away, back []time.Duration
	measure := func(paths map[string]string, want string) time.Duration {
		// De-phase from Traefik's 1 s poll: a flip issued right after the previous one
		// was observed would always land just after a poll and measure the worst case.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		n1.putPaths(t, "site", host, paths)
		d := firstServed(t, []*traefik{tr}, host, "/b", []string{want}, time.Now())[0]
		tr.expectServedBy(t, host, "/keep", "blog@n1")
		return d
	}
	for range 10 {
		back = append(back, measure(withoutB, "site@n1"))
		away = append(away, measure(withB, "blog@n1"))
	}
	p := func(ds []time.Duration, q float64) time.Duration { return percentile(ds, q).Round(time.Millisecond) }
	t.Logf("flip /b → blog (add the prefix): p50 %s, p95 %s, all %v", p(away, 50), p(away, 95), away)
	t.Logf("flip /b → site (remove the prefix): p50 %s, p95 %s, all %v", p(back, 50), p(back, 95), back)
	results.add("Scenario 4: path-prefix flip latency",
		"PUT of the path map acknowledged → first request served by the new target (polled every 5 ms; "+
			"each PUT after a random 0–1 s pause so flips do not phase-lock to Traefik's poll). "+
			"Node reconcile.interval 2s (default), Traefik pollInterval 1s and providersThrottleDuration 100ms (shipped).",
		"",
		"| direction | flips | p50 | p95 | max |",
		"|---|---|---|---|---|",
		fmt.Sprintf("| add `b` (site → blog) | %d | %s | %s | %s |", len(away), p(away, 50), p(away, 95), p(away, 100)),
		fmt.Sprintf("| remove `b` (blog → site) | %d | %s | %s | %s |", len(back), p(back, 50), p(back, 95), p(back, 100)),
	)
	tr.requireProviderClean(t, "http")
}
