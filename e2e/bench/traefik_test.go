package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// shippedConfig is the product's Traefik static configuration; the bench runs Traefik on
// it with only addresses and the provider changed.
var shippedConfig = filepath.Join("..", "..", "deploy", "traefik", "traefik.yml")

// traefikStatic turns the shipped static configuration into the bench's: entry points
// on loopback ports, the file provider (watching dynFile) instead of the HTTP provider,
// no ACME resolver. Every entryPoints.*.http setting, the provider throttle and the
// log level stay as shipped.
func traefikStatic(shipped []byte, web, websecure int, dynFile string) ([]byte, error) {
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
	return yaml.Marshal(cfg)
}

// traefikCase is one dynamic configuration Traefik is measured on.
type traefikCase struct {
	name     string
	apps     int
	prefixes int
	opts     render.Options
}

// traefikRequest is one kind of request sent through Traefik.
type traefikRequest struct {
	name   string
	host   string
	path   string
	status int
	// body the backend answers with: the port of the backend listener the route must
	// reach ("" for a Traefik 404).
	body string
}

// renderForBackend derives the generated fleet and points every upstream at the local
// backend: app-00000 (ti.to's own application) at altPort, everything else at port,
// so that a response says which route answered. Node API ports (node-delegated health
// checks) go to port too.
func renderForBackend(t *testing.T, c traefikCase, port, altPort int) ([]byte, *routing.Document) {
	t.Helper()
	doc, _ := fleet.Derive(fleet.GenerateState(c.apps, c.prefixes), fleet.GenerateOptions())
	if doc == nil {
		t.Fatal("fleet.Derive produced no document")
	}
	for i := range doc.Routes {
		p := port
		if doc.Routes[i].Application == "app-00000" {
			p = altPort
		}
		for j := range doc.Routes[i].Upstreams {
			doc.Routes[i].Upstreams[j].Address = addr(p)
			doc.Routes[i].Upstreams[j].APIPort = port
		}
	}
	if doc.API != nil {
		for j := range doc.API.Upstreams {
			doc.API.Upstreams[j].Address = addr(port)
			doc.API.Upstreams[j].APIPort = port
		}
	}
	body, err := render.Traefik(doc, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	return body, doc
}

// configShape counts what Traefik has to build from a rendered configuration.
type configShape struct {
	routers, services, leaves, checked int
	interval                           time.Duration
}

func shapeOf(t *testing.T, body []byte) configShape {
	t.Helper()
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
	c              traefikCase
	shape          configShape
	bytes          int
	startup        time.Duration
	rssMB, peakMB  string
	checksPerSec   float64
	expectedChecks float64
	results        map[string]wrkResult
}

// TestTraefikUnderOurRenderedConfiguration loads a real Traefik with the configuration
// we render at several fleet sizes and path-router shapes, and measures startup (process
// start → first routed request), throughput on hits and misses, memory, and the
// health-check load the configuration puts on the fleet.
func TestTraefikUnderOurRenderedConfiguration(t *testing.T) {
	requireBench(t, "traefik", "wrk", "nginx")
	shipped, err := os.ReadFile(shippedConfig)
	if err != nil {
		t.Fatal(err)
	}
	load := defaultLoad(t, 5)
	if os.Getenv("SCAFO_BENCH_WRK") == "" {
		load.duration = 5 * time.Second
	}
	hcWindow := 10 * time.Second
	perPrefix := render.Options{PathGroupThreshold: routing.MaxPaths}
	slowChecks := render.Options{HealthCheckInterval: "30s"}
	cases := []traefikCase{
		{name: "100 apps", apps: 100},
		{name: "1 000 apps", apps: 1000},
		{name: "10 000 apps", apps: 10000},
		{name: "10 000 apps + 10 000 prefixes, grouped (threshold 64, default)", apps: 10000, prefixes: 10000},
		{name: "10 000 apps + 10 000 prefixes, per-prefix routers", apps: 10000, prefixes: 10000, opts: perPrefix},
		{name: "10 000 apps + 10 000 prefixes, grouped, health checks every 30s", apps: 10000, prefixes: 10000, opts: slowChecks},
	}
	backend := startBackend(t)
	// The backend's second listener, for ti.to's own application.
	alt := startNginx(t, "nginx-backend-alt", 1, func(prefix string, port int) string {
		return fmt.Sprintf("  server { listen 127.0.0.1:%d; location / { return 200 \"%d\\n\"; } }", port, port)
	}, "/")
	var runs []traefikRun
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs = append(runs, measureTraefik(t, shipped, c, backend, alt, load, hcWindow))
		})
	}
	traefikReport(runs, load, hcWindow)
}

func measureTraefik(t *testing.T, shipped []byte, c traefikCase, backend, alt *nginx, load wrkLoad, hcWindow time.Duration) traefikRun {
	dir := t.TempDir()
	body, _ := renderForBackend(t, c, backend.port, alt.port)
	// JSON is YAML: the file provider decodes .yaml with the same decoder the HTTP
	// provider uses for every body it fetches.
	dyn := filepath.Join(dir, "dynamic.yaml")
	mustWrite(t, dyn, body)
	web, websecure := freePort(t), freePort(t)
	static, err := traefikStatic(shipped, web, websecure, dyn)
	if err != nil {
		t.Fatal(err)
	}
	staticFile := filepath.Join(dir, "traefik.yml")
	mustWrite(t, staticFile, static)

	reqs := []traefikRequest{
		{name: "host hit", host: "app-00042." + platformDomain, path: "/", status: 200, body: "ok"},
		{name: "miss (unknown host → 404)", host: "nosuch.example.invalid", path: "/", status: 404},
	}
	if c.prefixes > 0 {
		reqs = append(reqs,
			// Prefix k targets the k%100-th application of ti.to's account: 5001 → app-00100.
			traefikRequest{name: "path hit", host: "ti.to", path: fmt.Sprintf("/p%05d/x", c.prefixes/2+1), status: 200, body: "ok"},
			traefikRequest{name: "path miss (falls through to the host's app)", host: "ti.to", path: "/nothere/x", status: 200, body: itoa(alt.port)},
		)
	}

	tr := newProc(t, "traefik", bins.traefik, "--configFile="+staticFile)
	tr.run(t)
	// Startup: process start → every kind of request answered as routed.
	waitFor(t, "Traefik routing "+c.name, 120*time.Second, func() error {
		if tr.exited() {
			return fmt.Errorf("traefik exited:\n%s", tr.tail(30))
		}
		for _, r := range reqs {
			status, got, err := traefikGet(web, r)
			if err != nil {
				return err
			}
			if status != r.status || (r.body != "" && got != r.body) {
				return fmt.Errorf("%s: %d %q, want %d %q", r.name, status, got, r.status, r.body)
			}
		}
		return nil
	})
	run := traefikRun{c: c, shape: shapeOf(t, body), bytes: len(body), startup: time.Since(tr.start), results: map[string]wrkResult{}}
	if run.shape.interval > 0 {
		run.expectedChecks = float64(run.shape.checked) / run.shape.interval.Seconds()
	}
	t.Logf("%s: %d routers, %d services, %d bytes; routed %s after start", c.name, run.shape.routers, run.shape.services, run.bytes, run.startup.Round(time.Millisecond))

	// Health-check load on an idle Traefik, counted at the backend over hcWindow (after
	// one interval, so that every check is running).
	time.Sleep(min(run.shape.interval, 30*time.Second))
	h0 := backend.healthChecks(t)
	time.Sleep(hcWindow)
	run.checksPerSec = float64(backend.healthChecks(t)-h0) / hcWindow.Seconds()

	for _, r := range reqs {
		res := runWrk(t, load, "http://"+addr(web)+r.path, "Host: "+r.host)
		if r.status == 200 && (res.non2xx != 0 || res.socketErrors != "") {
			t.Errorf("%s: %d non-2xx, socket errors %q", r.name, res.non2xx, res.socketErrors)
		}
		if r.status != 200 && res.non2xx != res.requests {
			t.Errorf("%s: %d of %d requests were not 404", r.name, res.requests-res.non2xx, res.requests)
		}
		t.Logf("%s: %.0f req/s, p99 %s ms", r.name, res.reqPerSec, ms(res.p99))
		run.results[r.name] = res
	}
	rss, peak := tr.rssKB()
	run.rssMB, run.peakMB = mb(rss), mb(peak)
	tr.stop(10 * time.Second)
	return run
}

func traefikReport(runs []traefikRun, load wrkLoad, hcWindow time.Duration) {
	rows := []string{
		fmt.Sprintf("Traefik %s on the shipped static configuration (`deploy/traefik/traefik.yml`: entry-point path safety, "+
			"providersThrottleDuration 100ms) with the file provider reading our rendered JSON (the HTTP provider decodes its "+
			"body with the same YAML decoder). Every upstream points at a local nginx answering 200; health checks are "+
			"counted in its access log. wrk `%s` per request kind, Traefik restarted per configuration. "+
			"Startup is process start → every request kind below answered as routed.", traefikVersion(), load),
		"",
		"| configuration | routers / services / leaves | config MB | startup s | RSS MB (peak) | host hit req/s (p99 ms) | miss req/s (p99 ms) | path hit req/s (p99 ms) | path miss req/s (p99 ms) | health checks/s: leaves ÷ interval → measured |",
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
	}
	cell := func(r traefikRun, prefix string) string {
		for name, res := range r.results {
			if strings.HasPrefix(name, prefix) {
				return fmt.Sprintf("%.0f (%s)", res.reqPerSec, ms(res.p99))
			}
		}
		return "–"
	}
	for _, r := range runs {
		rows = append(rows, fmt.Sprintf("| %s | %d / %d / %d | %.1f | %.1f | %s (%s) | %s | %s | %s | %s | %d ÷ %s = %.0f → %.0f |",
			r.c.name, r.shape.routers, r.shape.services, r.shape.leaves, float64(r.bytes)/(1<<20), r.startup.Seconds(),
			r.rssMB, r.peakMB, cell(r, "host hit"), cell(r, "miss"), cell(r, "path hit"), cell(r, "path miss"),
			r.shape.checked, r.shape.interval, r.expectedChecks, r.checksPerSec))
	}
	rows = append(rows, "", fmt.Sprintf("Health checks are counted over %s on an idle Traefik, one interval after startup.", hcWindow))
	// Ratios between the runs that differ in one setting.
	find := func(prefix string) *traefikRun {
		for i := range runs {
			if strings.HasPrefix(runs[i].c.name, prefix) {
				return &runs[i]
			}
		}
		return nil
	}
	small, big := find("100 apps"), find("10 000 apps")
	grouped, per, slow := find("10 000 apps + 10 000 prefixes, grouped (threshold"), find("10 000 apps + 10 000 prefixes, per-prefix"), find("10 000 apps + 10 000 prefixes, grouped, health")
	rows = append(rows, "", "Ratios (same run):", "")
	ratio := func(a, b *traefikRun, key string) string {
		if a == nil || b == nil {
			return "–"
		}
		var ra, rb float64
		for name, res := range a.results {
			if strings.HasPrefix(name, key) {
				ra = res.reqPerSec
			}
		}
		for name, res := range b.results {
			if strings.HasPrefix(name, key) {
				rb = res.reqPerSec
			}
		}
		if rb == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", ra/rb)
	}
	if small != nil && big != nil {
		rows = append(rows, fmt.Sprintf("- host hit at 10 000 apps vs 100 apps: %s; startup %.1f s vs %.1f s.",
			ratio(big, small, "host hit"), big.startup.Seconds(), small.startup.Seconds()))
	}
	if grouped != nil && per != nil {
		rows = append(rows, fmt.Sprintf("- grouped vs per-prefix path routers (10 000 prefixes): path hit %s, path miss %s, host hit %s; "+
			"routers %d vs %d; startup %.1f s vs %.1f s; peak RSS %s vs %s MB.",
			ratio(grouped, per, "path hit"), ratio(grouped, per, "path miss"), ratio(grouped, per, "host hit"),
			grouped.shape.routers, per.shape.routers, grouped.startup.Seconds(), per.startup.Seconds(), grouped.peakMB, per.peakMB))
	}
	if grouped != nil && slow != nil {
		rows = append(rows, fmt.Sprintf("- health checks every %s vs every %s (grouped, 10 000 apps + 10 000 prefixes): %.0f vs %.0f checks/s per Traefik measured; "+
			"host hit %s, path hit %s.",
			grouped.shape.interval, slow.shape.interval, grouped.checksPerSec, slow.checksPerSec,
			ratio(grouped, slow, "host hit"), ratio(grouped, slow, "path hit")))
	}
	report.add(secTraefik, rows...)
}

func TestTraefikStaticSwapsOnlyAddressesAndTheProvider(t *testing.T) {
	shipped, err := os.ReadFile(shippedConfig)
	if err != nil {
		t.Fatal(err)
	}
	out, err := traefikStatic(shipped, 1111, 2222, "/x/dynamic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got, orig map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(shipped, &orig); err != nil {
		t.Fatal(err)
	}
	eps := got["entryPoints"].(map[string]any)
	if a := eps["web"].(map[string]any)["address"]; a != "127.0.0.1:1111" {
		t.Errorf("web address %v", a)
	}
	if a := eps["websecure"].(map[string]any)["address"]; a != "127.0.0.1:2222" {
		t.Errorf("websecure address %v", a)
	}
	prov := got["providers"].(map[string]any)
	if _, ok := prov["http"]; ok {
		t.Error("the HTTP provider is still configured")
	}
	if f, _ := prov["file"].(map[string]any); f["filename"] != "/x/dynamic.yaml" || f["watch"] != true {
		t.Errorf("file provider %v", prov["file"])
	}
	if prov["providersThrottleDuration"] != orig["providers"].(map[string]any)["providersThrottleDuration"] {
		t.Errorf("throttle changed: %v", prov["providersThrottleDuration"])
	}
	for _, ep := range []string{"web", "websecure"} {
		g, _ := json.Marshal(eps[ep].(map[string]any)["http"])
		o, _ := json.Marshal(orig["entryPoints"].(map[string]any)[ep].(map[string]any)["http"])
		if string(g) != string(o) {
			t.Errorf("entryPoints.%s.http changed:\n got %s\nwant %s", ep, g, o)
		}
	}
	if _, ok := got["certificatesResolvers"]; ok {
		t.Error("certificatesResolvers kept: the bench must not reach ACME")
	}
}
