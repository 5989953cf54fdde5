package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// shippedConfig is the product's Traefik static configuration; the bench runs Traefik on
// it with only addresses and the provider changed.
var shippedConfig = filepath.Join(repoRoot, "deploy", "traefik", "traefik.yml")

// traefikStatic turns the shipped static configuration into the bench's: entry points
// on loopback ports, the file provider (watching dynFile) instead of the HTTP provider,
// no ACME resolver, no access log. Every entryPoints.*.http setting, the provider throttle and the
// log level stay as shipped.
//
// idlePerHost > 0 also sets serversTransport.maxIdleConnsPerHost (Traefik's default is
// 200): every leaf here is one nginx address, so raising it lets Traefik keep one
// connection per leaf, as it does with one server per leaf in production.
func traefikStatic(shipped []byte, web, websecure int, dynFile string, idlePerHost int) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(shipped, &cfg); err != nil {
		return nil, fmt.Errorf("parsing the shipped static configuration: %w", err)
	}
	eps, ok := cfg["entryPoints"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("shipped configuration has no entryPoints")
	}
	for name, port := range map[string]int{"web": web, "websecure": websecure} {
		ep, ok := eps[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("shipped configuration has no entryPoints.%s", name)
		}
		ep["address"] = addr(port)
	}
	prov, ok := cfg["providers"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("shipped configuration has no providers")
	}
	if _, ok := prov["http"]; !ok {
		return nil, fmt.Errorf("shipped configuration has no providers.http")
	}
	delete(prov, "http")
	prov["file"] = map[string]any{"filename": dynFile, "watch": true}
	delete(cfg, "certificatesResolvers")
	delete(cfg, "accessLog") // a line per request would be the bench's largest cost
	if idlePerHost > 0 {
		// Added to the shipped serversTransport (its dial timeout stays as shipped).
		st, _ := cfg["serversTransport"].(map[string]any)
		if st == nil {
			st = map[string]any{}
		}
		if _, ok := st["maxIdleConnsPerHost"]; ok {
			return nil, fmt.Errorf("shipped configuration sets serversTransport.maxIdleConnsPerHost; the bench would override it")
		}
		st["maxIdleConnsPerHost"] = idlePerHost
		cfg["serversTransport"] = st
	}
	return yaml.Marshal(cfg)
}

// traefikCase is one dynamic configuration Traefik is measured on.
type traefikCase struct {
	name     string
	apps     int
	prefixes int
	opts     render.Options
	// idlePerHost, when set, raises Traefik's maxIdleConnsPerHost (see traefikStatic).
	idlePerHost int
	// hostHitOnly sends only the host-hit load.
	hostHitOnly bool
}

// traefikRequest is one probe sent through Traefik.
type traefikRequest struct {
	name   string
	host   string
	path   string
	status int
	// body the backend answers with ("ok", or the alternate listener's port for ti.to's
	// own application; "" for a Traefik 404).
	body string
}

// renderForBackend derives the generated fleet and points every upstream at the local
// backend: app-00000 (ti.to's own application) at altPort, so that a response says
// which route answered, every other leaf at one of ports, round-robin by leaf (one
// application's leaf keeps its port on every host of the application). Node API
// ports (node-delegated health checks) go to the leaf's own listener.
func renderForBackend(t *task, c traefikCase, ports []int, altPort int) ([]byte, *routing.Document) {
	doc, _ := fleet.Derive(fleet.GenerateState(c.apps, c.prefixes), fleet.GenerateOptions())
	if doc == nil {
		t.Fatal("fleet.Derive produced no document")
	}
	appIndex := map[string]int{}
	for i := range doc.Routes {
		app := doc.Routes[i].Application
		k, ok := appIndex[app]
		if !ok {
			k = len(appIndex)
			appIndex[app] = k
		}
		for j := range doc.Routes[i].Upstreams {
			p := ports[(k*len(doc.Routes[i].Upstreams)+j)%len(ports)]
			if app == "app-00000" {
				p = altPort
			}
			doc.Routes[i].Upstreams[j].Address = addr(p)
			doc.Routes[i].Upstreams[j].APIPort = p
		}
	}
	if doc.API != nil {
		for j := range doc.API.Upstreams {
			doc.API.Upstreams[j].Address = addr(ports[0])
			doc.API.Upstreams[j].APIPort = ports[0]
		}
	}
	body, err := render.Traefik(doc, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	return body, doc
}

func dig(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

// configShape counts what Traefik has to build from a rendered configuration.
type configShape struct {
	routers, services, leaves, checked int
	interval                           time.Duration
}

func shapeOf(t *task, body []byte) configShape {
	var cfg struct {
		HTTP struct {
			Routers  map[string]json.RawMessage `json:"routers"`
			Services map[string]struct {
				LoadBalancer *struct {
					HealthCheck *struct {
						Interval string `json:"interval"`
					} `json:"healthCheck"`
				} `json:"loadBalancer"`
			} `json:"services"`
		} `json:"http"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		t.Fatal(err)
	}
	s := configShape{routers: len(cfg.HTTP.Routers), services: len(cfg.HTTP.Services)}
	for _, svc := range cfg.HTTP.Services {
		if svc.LoadBalancer == nil {
			continue
		}
		s.leaves++
		if hc := svc.LoadBalancer.HealthCheck; hc != nil {
			s.checked++
			d, err := time.ParseDuration(hc.Interval)
			if err != nil {
				t.Fatalf("health-check interval %q: %v", hc.Interval, err)
			}
			s.interval = d
		}
	}
	return s
}

var traefikClient = &http.Client{
	Timeout:       5 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func traefikGet(web int, r traefikRequest) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr(web)+r.path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = r.host
	resp, err := traefikClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}

// traefikRun is what one case measured.
type traefikRun struct {
	c       traefikCase
	shape   configShape
	bytes   int
	startup time.Duration
	// rssMB after startup and peakMB (VmHWM) at the end.
	rssMB, peakMB string
	health        healthLoad
	// idleCPU is Traefik's CPU use (cores) during the health-check window.
	idleCPU float64
	results map[string]wrkResult
}

// wrkScript writes a wrk Lua script that sends every request to a random one of paths
// and hosts (pairs), so that a hit is averaged over the routers' positions in Traefik's
// priority-ordered scan rather than being one lucky or unlucky router.
func wrkScript(t *task, dir, name string, hosts, paths []string) string {
	var b strings.Builder
	b.WriteString("local hosts = {")
	for i, h := range hosts {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q", h)
	}
	b.WriteString("}\nlocal paths = {")
	for i, p := range paths {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q", p)
	}
	b.WriteString("}\nlocal n = #hosts\nrequest = function()\n  local i = math.random(n)\n" +
		"  return wrk.format(\"GET\", paths[i], { [\"Host\"] = hosts[i] })\nend\n")
	file := filepath.Join(dir, name+".lua")
	mustWrite(t, file, []byte(b.String()))
	return file
}

// sampleHosts returns up to n exact hosts of doc's application routes, spread evenly
// over the sorted list, leaving out ti.to's application (it answers from the other port).
func sampleHosts(doc *routing.Document, n int) []string {
	var all []string
	for _, r := range doc.Routes {
		if !routing.IsWildcard(r.Host) && r.Application != "app-00000" {
			all = append(all, r.Host)
		}
	}
	if len(all) <= n {
		return all
	}
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, all[i*len(all)/n])
	}
	return out
}

// traefikCases selects cases by SCAFO_BENCH_TRAEFIK_CASES ("|"-separated names).
func traefikCases(cases []traefikCase) []traefikCase {
	only := os.Getenv("SCAFO_BENCH_TRAEFIK_CASES")
	if only == "" {
		return cases
	}
	var keep []traefikCase
	for _, c := range cases {
		for _, name := range strings.Split(only, "|") {
			if name == c.name {
				keep = append(keep, c)
			}
		}
	}
	return keep
}

// traefikBench is what the Traefik measurements share: the shipped static
// configuration and the backends.
type traefikBench struct {
	shipped      []byte
	backend, alt *nginx
	load         wrkLoad
}

func newTraefikBench(t *task) *traefikBench {
	shipped, err := os.ReadFile(shippedConfig)
	if err != nil {
		t.Fatal(err)
	}
	return &traefikBench{
		shipped: shipped,
		backend: startBackend(t),
		// The backend's second listener, for ti.to's own application.
		alt:  startBackendAlt(t),
		load: defaultLoad(t, 5),
	}
}

// quietInterval is the health-check interval of the routing-cost runs: longer than any
// of them, so that no check fires while the routers are measured.
const quietInterval = "1h"

// traefikRoutingCost loads a real Traefik with the configuration we render, health
// checks at an interval no run reaches so that the routers alone are measured, at 100, 1 000 and
// 10 000 applications and at 10 000 prefixes on one host, grouped and per prefix:
// startup (process start → routed), memory, throughput on hits and misses.
func traefikRoutingCost(t *task) {
	tb := newTraefikBench(t)
	// Traefik's failover needs active checks on its children (it registers for their
	// status), so they stay, at an interval no measurement lasts.
	quiet := render.Options{HealthCheckInterval: quietInterval}
	perPrefix := quiet
	perPrefix.PathGroupThreshold = routing.MaxPaths
	cases := traefikCases([]traefikCase{
		{name: "100 apps", apps: 100, opts: quiet},
		{name: "1 000 apps", apps: 1000, opts: quiet},
		{name: "10 000 apps", apps: 10000, opts: quiet},
		{name: "10 000 apps + 10 000 prefixes, grouped (threshold 64, default)", apps: 10000, prefixes: 10000, opts: quiet},
		{name: "10 000 apps + 10 000 prefixes, per-prefix routers", apps: 10000, prefixes: 10000, opts: perPrefix},
	})
	var runs []traefikRun
	for _, c := range cases {
		t.Run(c.name, func(t *task) { runs = append(runs, tb.measure(t, c)) })
	}
	routingReport(runs, tb.load)
}

// traefikHealthCheckLoad measures the active health checks of the configuration as
// rendered: checks per second at the backend, the busiest second, Traefik's CPU on an
// otherwise idle proxy, and whether host hits still succeed, at 5 s (the old default,
// set explicitly), 30 s and the automatic interval (the default: at most
// render.HealthCheckBudget checks/s).
func traefikHealthCheckLoad(t *task) {
	tb := newTraefikBench(t)
	fixed := render.Options{HealthCheckInterval: "5s"}
	slow := render.Options{HealthCheckInterval: "30s"}
	auto := render.Options{}
	// One keep-alive connection per leaf, as with distinct servers, within this
	// machine's open-file limit (a leaf check holds one file descriptor).
	const pool = 12000
	cases := traefikCases([]traefikCase{
		{name: "1 000 apps, checks every 5s", apps: 1000, opts: fixed, idlePerHost: pool, hostHitOnly: true},
		{name: "1 000 apps, automatic interval", apps: 1000, opts: auto, idlePerHost: pool, hostHitOnly: true},
		{name: "5 000 apps, checks every 5s", apps: 5000, opts: fixed, idlePerHost: pool, hostHitOnly: true},
		{name: "5 000 apps, checks every 30s", apps: 5000, opts: slow, idlePerHost: pool, hostHitOnly: true},
		{name: "5 000 apps, automatic interval", apps: 5000, opts: auto, idlePerHost: pool, hostHitOnly: true},
		{name: "10 000 apps, checks every 5s", apps: 10000, opts: fixed, idlePerHost: pool, hostHitOnly: true},
		{name: "10 000 apps, checks every 30s", apps: 10000, opts: slow, idlePerHost: pool, hostHitOnly: true},
		{name: "10 000 apps, automatic interval", apps: 10000, opts: auto, idlePerHost: pool, hostHitOnly: true},
	})
	var runs []traefikRun
	for _, c := range cases {
		t.Run(c.name, func(t *task) { runs = append(runs, tb.measure(t, c)) })
	}
	healthReport(runs, tb.load, pool)
}

// measure runs Traefik on one case's configuration and measures it. Overload is a
// result, not a failure: failed requests are counted in the report.
func (tb *traefikBench) measure(t *task, c traefikCase) traefikRun {
	dir := t.TempDir()
	body, doc := renderForBackend(t, c, tb.backend.ports, tb.alt.port)
	// JSON is YAML: the file provider decodes .yaml with the same decoder the HTTP
	// provider uses for every body it fetches.
	dyn := filepath.Join(dir, "dynamic.yaml")
	mustWrite(t, dyn, body)
	web, websecure := freePort(t), freePort(t)
	static, err := traefikStatic(tb.shipped, web, websecure, dyn, c.idlePerHost)
	if err != nil {
		t.Fatal(err)
	}
	staticFile := filepath.Join(dir, "traefik.yml")
	mustWrite(t, staticFile, static)

	// Probes: one request of each kind, answered as routed, marks startup.
	probes := []traefikRequest{
		{name: "host hit", host: "app-00042." + platformDomain, path: "/", status: 200, body: "ok"},
		{name: "miss", host: "nosuch.example.invalid", path: "/", status: 404},
	}
	hosts := sampleHosts(doc, 1000)
	roots := make([]string, len(hosts))
	for i := range roots {
		roots[i] = "/"
	}
	type load1 struct {
		name   string
		script string
		url    string
		host   string
		ok     bool // 2xx expected
	}
	loads := []load1{{name: "host hit", script: wrkScript(t, dir, "hosts", hosts, roots), ok: true}}
	if !c.hostHitOnly {
		loads = append(loads, load1{name: "miss", url: "/", host: "nosuch.example.invalid"})
	}
	if c.prefixes > 0 {
		// Prefix k targets the k%100-th application of ti.to's account: 5001 → app-00100.
		probes = append(probes,
			traefikRequest{name: "path hit", host: "ti.to", path: fmt.Sprintf("/p%05d/x", c.prefixes/2+1), status: 200, body: "ok"},
			traefikRequest{name: "path miss", host: "ti.to", path: "/nothere/x", status: 200, body: itoa(tb.alt.port)},
		)
		var tiHosts, paths []string
		for k := 0; k < c.prefixes; k += max(1, c.prefixes/1000) {
			if k%100 == 0 {
				continue // targets ti.to's own application: not a flip
			}
			tiHosts, paths = append(tiHosts, "ti.to"), append(paths, fmt.Sprintf("/p%05d/x", k))
		}
		if !c.hostHitOnly {
			loads = append(loads,
				load1{name: "path hit", script: wrkScript(t, dir, "paths", tiHosts, paths), ok: true},
				load1{name: "path miss", url: "/nothere/x", host: "ti.to", ok: true})
		}
	}

	tr := newProc(t, "traefik", bins.traefik, "--configFile="+staticFile)
	tr.MustStart(t)
	if err := tr.WaitUntil(90*time.Second, func() error {
		for _, r := range probes {
			status, got, err := traefikGet(web, r)
			if err != nil {
				return err
			}
			if status != r.status || (r.body != "" && got != r.body) {
				return fmt.Errorf("%s: %d %q, want %d %q", r.name, status, got, r.status, r.body)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("waiting 90s for Traefik routing %s: %v", c.name, err)
	}
	run := traefikRun{c: c, shape: shapeOf(t, body), bytes: len(body), startup: time.Since(tr.Started()), results: map[string]wrkResult{}}
	rss, _ := rssKB(tr)
	run.rssMB = mb(rss)
	t.Logf("%s: %d routers, %d services, %d bytes; routed %s after start", c.name, run.shape.routers, run.shape.services, run.bytes, run.startup.Round(time.Millisecond))

	// Health checks on an idle Traefik. Traefik starts every service's ticker when it
	// loads the configuration (about when it starts routing), so the checks come in one
	// burst per interval, at load + k×interval. A window of whole intervals starting
	// half an interval from now holds exactly one burst per interval.
	if iv := run.shape.interval; iv > 0 && iv < time.Minute {
		window := iv * time.Duration((10*time.Second+iv-1)/iv)
		from := time.Now().Add(iv / 2)
		time.Sleep(time.Until(from))
		cpu0 := cpuTime(tr)
		time.Sleep(window)
		run.idleCPU = (cpuTime(tr) - cpu0).Seconds() / window.Seconds()
		run.health = tb.backend.healthLoad(t, from, window)
		run.health.expected = float64(run.shape.checked) / iv.Seconds()
		t.Logf("health checks: %.0f/s expected, %.0f/s measured, busiest second %d; Traefik CPU %.2f cores",
			run.health.expected, run.health.perSec, run.health.peakSecond, run.idleCPU)
	}

	for _, l := range loads {
		var res wrkResult
		if l.script != "" {
			res = runWrkScript(t, tb.load, "http://"+addr(web)+"/", l.script)
		} else {
			res = runWrk(t, tb.load, "http://"+addr(web)+l.url, "Host: "+l.host)
		}
		t.Logf("%s: %.0f req/s, p99 %s ms, %d non-2xx of %d, socket errors %q", l.name, res.reqPerSec, ms(res.p99), res.non2xx, res.requests, res.socketErrors)
		if !l.ok {
			res.non2xx = res.requests - res.non2xx // for a miss, count what was NOT a 404-class answer
		}
		run.results[l.name] = res
	}
	_, peak := rssKB(tr)
	run.peakMB = mb(peak)
	tr.Stop(10 * time.Second)
	return run
}

// cell formats one wrk result: req/s (p99 ms), and failures when any.
func cell(r traefikRun, name string) string {
	res, ok := r.results[name]
	if !ok {
		return "–"
	}
	s := fmt.Sprintf("%.0f (%s)", res.reqPerSec, ms(res.p99))
	if res.non2xx > 0 {
		s += fmt.Sprintf(" **%d of %d failed**", res.non2xx, res.requests)
	}
	return s
}

func findRun(runs []traefikRun, name string) *traefikRun {
	for i := range runs {
		if runs[i].c.name == name {
			return &runs[i]
		}
	}
	return nil
}

// ratio is a's req/s over b's for one request kind.
func ratio(a, b *traefikRun, key string) string {
	if a == nil || b == nil || b.results[key].reqPerSec == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a.results[key].reqPerSec/b.results[key].reqPerSec)
}

func routingReport(runs []traefikRun, load wrkLoad) {
	rows := []string{
		"### 4a. Routing cost (health checks every " + quietInterval + ": none fires during a run)",
		"",
		fmt.Sprintf("Traefik %s on the shipped static configuration (`deploy/traefik/traefik.yml`: entry-point path safety, "+
			"providersThrottleDuration 100ms) with the file provider reading our rendered JSON (the HTTP provider decodes its "+
			"body with the same YAML decoder), Traefik restarted per configuration. The render's health-check interval is "+
			quietInterval+" here, so that no active check fires and these rows measure the routers; 4b measures the checks. Every "+
			"upstream points at a local nginx answering 200 (leaves spread over its "+itoa(backendPorts)+" listeners). wrk `%s` per request kind: a host hit is one of up to 1 000 hosts "+
			"picked at random per request (a wrk Lua script), a path hit one of 1 000 prefixes of ti.to; a miss is an "+
			"unknown host (404); a path miss is ti.to/nothere/x, which falls through every path router of ti.to to the "+
			"host's own application. Startup is process start → one request of each kind answered as routed. "+
			"Cells: req/s (p99 ms).", traefikVersion(), load),
		"",
		"| configuration | routers / services | config MB | startup s | RSS MB after startup (peak) | host hit | miss | path hit | path miss |",
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|",
	}
	for _, r := range runs {
		rows = append(rows, fmt.Sprintf("| %s | %d / %d | %.1f | %.1f | %s (%s) | %s | %s | %s | %s |",
			r.c.name, r.shape.routers, r.shape.services, float64(r.bytes)/(1<<20), r.startup.Seconds(),
			r.rssMB, r.peakMB, cell(r, "host hit"), cell(r, "miss"), cell(r, "path hit"), cell(r, "path miss")))
	}
	small, big := findRun(runs, "100 apps"), findRun(runs, "10 000 apps")
	grouped := findRun(runs, "10 000 apps + 10 000 prefixes, grouped (threshold 64, default)")
	per := findRun(runs, "10 000 apps + 10 000 prefixes, per-prefix routers")
	rows = append(rows, "", "Ratios (same run):", "")
	if small != nil && big != nil {
		rows = append(rows, fmt.Sprintf("- 10 000 apps vs 100 apps: host hit %s, miss %s; startup %.1f s vs %.1f s.",
			ratio(big, small, "host hit"), ratio(big, small, "miss"), big.startup.Seconds(), small.startup.Seconds()))
	}
	if big != nil && grouped != nil {
		rows = append(rows, fmt.Sprintf("- adding 10 000 grouped prefixes to 10 000 apps: host hit %s, miss %s.",
			ratio(grouped, big, "host hit"), ratio(grouped, big, "miss")))
	}
	if grouped != nil && per != nil {
		rows = append(rows, fmt.Sprintf("- grouped vs per-prefix path routers (after/before): path hit %s, path miss %s, host hit %s, miss %s; "+
			"routers %d vs %d; startup %.1f s vs %.1f s; peak RSS %s vs %s MB.",
			ratio(grouped, per, "path hit"), ratio(grouped, per, "path miss"), ratio(grouped, per, "host hit"), ratio(grouped, per, "miss"),
			grouped.shape.routers, per.shape.routers, grouped.startup.Seconds(), per.startup.Seconds(), grouped.peakMB, per.peakMB))
	}
	rows = append(rows, "",
		"Why a miss costs more than a hit: Traefik v3.6's HTTP muxer (`pkg/muxer/http/mux.go`) keeps one list of routes "+
			"sorted by priority and tries them in order until one matches, so a request pays for every router ahead of its "+
			"own and a miss pays for all of them; our path routers (priority 50 000) and guards (45 000) sit ahead of every "+
			"host router (40 000), so each path router is paid by every request for every host. `AddRoute` also re-sorts the "+
			"whole list after each insertion, which is where most of the startup time at 10 000+ routers goes.")
	report.add(secTraefik, append(rows, "")...)
}

func healthReport(runs []traefikRun, load wrkLoad, pool int) {
	rows := []string{
		"### 4b. Health-check load (configuration as rendered)",
		"",
		fmt.Sprintf("The same setup with the render's active checks in place; Traefik's maxIdleConnsPerHost is raised to %d "+
			"so that it keeps one connection per leaf, as it would with one server per leaf (the leaves share %d nginx listeners "+
			"here). A checked leaf holds one file descriptor in Traefik: this machine's open-file limit (%s) is below the "+
			"20 003 leaves of 10 000 apps, so those rows also hit that limit (in production, raise LimitNOFILE). Checks are counted in the backend's access log on an idle Traefik over whole intervals, starting half an "+
			"interval after startup: Traefik starts every service's ticker when it loads a configuration, so the checks come "+
			"as one burst per interval (and a new burst after every configuration reload), not spread out. Traefik's CPU is "+
			"read from /proc over the same window. Then wrk `%s` on host hits: a failed request is a 503 from a failover whose "+
			"leaves the checks marked down.", pool, backendPorts, nofile(), load),
		"",
		"| configuration | leaves checked | interval | leaves ÷ interval (checks/s) | measured checks/s | busiest second | Traefik CPU while idle (cores) | RSS MB after startup (peak) | host hit |",
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|",
	}
	for _, r := range runs {
		rows = append(rows, fmt.Sprintf("| %s | %d | %s | %.0f | %.0f | %d | %.2f | %s (%s) | %s |",
			r.c.name, r.shape.checked, r.shape.interval, r.health.expected, r.health.perSec, r.health.peakSecond,
			r.idleCPU, r.rssMB, r.peakMB, cell(r, "host hit")))
	}
	rows = append(rows, "", "Ratios (same run, after/before):", "")
	for _, apps := range []string{"5 000", "10 000"} {
		before, after := findRun(runs, apps+" apps, checks every 5s"), findRun(runs, apps+" apps, checks every 30s")
		if before == nil || after == nil {
			continue
		}
		rows = append(rows, fmt.Sprintf("- %s apps, checks every 30 s vs 5 s: checks/s %.0f vs %.0f measured; Traefik idle CPU %.2f vs %.2f cores; host hit %s.",
			apps, after.health.perSec, before.health.perSec, after.idleCPU, before.idleCPU, ratio(after, before, "host hit")))
	}
	for _, apps := range []string{"1 000", "5 000", "10 000"} {
		before, after := findRun(runs, apps+" apps, checks every 5s"), findRun(runs, apps+" apps, automatic interval")
		if before == nil || after == nil {
			continue
		}
		rows = append(rows, fmt.Sprintf("- %s apps, automatic interval (%s) vs 5 s, %d and %d checked leaves: checks/s %.0f vs %.0f measured; Traefik idle CPU %.2f vs %.2f cores; host hit %s.",
			apps, after.shape.interval, after.shape.checked, before.shape.checked, after.health.perSec, before.health.perSec, after.idleCPU, before.idleCPU, ratio(after, before, "host hit")))
	}
	report.add(secTraefik, append(rows, "")...)
}
