package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Issue 13 item 5: flip latency by fleet size through a real Traefik, with the provider
// plugin and with the built-in HTTP provider, and Traefik's CPU per configuration change.
//
// One scafo-node on a dir store holding a generated fleet (fleetgen.go), one
// Traefik v3.6.12 per provider kind on the shipped static configuration (throttle
// 100ms; the plugin long-polls, the HTTP provider polls every 1 s). A flip is a PUT of
// flipHost's path map through the node API moving flipPrefix to the other target; its
// latency is the PUT's answer → the first request through Traefik (one every 5 ms) that
// the new target answers.

// flipSample is one flip.
type flipSample struct {
	latency time.Duration // PUT answered → first request routed to the new target
	// node is PUT sent → the node answers a parked long-poll with the new bytes (the
	// node may publish before its answer to the PUT arrives), routed PUT sent → first
	// request routed: routed-node is Traefik's part.
	node, routed time.Duration
	cpu          time.Duration // Traefik's CPU for the change, net of its idle rate
	cpuRaw       time.Duration // the same, gross
	settle       time.Duration // PUT answered → Traefik's CPU back at its idle rate
}

// flipCase is one measured configuration.
type flipCase struct {
	apps  int
	kind  providerKind
	quiet bool // health checks at 1h (none fires): the rebuild alone
	round int
	// before names an older build ("" for this tree): its node binary and plugin source.
	before, beforeNode, beforePlugin string
}

func (c flipCase) name() string {
	s := fmt.Sprintf("%s apps, %s", thousands(c.apps), c.kind)
	if c.quiet {
		s += ", checks 1h"
	}
	if c.before != "" {
		s += ", before (" + c.before + ")"
	}
	return s
}

// flipRun is what one case measured.
type flipRun struct {
	c                 flipCase
	routers, services int
	// what Traefik's API says it holds (the node's, plus Traefik's internal ones)
	traefikRouters, traefikServices int
	checked                         int
	interval                        string
	bodyBytes                       int
	startup                         time.Duration // Traefik process start → the flip host routed
	idleCores                       float64       // Traefik's CPU while nothing changes
	samples                         []flipSample
	rssMB, peakMB                   string
	nodeRSSMB                       string
	polls                           int // polls the node answered during the flips (HTTP provider: one a second)
	reconcileMeanMs                 float64
	reconcilePasses                 int
	nodeServeCPUPerSec              float64 // node CPU while idle with this Traefik polling (cores)
}

// thousands writes n with a thin space every three digits, as the REPORT does.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

// envInts reads a space-separated list of integers from name, or def.
func envInts(t *task, name string, def []int) []int {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Fields(v) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want positive integers separated by spaces", name, v)
		}
		out = append(out, n)
	}
	return out
}

func envInt(t *task, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return n
	}
	return def
}

// flipLatencyByFleetSize measures flips at 100, 1 000 and 10 000 applications
// (SCAFO_BENCH_FLIP_SIZES), 20 flips each (SCAFO_BENCH_FLIPS), through the plugin and
// the HTTP provider, SCAFO_BENCH_FLIP_ROUNDS times; with SCAFO_BENCH_FLIP_QUIET (sizes)
// also with health checks at 1h (default 10 000), and with -before the
// same flips on an older build at SCAFO_BENCH_BEFORE_SIZES (default 1 000), plugin only.
func flipLatencyByFleetSize(t *task) {
	sizes := envInts(t, "SCAFO_BENCH_FLIP_SIZES", []int{100, 1000, 10000})
	flips := envInt(t, "SCAFO_BENCH_FLIPS", 20)
	rounds := envInt(t, "SCAFO_BENCH_FLIP_ROUNDS", 1)
	quiet := []int{10000}
	if _, set := os.LookupEnv("SCAFO_BENCH_FLIP_QUIET"); set { // "" for none
		quiet = envInts(t, "SCAFO_BENCH_FLIP_QUIET", nil)
	}
	var cases []flipCase
	for r := 1; r <= rounds; r++ {
		for _, n := range sizes {
			for _, k := range []providerKind{providerPlugin, providerHTTP} {
				cases = append(cases, flipCase{apps: n, kind: k, round: r})
			}
		}
	}
	for _, n := range quiet {
		for _, k := range []providerKind{providerPlugin, providerHTTP} {
			cases = append(cases, flipCase{apps: n, kind: k, quiet: true, round: 1})
		}
	}
	if bin := bins.beforeNode; bin != "" {
		ref := bins.beforeRef
		for _, n := range envInts(t, "SCAFO_BENCH_BEFORE_SIZES", []int{1000}) {
			// Interleaved with this tree's run of the same size, so both see the same machine.
			cases = append(cases,
				flipCase{apps: n, kind: providerPlugin, round: 1, before: ref, beforeNode: bin, beforePlugin: bins.beforePlugin},
				flipCase{apps: n, kind: providerPlugin, round: 2})
		}
	}
	var runs []flipRun
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/round=%d", c.name(), c.round), func(t *task) {
			runs = append(runs, measureFleetFlips(t, c, flips))
		})
	}
	fleetFlipReport(runs, flips)
}

// measureFleetFlips runs one case: fleet, node, Traefik, flips.
func measureFleetFlips(t *task, c flipCase, flips int) flipRun {
	run := flipRun{c: c}
	backends := startFleetBackends(t)
	root := storeDir(t)
	writeFlipFleet(t, root, fleetSpec{apps: c.apps}, backends)
	var extra []string
	if c.quiet {
		extra = append(extra, "--traefik.healthCheck.interval=1h")
	}
	nodeBin := bins.node
	if c.beforeNode != "" {
		nodeBin = c.beforeNode
	}
	nd := newNodeBin(t, nodeBin, "bench-a", root, extra...)
	nd.start(t)

	// The node's own record reaches its document a little after its first pass (at 100
	// applications the first poll can come before it): wait until the API chain names
	// the node, so that no change but the flips reaches Traefik.
	if err := nd.proc.WaitUntil(time.Minute, func() error { return apiChainHas(nd, nd.name) }); err != nil {
		t.Fatalf("waiting for %s in its own document's API chain: %v", nd.name, err)
	}

	query := "" // the plugin without prefer
	if c.kind == providerHTTP {
		query = "prefer=self" // as shipped
	}
	first := mustNodePoll(t, nd, query, "")
	shape := shapeOf(t, first.body)
	run.routers, run.services, run.checked, run.bodyBytes = shape.routers, shape.services, shape.checked, len(first.body)
	run.interval = shape.interval.String()
	if shape.checked == 0 {
		run.interval = "none"
	}

	tr := startProviderTraefik(t, "traefik-"+string(c.kind), providerLaunch{
		kind: c.kind, endpoints: []string{nodeBaseURL(nd)}, pluginSrc: c.beforePlugin,
	})
	current := 0 // the target flipPrefix points at
	want := func(k int) string { return identityName(flipTargets[k], placementOf(k + 1)[0]) }
	run.startup = waitFirstRoute(t, tr, want(current), "Traefik ("+string(c.kind)+")")
	// The host's own application answers what the map does not hold: the route is real.
	if status, body, err := tr.get(flipHost, "/nothere"); err != nil || status != 200 || body != identityName(flipOwner, placementOf(0)[0]) {
		t.Fatalf("%s/nothere: %d %q %v, want %s", flipHost, status, body, err, identityName(flipOwner, placementOf(0)[0]))
	}
	// Traefik holds the whole configuration: every router and service from the node
	// (plus its own internal ones), none in error, and the last application's host routes.
	last := appName(c.apps-1) + "." + platformDomain
	if status, body, err := tr.get(last, "/"); err != nil || status != 200 || body != "ok" {
		t.Fatalf("%s: %d %q %v, want 200 ok", last, status, body, err)
	}
	ov, err := tr.overview()
	if err != nil {
		t.Fatal(err)
	}
	if ov.HTTP.Routers.Total < run.routers || ov.HTTP.Services.Total < run.services || ov.HTTP.Routers.Errors+ov.HTTP.Services.Errors > 0 {
		t.Fatalf("Traefik holds %+v routers and %+v services; the node rendered %d and %d", ov.HTTP.Routers, ov.HTTP.Services, run.routers, run.services)
	}
	run.traefikRouters, run.traefikServices = ov.HTTP.Routers.Total, ov.HTTP.Services.Total
	t.Logf("%s: %d routers, %d services, %d checked leaves (interval %s), %d bytes; Traefik routed %s after start and holds %d routers, %d services",
		c.name(), run.routers, run.services, run.checked, run.interval, run.bodyBytes, run.startup.Round(time.Millisecond), run.traefikRouters, run.traefikServices)

	// Idle: wait for Traefik's startup work to end, then measure its idle rate.
	settleIdle(tr, 0.05, 2*time.Minute)
	idleWin := 4 * time.Second
	cpu0, nodeCPU0 := cpuTime(tr.proc), cpuTime(nd.proc)
	time.Sleep(idleWin)
	run.idleCores = (cpuTime(tr.proc) - cpu0).Seconds() / idleWin.Seconds()
	run.nodeServeCPUPerSec = (cpuTime(nd.proc) - nodeCPU0).Seconds() / idleWin.Seconds()
	polls0 := nodePolls(t, nd)
	passes0, sum0 := reconcileHistogram(t, nd)

	for i := range flips {
		next := 1 - current
		nodeDone := parkPoll(t, nd, query)
		// De-phase from the HTTP provider's 1 s poll (the plugin has no phase).
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		cpuBefore, at := cpuTime(tr.proc), time.Now()
		putFlip(t, nd, flipTargets[next])
		t0 := time.Now()
		var s flipSample
		if err := waitRouted(tr, want(next), t0, &s.latency); err != nil {
			t.Fatalf("flip %d to %s: %v", i, flipTargets[next], err)
		}
		s.routed = s.latency + t0.Sub(at)
		if nt := <-nodeDone; !nt.IsZero() {
			s.node = nt.Sub(at)
		} else {
			t.Errorf("flip %d: the node's long-poll did not answer with new bytes", i)
		}
		end := settleIdle(tr, run.idleCores, time.Minute)
		s.settle = end.Sub(t0)
		s.cpuRaw = cpuTime(tr.proc) - cpuBefore
		s.cpu = s.cpuRaw - time.Duration(run.idleCores*float64(end.Sub(at)))
		run.samples = append(run.samples, s)
		current = next
		t.Logf("flip %2d → %s: routed after %s (node published after %s); Traefik CPU %s net (%s gross), idle again after %s",
			i+1, flipTargets[next], s.latency.Round(time.Millisecond), s.node.Round(time.Millisecond),
			s.cpu.Round(10*time.Millisecond), s.cpuRaw.Round(10*time.Millisecond), s.settle.Round(10*time.Millisecond))
	}
	run.polls = nodePolls(t, nd) - polls0
	passes1, sum1 := reconcileHistogram(t, nd)
	if passes1 > passes0 {
		run.reconcilePasses = passes1 - passes0
		run.reconcileMeanMs = (sum1 - sum0) / float64(passes1-passes0) * 1000
	}
	rss, peak := rssKB(tr.proc)
	run.rssMB, run.peakMB = mb(rss), mb(peak)
	nrss, _ := rssKB(nd.proc)
	run.nodeRSSMB = mb(nrss)
	tr.proc.Stop(10 * time.Second)
	nd.proc.Stop(10 * time.Second)
	return run
}

// newNodeBin is newNode with another scafo-node binary (an older build).
func newNodeBin(t *task, bin, name, storeRoot string, extra ...string) *benchNode {
	saved := bins.node
	bins.node = bin
	defer func() { bins.node = saved }()
	return newNode(t, name, storeRoot, extra...)
}

// settleIdle waits until Traefik's CPU over the last second is within its idle rate
// (plus 30 ms of slack: the clock ticks in 10 ms), or limit passes, and returns when.
// waitFirstRoute waits until tr routes flipHost's flipPrefix to the application want (5
// min at most: a cold Traefik loading a large fleet) and returns how long after its
// start that was; what names tr in the failure.
func waitFirstRoute(t *task, tr *providerTraefik, want, what string) time.Duration {
	if err := tr.proc.WaitUntil(5*time.Minute, func() error {
		status, body, err := tr.get(flipHost, "/"+flipPrefix+"/x")
		if err != nil {
			return err
		}
		if status != 200 || body != want {
			return fmt.Errorf("%d %q, want %q", status, body, want)
		}
		return nil
	}); err != nil {
		t.Fatalf("waiting 5 min for %s to route %s/%s: %v", what, flipHost, flipPrefix, err)
	}
	return time.Since(tr.proc.Started())
}

func settleIdle(tr *providerTraefik, idleCores float64, limit time.Duration) time.Time {
	const step, window = 250 * time.Millisecond, time.Second
	type at struct {
		t   time.Time
		cpu time.Duration
	}
	hist := []at{{time.Now(), cpuTime(tr.proc)}}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		time.Sleep(step)
		now := at{time.Now(), cpuTime(tr.proc)}
		hist = append(hist, now)
		for len(hist) > 1 && now.t.Sub(hist[1].t) >= window {
			hist = hist[1:]
		}
		if span := now.t.Sub(hist[0].t); span >= window {
			allowed := time.Duration(idleCores*float64(span)) + 30*time.Millisecond
			if now.cpu-hist[0].cpu <= allowed {
				return now.t
			}
		}
	}
	return time.Now()
}

// waitRouted sends GET flipHost/flipPrefix/x through Traefik every 5 ms until want
// answers, and sets *d to the time from t0 to the sending of that request.
func waitRouted(tr *providerTraefik, want string, t0 time.Time, d *time.Duration) error {
	deadline := t0.Add(3 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		sent := time.Now()
		status, body, err := tr.get(flipHost, "/"+flipPrefix+"/x")
		if err == nil && status == 200 && body == want {
			*d = sent.Sub(t0)
			return nil
		}
		last = fmt.Sprintf("%d %q %v", status, body, err)
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("not routed to %s within 3 min (last answer %s)", want, last)
}

// putFlip points flipPrefix at target through the node API (admin token).
func putFlip(t *task, nd *benchNode, target string) {
	body, _ := json.Marshal(map[string]any{"paths": map[string]string{flipPrefix: target + "." + platformDomain}})
	req, err := http.NewRequest(http.MethodPut, nd.url("/v1/apps/"+flipOwner+"/domains/"+flipHost+"/paths"), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+benchAdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := pollClient.Do(req)
	if err != nil {
		t.Fatalf("PUT paths: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT paths → %s: %d %s", target, resp.StatusCode, b)
	}
}

// pollQuery GETs /v1/ingress/traefik?query, with If-None-Match etag and ?wait when set.
func (n *benchNode) pollQuery(query, etag, wait string) (poll, error) {
	q := query
	if wait != "" {
		if q != "" {
			q += "&"
		}
		q += "wait=" + wait
	}
	u := n.url("/v1/ingress/traefik")
	if q != "" {
		u += "?" + q
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return poll{}, err
	}
	req.Header.Set("Authorization", "Bearer "+benchIngressToken)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	c := pollClient
	if wait != "" {
		c = &http.Client{Timeout: 2 * time.Minute, Transport: pollClient.Transport}
	}
	resp, err := c.Do(req)
	if err != nil {
		return poll{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return poll{}, err
	}
	return poll{status: resp.StatusCode, etag: resp.Header.Get("ETag"), body: b}, nil
}

func mustNodePoll(t *task, n *benchNode, query, etag string) poll {
	p, err := n.pollQuery(query, etag, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.status != http.StatusOK {
		t.Fatalf("%s: GET /v1/ingress/traefik?%s: %d %.200s", n.name, query, p.status, p.body)
	}
	return p
}

// metricsText is a node's /metrics.
func metricsText(t *task, n *benchNode) string {
	resp, err := pollClient.Get(n.url("/metrics"))
	if err != nil {
		t.Fatalf("%s /metrics: %v", n.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricSum sums every sample of the metric name (any labels) in a Prometheus text page.
func metricSum(text, name string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // another metric whose name starts with name
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// nodePolls is how many routing polls the node has answered (scafo_ingress_polls_total).
func nodePolls(t *task, n *benchNode) int {
	return int(metricSum(metricsText(t, n), "scafo_ingress_polls_total"))
}

// reconcileHistogram is the count and sum (seconds) of the node's reconcile passes.
func reconcileHistogram(t *task, n *benchNode) (int, float64) {
	text := metricsText(t, n)
	return int(metricSum(text, "scafo_reconcile_duration_seconds_count")), metricSum(text, "scafo_reconcile_duration_seconds_sum")
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) }

func (r flipRun) pick(f func(flipSample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(r.samples))
	for i, s := range r.samples {
		out[i] = f(s)
	}
	return out
}

func (r flipRun) meanCPU() time.Duration {
	if len(r.samples) == 0 {
		return 0
	}
	var sum time.Duration
	for _, s := range r.samples {
		sum += s.cpu
	}
	return sum / time.Duration(len(r.samples))
}

func latency(s flipSample) time.Duration  { return s.latency }
func nodeTime(s flipSample) time.Duration { return s.node }

// traefikPart is the part of a flip after the node published: Traefik fetching (or
// being handed) the bytes, its throttle, decoding and rebuilding.
func traefikPart(s flipSample) time.Duration { return s.routed - s.node }

func routedTime(s flipSample) time.Duration { return s.routed }

// kindLabel names a provider kind in prose.
func kindLabel(k providerKind) string {
	if k == providerPlugin {
		return "plugin"
	}
	return "HTTP provider"
}

// pooled merges the samples of every round of one configuration.
func pooled(runs []flipRun, apps int, kind providerKind, quiet bool, before bool) *flipRun {
	var out *flipRun
	for _, r := range runs {
		if r.c.apps != apps || r.c.kind != kind || r.c.quiet != quiet || (r.c.before != "") != before {
			continue
		}
		if out == nil {
			cp := r
			cp.samples = append([]flipSample(nil), r.samples...)
			out = &cp
			continue
		}
		out.samples = append(out.samples, r.samples...)
	}
	return out
}

func ratioOf(a, b time.Duration) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

func fleetFlipReport(runs []flipRun, flips int) {
	if len(runs) == 0 {
		return
	}
	rows := []string{
		fmt.Sprintf("One scafo-node (this tree) on a dir store holding a generated fleet of N applications, one Traefik %s per provider "+
			"kind, started after the node and measured alone (the two providers run one after the other, never at once), on the shipped "+
			"static configuration: `deploy/traefik/traefik-plugin.yml` (the provider plugin, long-poll) and `deploy/traefik/traefik.yml` "+
			"(the built-in HTTP provider, `pollInterval: 1s`, `?prefer=self`), both `providersThrottleDuration: 100ms`; only listen "+
			"addresses, endpoints and the token differ. The fleet (`e2e/bench/fleetgen.go`): every application on two of three "+
			"fake nodes (records the harness writes, loopback addresses), so a failover chain of two leaves whose first is actively "+
			"checked; ~1.1 routes per application; the flip host `%s` held by %s with one prefix `%s` on one of two same-account "+
			"targets whose instances answer with their own name, every other instance on one of %d loopback listeners answering 200 "+
			"(health checks included). Health checks are the render's defaults (the automatic interval: 5 s, or longer so that Traefik "+
			"sends at most 200 checks/s) unless the row says 1h (no check fires: the rebuild alone).",
			traefikVersion(), flipHost, flipOwner, flipPrefix, poolListeners),
		"",
		fmt.Sprintf("A flip is a PUT of `%s`'s path map through the node API (admin token) moving `/%s` to the other target, after a "+
			"random 0–1 s pause (de-phased from the HTTP provider's poll). **Latency**: PUT answered → the first request through "+
			"Traefik (one every 5 ms) answered by the new target. **Node publish**: PUT sent → a long-poll parked on the node "+
			"before the PUT (`If-None-Match` + `wait`, the query Traefik uses) is answered with the new bytes: the node's whole part "+
			"(its API write, reconcile pass, derive, render of that body, gzip); **Traefik's part** is node publish → routed, and its share is that over PUT sent → routed; the rest is Traefik's (fetch, 100 ms throttle, decode, "+
			"rebuild of every router and service). **CPU per change**: Traefik's utime+stime (`/proc/<pid>/stat`) from just before "+
			"the PUT until its CPU use is back at its idle rate for a whole second, minus that idle rate over the same span; idle "+
			"rate measured over 4 s before the first flip (with the HTTP provider it includes fetching and hashing the body every "+
			"second). %d flips per row.", flipHost, flipPrefix, flips),
		"",
		"| fleet | provider | health checks | routers / services | config MB | Traefik startup s | flips | p50 s | p95 s | max s | node publish p50 s (p95) | Traefik's part p50 s | Traefik's share of p50 | Traefik CPU s per change (mean) | Traefik idle cores | Traefik RSS MB (peak) | node reconcile pass mean ms |",
		"|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
	}
	for _, r := range runs {
		lat, node, part := r.pick(latency), r.pick(nodeTime), r.pick(traefikPart)
		checks := "render default (" + r.interval + ", " + itoa(r.checked) + " checked leaves)"
		if r.c.quiet {
			checks = "1h (" + itoa(r.checked) + " leaves)"
		}
		name := thousands(r.c.apps) + " apps"
		if r.c.before != "" {
			name += ", **before** (" + r.c.before + ")"
		}
		if r.c.round > 1 {
			name += fmt.Sprintf(" (round %d)", r.c.round)
		}
		share := "–"
		if p := pct(r.pick(routedTime), 50); p > 0 {
			share = fmt.Sprintf("%.0f %%", 100*float64(pct(part, 50))/float64(p))
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %d / %d | %.1f | %.1f | %d | %s | %s | %s | %s (%s) | %s | %s | %s | %.2f | %s (%s) | %.1f |",
			name, r.c.kind, checks, r.routers, r.services, float64(r.bodyBytes)/(1<<20), r.startup.Seconds(), len(r.samples),
			secs(pct(lat, 50)), secs(pct(lat, 95)), secs(pct(lat, 100)), secs(pct(node, 50)), secs(pct(node, 95)),
			secs(pct(part, 50)), share, secs(r.meanCPU()), r.idleCores, r.rssMB, r.peakMB, r.reconcileMeanMs))
	}

	rows = append(rows, "", "Ratios (same run; every round of a configuration pooled):", "")
	sizes := map[int]bool{}
	for _, r := range runs {
		sizes[r.c.apps] = true
	}
	var ns []int
	for n := range sizes {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	for _, k := range []providerKind{providerPlugin, providerHTTP} {
		for i := 1; i < len(ns); i++ {
			a, b := pooled(runs, ns[i], k, false, false), pooled(runs, ns[i-1], k, false, false)
			if a == nil || b == nil {
				continue
			}
			rows = append(rows, fmt.Sprintf("- %s, %s vs %s apps (%.0f× the fleet): p50 %s, p95 %s, Traefik's part p50 %s, node publish p50 %s, Traefik CPU per change %s.",
				k, thousands(ns[i]), thousands(ns[i-1]), float64(ns[i])/float64(ns[i-1]),
				ratioOf(pct(a.pick(latency), 50), pct(b.pick(latency), 50)), ratioOf(pct(a.pick(latency), 95), pct(b.pick(latency), 95)),
				ratioOf(pct(a.pick(traefikPart), 50), pct(b.pick(traefikPart), 50)), ratioOf(pct(a.pick(nodeTime), 50), pct(b.pick(nodeTime), 50)),
				ratioOf(a.meanCPU(), b.meanCPU())))
		}
	}
	for _, n := range ns {
		p, h := pooled(runs, n, providerPlugin, false, false), pooled(runs, n, providerHTTP, false, false)
		if p == nil || h == nil {
			continue
		}
		rows = append(rows, fmt.Sprintf("- %s apps, plugin vs HTTP provider: p50 %s, p95 %s, Traefik CPU per change %s.",
			thousands(n), ratioOf(pct(p.pick(latency), 50), pct(h.pick(latency), 50)), ratioOf(pct(p.pick(latency), 95), pct(h.pick(latency), 95)),
			ratioOf(p.meanCPU(), h.meanCPU())))
	}
	for _, n := range ns {
		for _, k := range []providerKind{providerPlugin, providerHTTP} {
			q, a := pooled(runs, n, k, true, false), pooled(runs, n, k, false, false)
			if q == nil || a == nil {
				continue
			}
			rows = append(rows, fmt.Sprintf("- %s apps, %s, default checks vs checks at 1h: p50 %s, Traefik CPU per change %s (%s vs %s s), idle %.2f vs %.2f cores.",
				thousands(n), k, ratioOf(pct(a.pick(latency), 50), pct(q.pick(latency), 50)), ratioOf(a.meanCPU(), q.meanCPU()),
				secs(a.meanCPU()), secs(q.meanCPU()), a.idleCores, q.idleCores))
		}
	}
	for _, n := range ns {
		b, a := pooled(runs, n, providerPlugin, false, true), pooled(runs, n, providerPlugin, false, false)
		if b == nil || a == nil {
			continue
		}
		rows = append(rows, fmt.Sprintf("- %s apps, plugin, this tree vs before (%s): p50 %s (%s vs %s s), p95 %s, node publish p50 %s, Traefik CPU per change %s.",
			thousands(n), b.c.before, ratioOf(pct(a.pick(latency), 50), pct(b.pick(latency), 50)), secs(pct(a.pick(latency), 50)), secs(pct(b.pick(latency), 50)),
			ratioOf(pct(a.pick(latency), 95), pct(b.pick(latency), 95)), ratioOf(pct(a.pick(nodeTime), 50), pct(b.pick(nodeTime), 50)), ratioOf(a.meanCPU(), b.meanCPU())))
	}

	// Where Traefik's rebuild dominates: its part is most of the median flip.
	var dominated []string
	for _, n := range ns {
		for _, k := range []providerKind{providerPlugin, providerHTTP} {
			a := pooled(runs, n, k, false, false)
			if a == nil {
				continue
			}
			lat, part, nodeP := pct(a.pick(routedTime), 50), pct(a.pick(traefikPart), 50), pct(a.pick(nodeTime), 50)
			if lat > 0 && part*2 > lat {
				dominated = append(dominated, fmt.Sprintf("%s apps with the %s (%s s of %s s, %.0f %%, against %s s for the node to publish; %s CPU-s per change)",
					thousands(n), kindLabel(k), secs(part), secs(lat), 100*float64(part)/float64(lat), secs(nodeP), secs(a.meanCPU())))
			}
		}
	}
	if len(dominated) > 0 {
		rows = append(rows, "", "Traefik's part (from the node's publish to routed) is more than half of the median flip (PUT sent → routed) at: "+strings.Join(dominated, "; ")+".")
	}
	rows = append(rows, "", whyProvidersDiffer)
	if p := pooled(runs, 1000, providerPlugin, false, false); p != nil {
		p50 := pct(p.pick(latency), 50)
		verdict := "met"
		if p50 >= time.Second {
			verdict = "**missed**"
		}
		rows = append(rows, "", fmt.Sprintf("Goal (issue 13): p50 under 1 s at 1 000 applications with the plugin: %s s over %d flips, %s.", secs(p50), len(p.samples), verdict))
	}
	rows = append(rows, "", fmt.Sprintf("The machine (%d cores) is shared with other engineers' builds and tests: the load average at the start and end "+
		"of the run is in the Machine table; read the ratios, not the absolute seconds.", runtime.NumCPU()))
	report.add(secFleetFlip, append(rows, "")...)
}

// whyProvidersDiffer is what Traefik v3.6.12's source says about the two providers' cost
// per change (a fact of that version, not of one run).
const whyProvidersDiffer = "Why the HTTP provider costs more per change than the plugin on the same bytes: Traefik v3.6.12's HTTP provider " +
	"decodes every changed body with its YAML decoder (`pkg/provider/http/http.go`, `decodeConfiguration` → " +
	"`file.DecodeContent(…, \".yaml\", …)`), while a provider plugin hands Traefik JSON that it decodes with `encoding/json` " +
	"(`pkg/plugins/providers.go`); both then rebuild every router and service. The HTTP provider also waits for its next " +
	"poll (up to `pollInterval`, 1 s) where the plugin's long-poll is answered at once."

// apiChainHas checks that the node's routing document lists node among the API
// upstreams.
func apiChainHas(n *benchNode, node string) error {
	req, err := http.NewRequest(http.MethodGet, n.url("/v1/ingress/routes"), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchIngressToken)
	resp, err := pollClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var doc struct {
		API *struct {
			Upstreams []struct {
				Node string `json:"node"`
			} `json:"upstreams"`
		} `json:"api"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return err
	}
	if doc.API == nil {
		return fmt.Errorf("no api section")
	}
	var names []string
	for _, u := range doc.API.Upstreams {
		if u.Node == node {
			return nil
		}
		names = append(names, u.Node)
	}
	return fmt.Errorf("api upstreams %v", names)
}

// parkPoll parks a long-poll of query on the node's current bytes; the channel gets the
// time the node answered it with new bytes (the zero time if it failed).
func parkPoll(t *task, nd *benchNode, query string) <-chan time.Time {
	etag := mustNodePoll(t, nd, query, "").etag
	done := make(chan time.Time, 1)
	go func() {
		p, err := nd.pollQuery(query, etag, "60s")
		if err != nil || p.status != http.StatusOK {
			done <- time.Time{}
			return
		}
		done <- time.Now()
	}()
	return done
}
