package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scafo/ingress/node/store/s3"
	"github.com/scafo/ingress/traefikprovider/localplugin"
)

// Harness for the provider plugin (deploy/traefik/traefik-plugin.yml) and for fleets on
// an S3 store. Everything here adds to the harness of node_test.go and traefik_test.go.

// shippedPluginConfig is the plugin-based static configuration; the suite runs Traefik
// on this file, never on a copy.
var shippedPluginConfig = filepath.Join("..", "deploy", "traefik", "traefik-plugin.yml")

// pluginName is the key of the plugin under experimental.localPlugins and
// providers.plugin in the shipped file; Traefik names the provider "plugin-<key>".
const (
	pluginName     = "scafo"
	pluginProvider = "plugin-" + pluginName
)

// pluginOverrides are what pluginStaticConfig changes in the shipped file.
type pluginOverrides struct {
	ports     traefikPorts
	endpoints []string // replaces providers.plugin.scafo.endpoints
	// prefer replaces providers.plugin.scafo.prefer (the shipped one is a placeholder);
	// "" removes it.
	prefer string
	// name, when set, adds providers.plugin.scafo.name (the shipped file leaves it to
	// the host name); stateFile replaces the shipped absolute path.
	name, stateFile string
	// noProbe removes appliedProbe: the plugin reports applied after appliedDelay.
	noProbe bool
	// throttle, when set, replaces providers.providersThrottleDuration.
	throttle string
}

// pluginStaticConfig turns the shipped plugin configuration into the one a test
// Traefik runs. Like staticConfig, it changes only what a loopback test must change and
// refuses to set a key the shipped file lacks:
//
//   - entryPoints.web/websecure.address: loopback ports;
//   - providers.plugin.scafo.endpoints and prefer: the nodes under test; stateFile:
//     a file in the test's directory; name added when given (each Traefik of a test
//     has its own);
//   - certificatesResolvers, providers.file and accessLog: removed;
//   - added: the loopback "traefik" entry point with api.insecure, log.noColor, and
//     log.level from SCAFO_E2E_TRAEFIK_LOG.
//
// The token stays out of the file, as shipped: the plugin reads SCAFO_INGRESS_TOKEN
// from Traefik's environment.
func pluginStaticConfig(shipped []byte, o pluginOverrides) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(shipped, &cfg); err != nil {
		return nil, fmt.Errorf("parsing the shipped plugin configuration: %w", err)
	}
	shippedWeb, _ := dig(cfg, "entryPoints", "web", "address").(string)
	for _, ep := range []struct {
		name string
		port int
	}{{"web", o.ports.web}, {"websecure", o.ports.websecure}} {
		m, ok := dig(cfg, "entryPoints", ep.name).(map[string]any)
		if !ok || m["address"] == nil {
			return nil, fmt.Errorf("shipped plugin configuration has no entryPoints.%s.address", ep.name)
		}
		m["address"] = fmt.Sprintf("127.0.0.1:%d", ep.port)
	}
	if dig(cfg, "experimental", "localPlugins", pluginName, "moduleName") != localplugin.ModuleName {
		return nil, fmt.Errorf("shipped plugin configuration: experimental.localPlugins.%s.moduleName is not %s", pluginName, localplugin.ModuleName)
	}
	plug, ok := dig(cfg, "providers", "plugin", pluginName).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("shipped plugin configuration has no providers.plugin.%s", pluginName)
	}
	for _, k := range []string{"endpoints", "prefer", "stateFile"} {
		if _, ok := plug[k]; !ok {
			return nil, fmt.Errorf("shipped plugin configuration has no providers.plugin.%s.%s", pluginName, k)
		}
	}
	if len(o.endpoints) == 0 {
		return nil, fmt.Errorf("no endpoints for the plugin")
	}
	eps := make([]any, len(o.endpoints))
	for i, e := range o.endpoints {
		eps[i] = e
	}
	plug["endpoints"] = eps
	if o.prefer == "" {
		delete(plug, "prefer")
	} else {
		plug["prefer"] = o.prefer
	}
	if _, ok := plug["token"]; ok {
		return nil, fmt.Errorf("shipped plugin configuration carries a token: it must come from the environment")
	}
	if _, ok := plug["name"]; ok {
		return nil, fmt.Errorf("shipped plugin configuration sets providers.plugin.%s.name: leave it to the host name", pluginName)
	}
	if o.name != "" {
		plug["name"] = o.name
	}
	// The applied probe reaches the web entry point, on its loopback address.
	if probe, _ := plug["appliedProbe"].(string); probe != "http://127.0.0.1"+shippedWeb {
		return nil, fmt.Errorf("shipped plugin configuration: providers.plugin.%s.appliedProbe is %q, want the web entry point (%q) on loopback", pluginName, probe, shippedWeb)
	}
	if o.noProbe {
		delete(plug, "appliedProbe")
	} else {
		plug["appliedProbe"] = fmt.Sprintf("http://127.0.0.1:%d", o.ports.web)
	}
	if o.throttle != "" {
		dig(cfg, "providers").(map[string]any)["providersThrottleDuration"] = o.throttle
	}
	plug["stateFile"] = o.stateFile
	if o.stateFile == "" {
		plug["stateFile"] = "scafo.last.json" // in Traefik's working directory
	}
	if err := loopbackCommon(cfg, o.ports); err != nil {
		return nil, err
	}
	if err := applyOperatorSide(cfg, operatorSide{}); err != nil {
		return nil, err
	}
	return yaml.Marshal(cfg)
}

// loopbackCommon applies what both shipped files get in a test: no ACME resolver, the
// API on a loopback entry point, an uncoloured log at the level SCAFO_E2E_TRAEFIK_LOG asks.
func loopbackCommon(cfg map[string]any, ports traefikPorts) error {
	if _, ok := cfg["certificatesResolvers"]; !ok {
		return fmt.Errorf("shipped configuration has no certificatesResolvers")
	}
	delete(cfg, "certificatesResolvers")
	eps, ok := cfg["entryPoints"].(map[string]any)
	if !ok {
		return fmt.Errorf("shipped configuration has no entryPoints")
	}
	if _, clash := eps["traefik"]; clash {
		return fmt.Errorf("shipped configuration defines entry point traefik, which the suite uses for the API")
	}
	eps["traefik"] = map[string]any{"address": fmt.Sprintf("127.0.0.1:%d", ports.api)}
	api, ok := cfg["api"].(map[string]any)
	if !ok {
		return fmt.Errorf("shipped configuration has no api section")
	}
	api["insecure"] = true
	logCfg, ok := cfg["log"].(map[string]any)
	if !ok {
		return fmt.Errorf("shipped configuration has no log section")
	}
	logCfg["noColor"] = true
	if lvl := os.Getenv("SCAFO_E2E_TRAEFIK_LOG"); lvl != "" {
		logCfg["level"] = lvl
	}
	return nil
}

// pluginTraefikOptions choose what a plugin Traefik reads.
type pluginTraefikOptions struct {
	endpoints []*node // in order
	// urls are further endpoints after endpoints, as base URLs (a stand-in node).
	urls   []string
	prefer string // a node name, or "" for none
	// name is the plugin's name setting ("" leaves the host name).
	name string
	// dir is Traefik's working directory (plugins-local, the state file); "" makes a
	// new one. A restart passes the first run's dir.
	dir string
	// noProbe and throttle: see pluginOverrides.
	noProbe  bool
	throttle string
}

// nodeBase is a node's base URL, as the plugin's endpoints take it.
func nodeBase(n *node) string { return "http://" + hostPort(n.ip, n.port) }

// startPluginTraefik starts Traefik on the shipped plugin configuration, in a working
// directory holding ./plugins-local with the plugin installed from this tree
// (localplugin.Install, only the manifest and non-test sources), with
// SCAFO_INGRESS_TOKEN in its environment, and waits until its API answers. It does not
// wait for routes: an endpoint may be down on purpose.
func startPluginTraefik(t *testing.T, name string, opts pluginTraefikOptions) *traefik {
	t.Helper()
	requireBinaries(t)
	shipped, err := os.ReadFile(shippedPluginConfig)
	if err != nil {
		t.Fatal(err)
	}
	var endpoints []string
	for _, n := range opts.endpoints {
		endpoints = append(endpoints, nodeBase(n))
	}
	endpoints = append(endpoints, opts.urls...)
	return launchTraefik(t, name, func(ports traefikPorts) *traefik {
		cfg, err := pluginStaticConfig(shipped, pluginOverrides{ports: ports, endpoints: endpoints, prefer: opts.prefer, name: opts.name,
			noProbe: opts.noProbe, throttle: opts.throttle})
		if err != nil {
			t.Fatal(err)
		}
		dir := opts.dir
		if dir == "" {
			dir = t.TempDir()
		}
		if _, err := localplugin.Install(filepath.Join(bins.root, "traefikprovider"), filepath.Join(dir, "plugins-local")); err != nil {
			t.Fatalf("installing the plugin: %v", err)
		}
		file := filepath.Join(dir, "traefik.yml")
		if err := os.WriteFile(file, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		tr := &traefik{
			name:  name,
			ports: ports,
			proc:  newProc(t, name, bins.traefik, []string{"--configFile=" + file}, []string{"SCAFO_INGRESS_TOKEN=" + testIngressToken}),
			http: &http.Client{
				Timeout:       5 * time.Second,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			},
		}
		tr.proc.Dir = dir // Traefik loads local plugins from ./plugins-local
		return tr
	})
}

// fromProviderNamed keeps the routers and services of one provider ("http",
// "plugin-scafo").
func (rd rawData) fromProviderNamed(provider string) (routers map[string]routerInfo, services map[string]serviceInfo) {
	routers, services = map[string]routerInfo{}, map[string]serviceInfo{}
	for name, r := range rd.Routers {
		if strings.HasSuffix(name, "@"+provider) {
			routers[name] = r
		}
	}
	for name, s := range rd.Services {
		if strings.HasSuffix(name, "@"+provider) {
			services[name] = s
		}
	}
	return routers, services
}

// routerCount is how many routers Traefik holds from provider (-1 when the API fails).
func (tr *traefik) routerCount(provider string) int {
	rd, err := tr.rawData()
	if err != nil {
		return -1
	}
	routers, _ := rd.fromProviderNamed(provider)
	return len(routers)
}

// requireProviderCleanNamed is requireProviderClean for any provider: Traefik's API
// shows at least one router from it, and every router and service from it enabled with
// no errors.
func (tr *traefik) requireProviderCleanNamed(t *testing.T, provider string) {
	t.Helper()
	rd, err := tr.rawData()
	if err != nil {
		t.Fatalf("%s: reading the API: %v", tr.name, err)
	}
	routers, services := rd.fromProviderNamed(provider)
	if len(routers) == 0 {
		t.Errorf("%s: no routers from the %s provider", tr.name, provider)
	}
	for _, name := range sortedKeys(routers) {
		r := routers[name]
		if r.Status != "enabled" || len(r.Err) > 0 {
			t.Errorf("%s: router %s status %q errors %q (rule %s)", tr.name, name, r.Status, r.Err, r.Rule)
		}
	}
	for _, name := range sortedKeys(services) {
		s := services[name]
		if s.Status != "enabled" || len(s.Err) > 0 {
			t.Errorf("%s: service %s status %q errors %q", tr.name, name, s.Status, s.Err)
		}
	}
	if !t.Failed() {
		t.Logf("%s: %d routers and %d services from the %s provider, all enabled, no errors", tr.name, len(routers), len(services), provider)
	}
}

// ingressPolls sums scafo_ingress_polls_total{format="traefik"} on a node's /metrics:
// the Traefik polls it has answered (a long-poll counts when it ends).
func (n *node) ingressPolls(t *testing.T) int {
	t.Helper()
	resp, err := apiClient.Get(n.url("/metrics"))
	if err != nil {
		t.Fatalf("%s /metrics: %v", n.name, err)
	}
	defer resp.Body.Close()
	total := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "scafo_ingress_polls_total{") || !strings.Contains(line, `format="traefik"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%s /metrics: %q: %v", n.name, line, err)
		}
		total += int(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s /metrics: %v", n.name, err)
	}
	return total
}

// ingressAnswer is one GET /v1/ingress/traefik as the node sends it.
type ingressAnswer struct {
	status   int
	etag     string
	revision string
	body     []byte // as sent (gzip bytes when gzip was asked for)
}

// ingress sends GET /v1/ingress/traefik?<query> with the ingress token and the given
// Accept-Encoding ("identity" or "gzip"; set explicitly, so Go's transport neither
// adds gzip nor decodes the body).
func (n *node) ingress(t *testing.T, query, encoding string) ingressAnswer {
	t.Helper()
	u := n.url("/v1/ingress/traefik")
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testIngressToken)
	req.Header.Set("Accept-Encoding", encoding)
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading: %v", u, err)
	}
	return ingressAnswer{status: resp.StatusCode, etag: resp.Header.Get("ETag"), revision: resp.Header.Get("X-Scafo-Revision"), body: b}
}

// s3NodeArgs are the node flags for an S3 store (a node with store.s3.endpoint uses
// S3; the --store.dir.path startFleet passes is then unused).
func s3NodeArgs(c s3.Config) []string {
	return []string{
		"--store.s3.endpoint=" + c.Endpoint,
		"--store.s3.bucket=" + c.Bucket,
		"--store.s3.region=" + c.Region,
		"--store.s3.accessKeyID=" + c.AccessKeyID,
		"--store.s3.secretAccessKey=" + c.SecretAccessKey,
		"--store.s3.insecure=" + strconv.FormatBool(c.Insecure),
	}
}

// firstServed sends GET host+path through each Traefik every 5 ms, concurrently, until
// trs[i] is answered by the echo named wants[i], and returns for each the time from t0
// to the sending of its first such request.
func firstServed(t *testing.T, trs []*traefik, host, path string, wants []string, t0 time.Time) []time.Duration {
	t.Helper()
	if len(wants) != len(trs) {
		t.Fatalf("firstServed: %d Traefiks, %d wants", len(trs), len(wants))
	}
	out := make([]time.Duration, len(trs))
	errs := make([]error, len(trs))
	var wg sync.WaitGroup
	for i, tr := range trs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = poll(routeTimeout, 5*time.Millisecond, func() error {
				at := time.Now()
				r, err := tr.get(host, path)
				if err != nil {
					return err
				}
				if r.from() != wants[i] {
					return fmt.Errorf("served by %s", r.from())
				}
				out[i] = at.Sub(t0)
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: %s%s never served by %s within %s: %v", trs[i].name, host, path, wants[i], routeTimeout, err)
		}
	}
	return out
}

// ms rounds a duration for a report.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// roundAll rounds every duration to the millisecond.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = ms(d)
	}
	return out
}

// routerFloor samples how many routers a Traefik holds from one provider, every 20 ms,
// until stopped: the lowest count and how often the API failed.
type routerFloor struct {
	mu        sync.Mutex
	min       int // -1 until the first successful sample
	samples   int
	apiErrors int
	stopc     chan struct{}
	done      chan struct{}
}

func watchRouters(t *testing.T, tr *traefik, provider string) *routerFloor {
	t.Helper()
	w := &routerFloor{min: -1, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			n := tr.routerCount(provider)
			w.mu.Lock()
			w.samples++
			switch {
			case n < 0:
				w.apiErrors++
			case w.min < 0 || n < w.min:
				w.min = n
			}
			w.mu.Unlock()
			select {
			case <-w.stopc:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *routerFloor) stop() {
	select {
	case <-w.stopc:
	default:
		close(w.stopc)
	}
	<-w.done
}

// result returns the lowest router count seen, the samples taken and the API failures.
func (w *routerFloor) result() (min, samples, apiErrors int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min, w.samples, w.apiErrors
}
