package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Issue 17 item 5: ingress groups measured through real Traefiks.
//
// One scafo-node on a dir store holding the generated fleet of fleetgen.go with a
// group per application: N applications (SCAFO_BENCH_GROUPS_APPS, 10 000) in G groups
// (SCAFO_BENCH_GROUPS_N, 10) of N/G contiguous applications, g0 holding the flip host
// and both flip targets. Real Traefiks with the provider plugin on the shipped static
// configuration, each with `group` set (SCAFO_BENCH_GROUPS_TRAEFIKS, 3: g0, where the
// flips happen, and observers on other groups); every group without a Traefik, and the
// observed ones too, is read by a poller that records its bytes. The flips are those of
// fleetflip.go (a PUT of the flip host's path map), SCAFO_BENCH_FLIPS of them.
//
// What is measured: g0's Traefik latency and CPU per change (same method as
// fleetflip.go), the observers' CPU over each flip (net of their idle rate) and
// how many configurations reached them (their plugin logs "emitting configuration" and
// Traefik "Configuration received" at DEBUG: both counted, before and after the flips),
// and the pollers' bytes (a conditional poll every second, a full GET after each flip
// hashed against the bytes before the first).

// groupName is the name of group k.
func groupName(k int) string { return fmt.Sprintf("g%d", k) }

// groupDomain is group k's platform domain: an application gets a platform host under
// its own group's domains only (platform.groups), so each group has one. g0's is the
// fleet's usual platformDomain, where the flip host's path map points.
func groupDomain(k int) string {
	if k == 0 {
		return platformDomain
	}
	return fmt.Sprintf("apps-%s.example.com", groupName(k))
}

// groupNodeArgs replace newNode's --platform.domains with every group's domain, each
// mapped to its group.
func groupNodeArgs(args []string, groups int) []string {
	var domains, maps []string
	for k := range groups {
		domains = append(domains, groupDomain(k))
		maps = append(maps, groupDomain(k)+"="+groupName(k))
	}
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if strings.HasPrefix(a, "--platform.domains=") {
			continue
		}
		out = append(out, a)
	}
	return append(out, "--platform.domains="+strings.Join(domains, ","), "--platform.groups="+strings.Join(maps, ","))
}

// groupOfApp puts application i of apps in one of groups contiguous groups.
func groupOfApp(apps, groups int) func(i int) string {
	return func(i int) string { return groupName(i * groups / apps) }
}

// observedGroups are the groups the observer Traefiks read: spread over the others.
func observedGroups(groups, observers int) []int {
	observers = min(observers, groups-1)
	var out []int
	for k := 1; k <= observers; k++ {
		out = append(out, 1+(k-1)*(groups-1)/observers)
	}
	return out
}

// groupTraefik is one Traefik reading one group.
type groupTraefik struct {
	group                           string
	tr                              *providerTraefik
	routers, services, bodyBytes    int
	traefikRouters, traefikServices int
	interval                        string
	startup                         time.Duration
	idleCores                       float64
	cpu                             []time.Duration // per flip, net of idle
	cpuRaw, idleShare               []time.Duration // per flip, gross, and the idle rate over the flip's span
	// configurations the plugin emitted / Traefik received, before and after the flips
	// (observers only: they log at DEBUG)
	emitted0, received0, emitted1, received1 int
	rssMB, peakMB                            string
}

func (g *groupTraefik) meanCPU() time.Duration { return meanOf(g.cpu) }

func meanOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(len(ds))
}

// logCounts counts the configurations the plugin emitted and Traefik received.
func logCounts(tr *providerTraefik) (emitted, received int) {
	out := tr.proc.Output()
	return strings.Count(out, "emitting configuration"), strings.Count(out, "Configuration received")
}

// groupPoller reads one group's bytes.
type groupPoller struct {
	group string
	etag  string // of the bytes before the first flip
	hash  string // sha256 of those bytes
	bytes int
	// conditional polls (If-None-Match, every second) and how many did not answer 304
	polls, moved int
	// full GETs after the flips and how many differed from the bytes before
	fetches, differed int
}

func bodyHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// groupFlips measures a flip in one group of a grouped fleet through that group's
// Traefik, and what the other groups' Traefiks and pollers see.
func groupFlips(t *task) {
	apps := envInt(t, "SCAFO_BENCH_GROUPS_APPS", 10000)
	groups := envInt(t, "SCAFO_BENCH_GROUPS_N", 10)
	traefiks := envInt(t, "SCAFO_BENCH_GROUPS_TRAEFIKS", 3)
	flips := envInt(t, "SCAFO_BENCH_FLIPS", 20)
	if groups < 2 || apps/groups < 3 {
		t.Fatalf("SCAFO_BENCH_GROUPS_N=%d with %d applications: want at least 2 groups of at least 3", groups, apps)
	}
	loadStart := loadAvg()
	started := time.Now()

	backends := startFleetBackends(t)
	root := storeDir(t)
	groupOf := groupOfApp(apps, groups)
	writeFlipFleet(t, root, fleetSpec{apps: apps, group: groupOf}, backends)
	nd := newNode(t, "bench-a", root)
	nd.proc.Args = groupNodeArgs(nd.proc.Args, groups)
	nd.start(t)
	if err := nd.proc.WaitUntil(time.Minute, func() error { return apiChainHas(nd, nd.name) }); err != nil {
		t.Fatalf("waiting for %s in its own document's API chain: %v", nd.name, err)
	}
	whole := mustNodePoll(t, nd, "", "")
	wholeShape := shapeOf(t, whole.body)

	// Every group's bytes before the flips.
	pollers := make([]*groupPoller, groups)
	for k := range groups {
		p := mustNodePoll(t, nd, "group="+groupName(k), "")
		pollers[k] = &groupPoller{group: groupName(k), etag: p.etag, hash: bodyHash(p.body), bytes: len(p.body)}
	}

	startGroupTraefik := func(k int, observer bool) *groupTraefik {
		g := &groupTraefik{group: groupName(k)}
		p := mustNodePoll(t, nd, "group="+g.group, "")
		sh := shapeOf(t, p.body)
		g.routers, g.services, g.bodyBytes = sh.routers, sh.services, len(p.body)
		g.interval = sh.interval.String()
		if sh.checked == 0 {
			g.interval = "none"
		}
		l := providerLaunch{kind: providerPlugin, endpoints: []string{nodeBaseURL(nd)}, plugin: map[string]any{
			"group": g.group, "name": "edge-" + g.group,
			// Its own state file: the shipped path is a system directory, shared.
			"stateFile": filepath.Join(t.TempDir(), "scafo.last.json"),
		}}
		if observer {
			l.logLevel = "DEBUG"
		}
		g.tr = startProviderTraefik(t, "traefik-"+g.group, l)
		return g
	}
	// A host of group k that is not the flip host: its first application's platform host
	// (g0's first is the flip owner, whose platform host is routed too).
	firstHost := func(k int) string {
		for i := range apps {
			if groupOf(i) == groupName(k) {
				return appName(i) + "." + groupDomain(k)
			}
		}
		return ""
	}
	routes := func(g *groupTraefik, host, want string) error {
		status, body, err := g.tr.get(host, "/")
		if err != nil {
			return err
		}
		if want == "" {
			if status != http.StatusNotFound {
				return fmt.Errorf("%s: %d %q, want 404 (another group's host)", host, status, body)
			}
			return nil
		}
		if status != 200 || body != want {
			return fmt.Errorf("%s: %d %q, want 200 %q", host, status, body, want)
		}
		return nil
	}
	checkHolds := func(g *groupTraefik) {
		ov, err := g.tr.overview()
		if err != nil {
			t.Fatal(err)
		}
		if ov.HTTP.Routers.Total < g.routers || ov.HTTP.Services.Total < g.services || ov.HTTP.Routers.Errors+ov.HTTP.Services.Errors > 0 {
			t.Fatalf("%s's Traefik holds %+v routers and %+v services; the node rendered %d and %d for it",
				g.group, ov.HTTP.Routers, ov.HTTP.Services, g.routers, g.services)
		}
		g.traefikRouters, g.traefikServices = ov.HTTP.Routers.Total, ov.HTTP.Services.Total
	}

	// g0's Traefik: the flips' group.
	current := 0
	want := func(k int) string { return identityName(flipTargets[k], placementOf(k + 1)[0]) }
	flipped := startGroupTraefik(0, false)
	flipped.startup = waitFirstRoute(t, flipped.tr, want(current), "g0's Traefik")
	checkHolds(flipped)
	// It holds g0's hosts and no other group's.
	if err := routes(flipped, firstHost(1), ""); err != nil {
		t.Fatalf("g0's Traefik: %v", err)
	}

	var observers []*groupTraefik
	for _, k := range observedGroups(groups, traefiks-1) {
		g := startGroupTraefik(k, true)
		if err := g.tr.proc.WaitUntil(5*time.Minute, func() error { return routes(g, firstHost(k), "ok") }); err != nil {
			t.Fatalf("waiting 5 min for %s's Traefik: %v", g.group, err)
		}
		g.startup = time.Since(g.tr.proc.Started())
		checkHolds(g)
		if err := routes(g, flipHost, ""); err != nil {
			t.Fatalf("%s's Traefik routes g0's flip host: %v", g.group, err)
		}
		observers = append(observers, g)
	}
	all := append([]*groupTraefik{flipped}, observers...)
	for _, g := range all {
		t.Logf("%s: %d routers, %d services, %d bytes (the whole fleet: %d routers, %d services, %d bytes); Traefik routed after %s, holds %d routers, %d services",
			g.group, g.routers, g.services, g.bodyBytes, wholeShape.routers, wholeShape.services, len(whole.body),
			g.startup.Round(time.Millisecond), g.traefikRouters, g.traefikServices)
	}

	// Idle rates, over one window for all.
	for _, g := range all {
		settleIdle(g.tr, 0.05, 2*time.Minute)
	}
	idleWin := 4 * time.Second
	idle0 := make([]time.Duration, len(all))
	for i, g := range all {
		idle0[i] = cpuTime(g.tr.proc)
	}
	time.Sleep(idleWin)
	for i, g := range all {
		g.idleCores = (cpuTime(g.tr.proc) - idle0[i]).Seconds() / idleWin.Seconds()
	}
	// The observers' logs before the flips: the startup configuration is there, or the
	// count below proves nothing.
	for _, g := range observers {
		g.emitted0, g.received0 = logCounts(g.tr)
		if g.emitted0 < 1 || g.received0 < 1 {
			t.Fatalf("%s's Traefik logged %d emitted and %d received configurations at startup: the DEBUG lines counted are not there",
				g.group, g.emitted0, g.received0)
		}
	}

	// Pollers: a conditional poll of every group but g0, every second, until the flips end.
	ctx, stopPolls := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, p := range pollers[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				r, err := nd.pollQuery("group="+p.group, p.etag, "")
				if err != nil {
					continue
				}
				p.polls++
				if r.status != http.StatusNotModified {
					p.moved++
				}
			}
		}()
	}
	defer func() { stopPolls(); wg.Wait() }()

	g0hash := pollers[0].hash
	// flip moves flipPrefix once and measures it through measured (whose node query is
	// query), and the CPU of every Traefik in tracked (measured first) over the flip.
	flip := func(i int, measured *groupTraefik, query string, tracked []*groupTraefik) flipSample {
		next := 1 - current
		nodeDone := parkPoll(t, nd, query)
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		before := make([]time.Duration, len(tracked))
		for j, g := range tracked {
			before[j] = cpuTime(g.tr.proc)
		}
		at := time.Now()
		putFlip(t, nd, flipTargets[next])
		t0 := time.Now()
		var s flipSample
		if err := waitRouted(measured.tr, want(next), t0, &s.latency); err != nil {
			t.Fatalf("flip %d to %s: %v", i, flipTargets[next], err)
		}
		s.routed = s.latency + t0.Sub(at)
		if nt := <-nodeDone; !nt.IsZero() {
			s.node = nt.Sub(at)
		} else {
			t.Errorf("flip %d: the long-poll (?%s) did not answer with new bytes", i, query)
		}
		end := settleIdle(measured.tr, measured.idleCores, time.Minute)
		s.settle = end.Sub(t0)
		for j, g := range tracked {
			raw := cpuTime(g.tr.proc) - before[j]
			net := raw - time.Duration(g.idleCores*float64(end.Sub(at)))
			if j == 0 {
				s.cpuRaw, s.cpu = raw, net
			}
			g.cpu = append(g.cpu, net)
			g.cpuRaw = append(g.cpuRaw, raw)
			g.idleShare = append(g.idleShare, raw-net)
		}
		current = next
		// Every group's bytes after the flip: g0's moved, no other group's did.
		for k, p := range pollers {
			r := mustNodePoll(t, nd, "group="+p.group, "")
			h := bodyHash(r.body)
			if k == 0 {
				if h == g0hash {
					t.Errorf("flip %d: g0's bytes did not change", i)
				}
				g0hash = h
				continue
			}
			p.fetches++
			if h != p.hash || r.etag != p.etag {
				p.differed++
				t.Errorf("flip %d in g0 changed %s's bytes (ETag %s → %s)", i, p.group, p.etag, r.etag)
			}
		}
		var others []string
		for _, g := range tracked[1:] {
			others = append(others, fmt.Sprintf("%s %s", g.group, g.cpu[len(g.cpu)-1].Round(10*time.Millisecond)))
		}
		t.Logf("flip %2d → %s: routed by %s's Traefik after %s (node published after %s); its CPU %s net (%s gross); other Traefiks' CPU over the flip: %s",
			i+1, flipTargets[next], measured.group, s.latency.Round(time.Millisecond), s.node.Round(time.Millisecond),
			s.cpu.Round(10*time.Millisecond), s.cpuRaw.Round(10*time.Millisecond), strings.Join(others, ", "))
		return s
	}
	var samples []flipSample
	for i := range flips {
		samples = append(samples, flip(i, flipped, "group=g0", all))
	}
	// The control, same node, same fleet, same flips: a Traefik reading every group (no
	// group setting), as every Traefik did before groups. The group Traefiks keep running.
	var control *groupTraefik
	var controlSamples []flipSample
	if os.Getenv("SCAFO_BENCH_GROUPS_CONTROL") != "0" {
		control = &groupTraefik{group: "every group"}
		control.routers, control.services, control.bodyBytes = wholeShape.routers, wholeShape.services, len(whole.body)
		control.interval = wholeShape.interval.String()
		control.tr = startProviderTraefik(t, "traefik-all", providerLaunch{kind: providerPlugin, endpoints: []string{nodeBaseURL(nd)}, plugin: map[string]any{
			"name": "edge-all", "stateFile": filepath.Join(t.TempDir(), "scafo.last.json"),
		}})
		if err := control.tr.proc.WaitUntil(5*time.Minute, func() error {
			if err := routes(control, firstHost(groups-1), "ok"); err != nil {
				return err
			}
			_, body, err := control.tr.get(flipHost, "/"+flipPrefix+"/x")
			if err == nil && body != want(current) {
				err = fmt.Errorf("%s/%s: %q, want %q", flipHost, flipPrefix, body, want(current))
			}
			return err
		}); err != nil {
			t.Fatalf("waiting 5 min for the every-group Traefik: %v", err)
		}
		control.startup = time.Since(control.tr.proc.Started())
		checkHolds(control)
		settleIdle(control.tr, 0.05, 2*time.Minute)
		c0 := cpuTime(control.tr.proc)
		time.Sleep(idleWin)
		control.idleCores = (cpuTime(control.tr.proc) - c0).Seconds() / idleWin.Seconds()
		for i := range flips {
			controlSamples = append(controlSamples, flip(i, control, "", []*groupTraefik{control}))
		}
	}
	stopPolls()
	wg.Wait()
	for _, g := range observers {
		g.emitted1, g.received1 = logCounts(g.tr)
		if g.emitted1 != g.emitted0 || g.received1 != g.received0 {
			t.Errorf("%s's Traefik got configurations during g0's flips: plugin emitted %d → %d, Traefik received %d → %d",
				g.group, g.emitted0, g.emitted1, g.received0, g.received1)
		}
		if err := routes(g, firstHost(groupIndex(g.group)), "ok"); err != nil {
			t.Errorf("%s's Traefik after the flips: %v", g.group, err)
		}
	}
	for _, p := range pollers[1:] {
		if p.moved > 0 {
			t.Errorf("%s: %d of %d conditional polls during g0's flips did not answer 304", p.group, p.moved, p.polls)
		}
	}
	if control != nil {
		all = append(all, control)
	}
	for _, g := range all {
		rss, peak := rssKB(g.tr.proc)
		g.rssMB, g.peakMB = mb(rss), mb(peak)
	}
	groupsReport(groupsRun{
		apps: apps, groups: groups, flips: flips, whole: len(whole.body),
		wholeRouters: wholeShape.routers, wholeServices: wholeShape.services,
		flipped: flipped, observers: observers, pollers: pollers[1:], samples: samples,
		control: control, controlSamples: controlSamples,
		loadStart: loadStart, loadEnd: loadAvg(), took: time.Since(started),
	})
	for _, g := range all {
		g.tr.proc.Stop(10 * time.Second)
	}
	nd.proc.Stop(10 * time.Second)
}

// groupIndex is k of groupName(k).
func groupIndex(name string) int {
	var k int
	fmt.Sscanf(name, "g%d", &k)
	return k
}

type groupsRun struct {
	apps, groups, flips                int
	whole, wholeRouters, wholeServices int
	flipped                            *groupTraefik
	observers                          []*groupTraefik
	pollers                            []*groupPoller
	samples                            []flipSample
	control                            *groupTraefik // nil when not measured
	controlSamples                     []flipSample
	loadStart, loadEnd                 string
	took                               time.Duration
}

// Section 6's plugin rows of the 2026-11-30 08:34–09:14 UTC run (two rounds each, default
// health checks), the ungrouped reference this section's ratios use.
var (
	ungrouped1k   = [2]float64{0.15, 0.16} // p50 s
	ungrouped1kC  = [2]float64{0.13, 0.15} // CPU s per change
	ungrouped10k  = [2]float64{1.56, 2.19}
	ungrouped10kC = [2]float64{1.48, 1.57}
)

// flipRow is a measured Traefik's row of the section's table.
func flipRow(label string, g *groupTraefik, samples []flipSample, updates string) (string, float64, float64) {
	lat := make([]time.Duration, len(samples))
	node := make([]time.Duration, len(samples))
	var cpu time.Duration
	for i, s := range samples {
		lat[i], node[i] = s.latency, s.node
		cpu += s.cpu
	}
	mean := 0.0
	if len(samples) > 0 {
		mean = (cpu / time.Duration(len(samples))).Seconds()
	}
	p50 := pct(lat, 50).Seconds()
	return fmt.Sprintf("| %s | %d / %d | %.1f | %s | %.1f | %d | %.2f | %s | %s | %s | %.2f | %.2f | %s | %s (%s) |",
		label, g.routers, g.services, float64(g.bodyBytes)/(1<<20), g.interval, g.startup.Seconds(), len(samples), p50,
		secs(pct(lat, 95)), secs(pct(lat, 100)), secs(pct(node, 50)), mean, g.idleCores, updates, g.rssMB, g.peakMB), p50, mean
}

func groupsReport(r groupsRun) {
	f := r.flipped
	rows := []string{
		fmt.Sprintf("Measured by `go run ./e2e/bench -only groups` (`e2e/bench/groups.go`) on %d cores shared with other engineers' builds and tests: "+
			"**load average %s at the start and %s at the end** (1/5/15 min), %s. One scafo-node (this tree) on a dir store holding the generated fleet of section 6 "+
			"(`fleetgen.go`) with %s applications in %d ingress groups `g0`…`g%d` of %s contiguous applications each (`\"ingress\": {\"group\": …}` "+
			"in every application object; platform domain `%s` mapped to `g0`, `apps-gN.example.com` to `gN`, with `--platform.groups`); `g0` holds the flip "+
			"host and both flip targets. Traefik %s with the provider plugin on the shipped `deploy/traefik/traefik-plugin.yml`, one per group read, the "+
			"plugin's `group` set: `g0`'s Traefik takes the flips (log level as shipped, INFO); the other groups' Traefiks (%s) log at DEBUG so that every "+
			"configuration their plugin emits (`emitting configuration`) and Traefik receives (`Configuration received`, which also counts Traefik's internal "+
			"provider at startup) is a line, counted before and after the flips (the startup configurations are there: the count works). Every group but "+
			"`g0` (%d) is also polled once a second with `If-None-Match` (what an HTTP-provider Traefik on that group would fetch), and fetched whole after "+
			"every flip, its SHA-256 and ETag compared with the bytes before the first flip. The whole fleet (no `?group=`): %d routers, %d services, %.1f MB.",
			runtime.NumCPU(), r.loadStart, r.loadEnd, r.took.Round(time.Second), thousands(r.apps), r.groups, r.groups-1, thousands(r.apps/r.groups),
			platformDomain, traefikVersion(), groupList(r.observers), len(r.pollers), r.wholeRouters, r.wholeServices, float64(r.whole)/(1<<20)),
		"",
		fmt.Sprintf("%d flips in `g0`, as section 6's (PUT of `%s`'s path map, after a random 0–1 s pause; latency: PUT answered → first request through the "+
			"measured Traefik answered by the new target; node publish: PUT sent → a long-poll parked on the measured Traefik's query answered; CPU per "+
			"change: utime+stime from just before the PUT until the measured Traefik is back at its idle rate for a second, net of each Traefik's idle rate "+
			"over that same span). Then the control, in the same run on the same node: a Traefik reading every group (no `group` setting, as before "+
			"groups), the group Traefiks still running, %d more flips.", r.flips, flipHost, len(r.controlSamples)),
		"",
		"| Traefik | routers / services it loads | config MB | health checks | startup s | flips | p50 s | p95 s | max s | node publish p50 s | CPU s per change (mean) | idle cores | configurations it received during the flips, control's included (plugin emitted / Traefik received) | RSS MB (peak) |",
		"|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
	}
	row, p50, cpu := flipRow("`g0` (the flips' group)", f, r.samples, fmt.Sprintf("%d (one per flip)", len(r.samples)))
	rows = append(rows, row)
	for _, g := range r.observers {
		rows = append(rows, fmt.Sprintf("| `%s` (another group) | %d / %d | %.1f | %s | %.1f | %d | – | – | – | – | %.2f net (%.2f gross, %.2f at its idle rate over the same span) | %.2f | **%d / %d** (%d / %d at startup, %d / %d after all the flips) | %s (%s) |",
			g.group, g.routers, g.services, float64(g.bodyBytes)/(1<<20), g.interval, g.startup.Seconds(), len(g.cpu), g.meanCPU().Seconds(),
			meanOf(g.cpuRaw).Seconds(), meanOf(g.idleShare).Seconds(), g.idleCores,
			g.emitted1-g.emitted0, g.received1-g.received0, g.emitted0, g.received0, g.emitted1, g.received1, g.rssMB, g.peakMB))
	}
	var cp50, ccpu float64
	if r.control != nil {
		var crow string
		crow, cp50, ccpu = flipRow("control: every group (no `group`)", r.control, r.controlSamples, fmt.Sprintf("%d (one per flip)", len(r.controlSamples)))
		rows = append(rows, crow)
	}
	rows = append(rows, "", "| poller | bytes | conditional polls during the flips | answered other than 304 | whole fetches after a flip | differing from before |",
		"|---|---:|---:|---:|---:|---:|")
	for _, p := range r.pollers {
		rows = append(rows, fmt.Sprintf("| `%s` | %d | %d | %d | %d | %d |", p.group, p.bytes, p.polls, p.moved, p.fetches, p.differed))
	}
	rows = append(rows, "")
	if r.control != nil && cp50 > 0 && ccpu > 0 {
		rows = append(rows, fmt.Sprintf("Same run, `g0`'s Traefik against the every-group control: p50 %.2f s vs %.2f s (**%.2f×**), CPU per change %.2f vs %.2f s (**%.2f×**).",
			p50, cp50, p50/cp50, cpu, ccpu, cpu/ccpu), "")
	}
	rows = append(rows,
		fmt.Sprintf("Against section 6's ungrouped plugin rows (same harness and flips, another run: 2026-11-30 08:34–09:14 UTC, load 7–12; two rounds each): "+
			"`g0`'s p50 %.2f s is %.2f× / %.2f× the 1 000-application p50 (%.2f / %.2f s) and %.2f× / %.2f× the 10 000-application p50 (%.2f / %.2f s); "+
			"its CPU per change %.2f s is %.2f× / %.2f× the 1 000-application figure (%.2f / %.2f s) and %.2f× / %.2f× the 10 000-application one (%.2f / %.2f s). "+
			"The other groups' Traefiks spent %s CPU-s per flip (mean gross, against their idle rate over the same span: they received nothing, so the difference is noise; the clock ticks in 10 ms and their health checks, every %s, come in bursts).",
			p50, p50/ungrouped1k[0], p50/ungrouped1k[1], ungrouped1k[0], ungrouped1k[1],
			p50/ungrouped10k[0], p50/ungrouped10k[1], ungrouped10k[0], ungrouped10k[1],
			cpu, cpu/ungrouped1kC[0], cpu/ungrouped1kC[1], ungrouped1kC[0], ungrouped1kC[1],
			cpu/ungrouped10kC[0], cpu/ungrouped10kC[1], ungrouped10kC[0], ungrouped10kC[1], observerCPU(r.observers), f.interval), "")
	report.add(secGroups, rows...)
}

func groupList(gs []*groupTraefik) string {
	var s []string
	for _, g := range gs {
		s = append(s, "`"+g.group+"`")
	}
	return strings.Join(s, ", ")
}

func observerCPU(gs []*groupTraefik) string {
	var s []string
	for _, g := range gs {
		s = append(s, fmt.Sprintf("%s %.3f (idle rate: %.3f)", g.group, meanOf(g.cpuRaw).Seconds(), meanOf(g.idleShare).Seconds()))
	}
	return strings.Join(s, ", ")
}
