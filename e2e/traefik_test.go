package e2e

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/traefikprovider/localplugin"
)

// The shipped static configuration and its token renderer: the suite runs Traefik on
// these files, never on a copy.
var (
	shippedConfig = filepath.Join("..", "deploy", "traefik", "traefik.yml")
	renderScript  = filepath.Join("..", "deploy", "traefik", "render-config.sh")
)

// shippedEndpointHost is the host:port of providers.http.endpoint in the shipped file,
// the one part of the endpoint the suite replaces.
const shippedEndpointHost = "127.0.0.1:7400"

// traefikOptions choose what one Traefik polls and with which credential.
type traefikOptions struct {
	node *node // the node polled
	// query replaces the endpoint's query ("" keeps the shipped "prefer=self").
	query string
	// token is rendered into the shipped Authorization header by render-config.sh.
	token string
	// noAuthHeader drops the Authorization header altogether (scenario 9).
	noAuthHeader bool
	// ingressName is rendered into the shipped X-Scafo-Ingress header ("": the host
	// name, render-config.sh's default).
	ingressName string
	// traefikDefaultEncodedCharacters is a counterfactual: it sets every
	// encodedCharacters option on every entry point back to Traefik's default (allowed),
	// to show what the render alone holds (scenario 5). Never used for anything else.
	traefikDefaultEncodedCharacters bool
	// noProbe, throttle and metrics: see overrides.
	noProbe  bool
	throttle string
	metrics  bool
	// operator: the operator's files and the access log (see operatorSide).
	operator operatorSide
	// ports, when web is set, are where web and websecure listen (acmeEdge).
	ports traefikPorts
	// edit, when set, changes the configuration staticConfig made (an entry point's
	// options).
	edit func([]byte) ([]byte, error)
}

// overrides are what staticConfig changes in the shipped file.
type overrides struct {
	ports        traefikPorts
	endpointHost string // host:port of the node polled
	query        string // replaces the endpoint's query when set
	noAuthHeader bool
	// allowEncoded sets every entryPoints.*.http.encodedCharacters option to true.
	allowEncoded bool
	// noProbe drops the shipped X-Scafo-Applied-Probe header (the node then counts
	// what it served: the control of the applied-probe tests); else it is rewritten to
	// the web entry point's loopback port.
	noProbe bool
	// throttle replaces providers.providersThrottleDuration when set.
	throttle string
	// metrics adds Traefik's Prometheus metrics with entry point and service labels, on the
	// suite's API entry point (GET /metrics there), which the shipped file leaves off.
	metrics bool
	// operator: see operatorSide.
	operator operatorSide
}

// operatorSide is what the suite keeps of the shipped file's operator-facing settings:
// the file provider on /etc/traefik/dynamic and the access log on standard output.
type operatorSide struct {
	// dynamicDir replaces providers.file.directory; "" removes the file provider (a
	// test Traefik has no /etc/traefik/dynamic).
	dynamicDir string
	// accessLog keeps the shipped accessLog; else it is removed (a line per request in
	// every test's output).
	accessLog bool
}

// applyOperatorSide checks that the shipped file has its file provider and access log
// as docs/traefik.md describes them, then applies o.
func applyOperatorSide(cfg map[string]any, o operatorSide) error {
	file, ok := dig(cfg, "providers", "file").(map[string]any)
	if !ok || file["directory"] != shippedDynamicDir || file["watch"] != true {
		return fmt.Errorf("shipped providers.file = %v: want directory %s, watch true", dig(cfg, "providers", "file"), shippedDynamicDir)
	}
	if o.dynamicDir == "" {
		delete(cfg["providers"].(map[string]any), "file")
	} else {
		file["directory"] = o.dynamicDir
	}
	if f := dig(cfg, "accessLog", "format"); f != "json" || dig(cfg, "accessLog", "filePath") != nil {
		return fmt.Errorf("shipped accessLog = %v: want format json on standard output", cfg["accessLog"])
	}
	if !o.accessLog {
		delete(cfg, "accessLog")
	}
	return nil
}

// shippedDynamicDir is the shipped file provider's directory (the package creates it).
const shippedDynamicDir = "/etc/traefik/dynamic"

// shippedAppliedProbe is the shipped X-Scafo-Applied-Probe: the web entry point on
// loopback, the one part of it the suite replaces (its port).
const (
	shippedAppliedProbe = "http://127.0.0.1:80"
	appliedProbeHeader  = "X-Scafo-Applied-Probe"
)

// traefikPorts are the ports one Traefik listens on: web and websecure on ip (""
// 127.0.0.1), the API on loopback; with redirect, the shipped redirection of web to
// websecure turned on, as an operator serving HTTPS would (acmeEdge).
type traefikPorts struct {
	web, websecure, api int
	ip                  string
	redirect            bool
}

func (p traefikPorts) addr(port int) string { return hostPort(cmp.Or(p.ip, "127.0.0.1"), port) }

// acmeEdge is where the Traefiks of a fleet-certificate test listen: each on its own ip,
// all on the same web and websecure ports (Pebble validates HTTP-01 on one port, at
// whatever address DNS gives), web redirecting to websecure.
func acmeEdge(ip string, web, websecure int) traefikPorts {
	return traefikPorts{web: web, websecure: websecure, ip: ip, redirect: true}
}

// renderShipped runs the shipped render-config.sh on the shipped traefik.yml with
// SCAFO_INGRESS_TOKEN=token and SCAFO_INGRESS_NAME=name ("": the default, the host
// name), exactly as traefik.service does, and returns the result.
func renderShipped(t *testing.T, token, name string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "rendered.yml")
	cmd := exec.Command("sh", renderScript, shippedConfig, out)
	cmd.Env = append(os.Environ(), "SCAFO_INGRESS_TOKEN="+token)
	if name != "" {
		cmd.Env = append(cmd.Env, "SCAFO_INGRESS_NAME="+name)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("render-config.sh: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// staticConfig turns the rendered shipped configuration into the one a test Traefik
// runs. It changes only what a loopback test must change, and refuses to add a key
// the shipped file lacks (a renamed key must break the suite, not be papered over):
//
//   - entryPoints.web/websecure.address: loopback ports instead of :80/:443;
//   - providers.http.endpoint: the host:port of the node under test (path kept; query
//     kept unless opts.query is set);
//   - certificatesResolvers: removed (nothing here may reach the internet);
//   - providers.file (the operator's directory) and accessLog: removed, or kept with
//     the directory a test gives (o.operator);
//   - added: an entry point "traefik" on loopback with api.insecure, so the suite can
//     read router and service status; log.noColor, and log.level from
//     SCAFO_E2E_TRAEFIK_LOG;
//   - with o.metrics, Prometheus metrics on that entry point (the shipped file has none).
//
// Every entryPoints.*.http setting, the provider throttle, pollInterval and the globals
// are the shipped ones (TestStaticConfigKeepsTheShippedSettings holds that).
func staticConfig(rendered []byte, o overrides) ([]byte, error) {
	ports, endpointHost, query, noAuthHeader := o.ports, o.endpointHost, o.query, o.noAuthHeader
	var cfg map[string]any
	if err := yaml.Unmarshal(rendered, &cfg); err != nil {
		return nil, fmt.Errorf("parsing the shipped static configuration: %w", err)
	}
	set := func(v any, keys ...string) error {
		m := cfg
		for i, k := range keys {
			if i == len(keys)-1 {
				if _, ok := m[k]; !ok {
					return fmt.Errorf("shipped configuration has no %s", strings.Join(keys, "."))
				}
				m[k] = v
				return nil
			}
			next, ok := m[k].(map[string]any)
			if !ok {
				return fmt.Errorf("shipped configuration has no %s", strings.Join(keys[:i+1], "."))
			}
			m = next
		}
		return nil
	}
	if o.allowEncoded {
		for _, ep := range []string{"web", "websecure"} {
			ec, ok := dig(cfg, "entryPoints", ep, "http", "encodedCharacters").(map[string]any)
			if !ok {
				return nil, fmt.Errorf("shipped configuration has no entryPoints.%s.http.encodedCharacters", ep)
			}
			// A fresh map: the shipped file shares one (a YAML alias) between entry points.
			allowed := map[string]any{}
			for k := range ec {
				allowed[k] = true
			}
			cfg["entryPoints"].(map[string]any)[ep].(map[string]any)["http"].(map[string]any)["encodedCharacters"] = allowed
		}
	}
	httpProv, ok := dig(cfg, "providers", "http").(map[string]any)
	if !ok {
		return nil, fmt.Errorf("shipped configuration has no providers.http")
	}
	ep, _ := httpProv["endpoint"].(string)
	u, err := url.Parse(ep)
	if err != nil || u.Host != shippedEndpointHost {
		return nil, fmt.Errorf("shipped providers.http.endpoint %q: want a URL on %s", ep, shippedEndpointHost)
	}
	u.Host = endpointHost
	if query != "" {
		u.RawQuery = query
	}
	httpProv["endpoint"] = u.String()
	if headers, ok := httpProv["headers"].(map[string]any); ok {
		if v, ok := headers[appliedProbeHeader]; ok {
			if v != shippedAppliedProbe {
				return nil, fmt.Errorf("shipped providers.http.headers.%s = %v: want %s (the web entry point on loopback)", appliedProbeHeader, v, shippedAppliedProbe)
			}
			if o.noProbe {
				delete(headers, appliedProbeHeader)
			} else {
				headers[appliedProbeHeader] = fmt.Sprintf("http://127.0.0.1:%d", ports.web)
			}
		} else if !o.noProbe {
			return nil, fmt.Errorf("shipped providers.http.headers has no %s", appliedProbeHeader)
		}
	}
	if o.throttle != "" {
		if err := set(o.throttle, "providers", "providersThrottleDuration"); err != nil {
			return nil, err
		}
	}
	if noAuthHeader {
		headers, ok := httpProv["headers"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("shipped configuration has no providers.http.headers")
		}
		delete(headers, "Authorization")
		if len(headers) == 0 { // (the shipped file also names the ingress)
			delete(httpProv, "headers") // Traefik refuses an empty headers map
		}
	}
	if err := loopbackCommon(cfg, ports); err != nil {
		return nil, err
	}
	if err := applyOperatorSide(cfg, o.operator); err != nil {
		return nil, err
	}
	if o.metrics {
		if _, clash := cfg["metrics"]; clash {
			return nil, fmt.Errorf("shipped configuration has a metrics section, which the suite would replace")
		}
		cfg["metrics"] = map[string]any{"prometheus": map[string]any{
			"entryPoint": "traefik", "addEntryPointsLabels": true, "addServicesLabels": true,
		}}
	}
	return yaml.Marshal(cfg)
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

// traefik is one Traefik process under test.
type traefik struct {
	name  string
	ports traefikPorts
	proc  *proc.Proc
	http  *http.Client
}

// startTraefik starts Traefik on the shipped configuration polling opts.node and waits
// until its API answers.
func startTraefik(t *testing.T, name string, opts traefikOptions) *traefik {
	t.Helper()
	requireBinaries(t)
	token := opts.token
	if token == "" {
		token = testIngressToken
	}
	return launchTraefik(t, name, opts.ports, func(ports traefikPorts) *traefik {
		cfg, err := staticConfig(renderShipped(t, token, opts.ingressName), overrides{
			ports:        ports,
			endpointHost: hostPort(opts.node.ip, opts.node.port),
			query:        opts.query,
			noAuthHeader: opts.noAuthHeader,
			allowEncoded: opts.traefikDefaultEncodedCharacters,
			noProbe:      opts.noProbe,
			throttle:     opts.throttle,
			metrics:      opts.metrics,
			operator:     opts.operator,
		})
		if err == nil && opts.edit != nil {
			cfg, err = opts.edit(cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		return newTraefik(t, name, ports, writeConfig(t, t.TempDir(), "traefik.yml", cfg), "", nil)
	})
}

// writeConfig writes a static configuration into dir and returns its path.
func writeConfig(t *testing.T, dir, file string, cfg []byte) string {
	t.Helper()
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newTraefik prepares (does not start) a Traefik on the static file config, in dir ("":
// the test binary's), with env added; every ingress process of the suite (Traefik or
// Caddy) is a *traefik built here, so the same requests go through each.
func newTraefik(t *testing.T, name string, ports traefikPorts, config, dir string, env []string) *traefik {
	t.Helper()
	return newIngress(t, name, ports, bins.traefik, []string{"--configFile=" + config}, dir, env)
}

// newIngress is newTraefik for any binary and arguments (Caddy).
func newIngress(t *testing.T, name string, ports traefikPorts, bin string, args []string, dir string, env []string) *traefik {
	t.Helper()
	tr := &traefik{
		name:  name,
		ports: ports,
		proc:  newProc(t, name, bin, args, env),
		http: &http.Client{
			Timeout: 5 * time.Second,
			// Never follow redirects: a redirect is an answer to assert on.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	if dir != "" {
		tr.proc.Dir = dir
	}
	return tr
}

// launchTraefik picks free loopback ports (those of fixed when it has them), builds a
// Traefik with build and starts it, waiting for its API. A free port can be taken by
// another process (other test packages run in parallel) between the probe and Traefik's
// bind; when Traefik exits with "address already in use" it is retried on fresh ports,
// up to four times.
func launchTraefik(t *testing.T, name string, fixed traefikPorts, build func(ports traefikPorts) *traefik) *traefik {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ports := fixed
		if ports.web == 0 {
			ports.web, ports.websecure = freePort(t, "127.0.0.1"), freePort(t, "127.0.0.1")
		}
		ports.api = freePort(t, "127.0.0.1")
		tr := build(ports)
		tr.proc.MustStart(t)
		err := tr.proc.WaitUntil(20*time.Second, func() error {
			_, err := tr.rawData()
			return err
		})
		if err == nil {
			return tr
		}
		if attempt < 4 && proc.IsExited(err) && strings.Contains(tr.proc.Output(), "address already in use") {
			t.Logf("%s: a probed port was taken before Traefik bound it; retrying on fresh ports", name)
			continue
		}
		t.Fatalf("waiting 20s for %s API: %v", name, err)
	}
}

func (tr *traefik) webAddr() string    { return tr.ports.addr(tr.ports.web) }
func (tr *traefik) secureAddr() string { return tr.ports.addr(tr.ports.websecure) }

// response is one answer through Traefik.
type response struct {
	status int
	header http.Header
	body   string
	echo   *echoReply // set when an echo upstream answered
}

func (r response) from() string {
	if r.echo != nil {
		return r.echo.Name
	}
	return fmt.Sprintf("traefik:%d", r.status)
}

// get sends GET path with Host host through the web entry point.
func (tr *traefik) get(host, path string, header ...string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+tr.webAddr()+path, nil)
	if err != nil {
		return response{}, err
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tr.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	return readResponse(resp)
}

func readResponse(resp *http.Response) (response, error) {
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{status: resp.StatusCode}, err
	}
	r := response{status: resp.StatusCode, header: resp.Header, body: string(b)}
	var e echoReply
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && json.Unmarshal(b, &e) == nil && e.Name != "" {
		r.echo = &e
	}
	return r, nil
}

// raw sends target verbatim as the request-target of a GET request line, so odd
// spellings reach Traefik exactly as written, with header (name, value pairs) added.
func (tr *traefik) raw(host, target string, header ...string) (response, error) {
	conn, err := net.DialTimeout("tcp", tr.webAddr(), 5*time.Second)
	if err != nil {
		return response{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var extra strings.Builder
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&extra, "%s: %s\r\n", header[i], header[i+1])
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", target, host, extra.String()); err != nil {
		return response{}, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	return readResponse(resp)
}

// servedBy is nil when one GET of host+path is answered by the echo named want.
func (tr *traefik) servedBy(host, path, want string) error {
	r, err := tr.get(host, path)
	if err != nil {
		return err
	}
	if r.from() != want {
		return fmt.Errorf("served by %s", r.from())
	}
	return nil
}

// waitServedBy polls host+path until the echo named want answers.
func (tr *traefik) waitServedBy(t *testing.T, host, path, want string, timeout time.Duration) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s%s on %s served by %s", host, path, tr.name, want), timeout, func() error {
		return tr.servedBy(host, path, want)
	})
}

// serversOn returns the servers in tr's HTTP services (its API) on any of addrs, as
// "service → address".
func (tr *traefik) serversOn(addrs []string) ([]string, error) {
	var services []struct {
		Name         string `json:"name"`
		LoadBalancer *struct {
			Servers []struct {
				URL string `json:"url"`
			} `json:"servers"`
		} `json:"loadBalancer"`
	}
	if err := tr.api("/api/http/services?per_page=1000", &services); err != nil {
		return nil, err
	}
	var on []string
	for _, s := range services {
		if s.LoadBalancer == nil {
			continue
		}
		for _, sv := range s.LoadBalancer.Servers {
			if a := strings.TrimSuffix(strings.TrimPrefix(sv.URL, "http://"), "/"); slices.Contains(addrs, a) {
				on = append(on, s.Name+" → "+a)
			}
		}
	}
	return on, nil
}

// watchNoServerOn polls tr's configuration every 20 ms from now on and sends, once, the
// moment it first saw no HTTP service with a server on any of addrs (it gives up after
// five minutes, sending nothing).
func (tr *traefik) watchNoServerOn(addrs []string) <-chan time.Time {
	c := make(chan time.Time, 1)
	go func() {
		if poll(5*time.Minute, 20*time.Millisecond, func() error {
			on, err := tr.serversOn(addrs)
			if err == nil && len(on) > 0 {
				err = fmt.Errorf("servers %v", on)
			}
			return err
		}) == nil {
			c <- time.Now()
		}
	}()
	return c
}

// expectServedBy asserts one request's answer.
func (tr *traefik) expectServedBy(t *testing.T, host, path, want string) response {
	t.Helper()
	r, err := tr.get(host, path)
	if err != nil {
		t.Errorf("GET %s%s: %v", host, path, err)
		return r
	}
	if r.from() != want {
		t.Errorf("GET %s%s: served by %s, want %s (body %.200q)", host, path, r.from(), want, r.body)
	}
	return r
}

// traefikNotFound is the body of Traefik's own 404 (no router matched).
const traefikNotFound = "404 page not found\n"

// expectTraefik404 asserts that no router matched: Traefik's own 404, no upstream.
func (tr *traefik) expectTraefik404(t *testing.T, host, path string, header ...string) {
	t.Helper()
	r, err := tr.get(host, path, header...)
	if err != nil {
		t.Errorf("GET %s%s: %v", host, path, err)
		return
	}
	if r.status != http.StatusNotFound || r.echo != nil || r.body != traefikNotFound {
		t.Errorf("GET %s%s: %d from %s (body %.200q), want Traefik's own 404", host, path, r.status, r.from(), r.body)
	}
}

// Traefik API (router and service status).

type routerInfo struct {
	EntryPoints []string `json:"entryPoints"`
	Service     string   `json:"service"`
	Rule        string   `json:"rule"`
	Priority    int      `json:"priority"`
	Middlewares []string `json:"middlewares"`
	Status      string   `json:"status"`
	Err         []string `json:"error"`
}

type serviceInfo struct {
	Status       string            `json:"status"`
	Err          []string          `json:"error"`
	ServerStatus map[string]string `json:"serverStatus"`
	UsedBy       []string          `json:"usedBy"`
}

type rawData struct {
	Routers     map[string]routerInfo  `json:"routers"`
	Services    map[string]serviceInfo `json:"services"`
	TCPRouters  map[string]routerInfo  `json:"tcpRouters"`
	TCPServices map[string]serviceInfo `json:"tcpServices"`
}

func (tr *traefik) rawData() (rawData, error) {
	var rd rawData
	return rd, tr.api("/api/rawdata", &rd)
}

// api decodes the JSON answer to GET path on tr's API into out.
func (tr *traefik) api(path string, out any) error {
	resp, err := tr.http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", tr.ports.api, path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The provider plugin (deploy/traefik/traefik-plugin.yml).

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

// loopbackCommon applies what both shipped files get in a test: web and websecure on
// ports (the redirection turned on when asked), no ACME resolver, the API on a loopback
// entry point, an uncoloured log at the level SCAFO_E2E_TRAEFIK_LOG asks.
func loopbackCommon(cfg map[string]any, ports traefikPorts) error {
	if _, ok := cfg["certificatesResolvers"]; !ok {
		return fmt.Errorf("shipped configuration has no certificatesResolvers")
	}
	delete(cfg, "certificatesResolvers")
	eps, ok := cfg["entryPoints"].(map[string]any)
	if !ok {
		return fmt.Errorf("shipped configuration has no entryPoints")
	}
	for name, port := range map[string]int{"web": ports.web, "websecure": ports.websecure} {
		ep, ok := eps[name].(map[string]any)
		if !ok || ep["address"] == nil {
			return fmt.Errorf("shipped configuration has no entryPoints.%s.address", name)
		}
		ep["address"] = ports.addr(port)
	}
	if web := eps["web"].(map[string]any); ports.redirect {
		if web["allowACMEByPass"] != true {
			return fmt.Errorf("the shipped web entry point lacks allowACMEByPass: true")
		}
		// The shipped file's commented-out redirection, turned on.
		web["http"].(map[string]any)["redirections"] = map[string]any{
			"entryPoint": map[string]any{"to": "websecure", "scheme": "https"},
		}
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
	// ports: see traefikOptions.
	ports traefikPorts
}

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
	return launchTraefik(t, name, opts.ports, func(ports traefikPorts) *traefik {
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
		// Traefik loads local plugins from ./plugins-local.
		return newTraefik(t, name, ports, writeConfig(t, dir, "traefik.yml", cfg), dir, []string{"SCAFO_INGRESS_TOKEN=" + testIngressToken})
	})
}

// fromProvider keeps the routers and services of one provider ("http",
// "plugin-scafo").
func (rd rawData) fromProvider(provider string) (routers map[string]routerInfo, services map[string]serviceInfo) {
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
	routers, _ := rd.fromProvider(provider)
	return len(routers)
}

// requireProviderClean is scenario 11, run at the end of every scenario: Traefik's API
// shows every router and service from provider ("http", "plugin-scafo") enabled, with no
// errors, and at least one router (a provider that delivered nothing is not "clean").
func (tr *traefik) requireProviderClean(t *testing.T, provider string) {
	t.Helper()
	rd, err := tr.rawData()
	if err != nil {
		t.Fatalf("%s: reading the API: %v", tr.name, err)
	}
	routers, services := rd.fromProvider(provider)
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
				if err := tr.servedBy(host, path, wants[i]); err != nil {
					return err
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
	stop      func()
}

func watchRouters(t *testing.T, tr *traefik, provider string) *routerFloor {
	t.Helper()
	w := &routerFloor{min: -1}
	w.stop = repeat(t, 20*time.Millisecond, func() {
		n := tr.routerCount(provider)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.samples++
		switch {
		case n < 0:
			w.apiErrors++
		case w.min < 0 || n < w.min:
			w.min = n
		}
	})
	return w
}

// result returns the lowest router count seen, the samples taken and the API failures.
func (w *routerFloor) result() (min, samples, apiErrors int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min, w.samples, w.apiErrors
}
