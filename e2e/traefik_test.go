package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scafo/ingress/internal/proc"
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

// traefikPorts are the loopback ports one Traefik listens on.
type traefikPorts struct {
	web, websecure, api int
}

// renderShipped runs the shipped render-config.sh on the shipped traefik.yml with
// SCAFO_INGRESS_TOKEN=token, exactly as traefik.service does, and returns the result.
func renderShipped(t *testing.T, token string) []byte {
	return renderShippedNamed(t, token, "")
}

// renderShippedNamed is renderShipped with SCAFO_INGRESS_NAME=name ("": the default,
// the host name).
func renderShippedNamed(t *testing.T, token, name string) []byte {
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
	if err := set(fmt.Sprintf("127.0.0.1:%d", ports.web), "entryPoints", "web", "address"); err != nil {
		return nil, err
	}
	if err := set(fmt.Sprintf("127.0.0.1:%d", ports.websecure), "entryPoints", "websecure", "address"); err != nil {
		return nil, err
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
	if _, ok := cfg["certificatesResolvers"]; !ok {
		return nil, fmt.Errorf("shipped configuration has no certificatesResolvers")
	}
	delete(cfg, "certificatesResolvers")
	if err := applyOperatorSide(cfg, o.operator); err != nil {
		return nil, err
	}

	eps := cfg["entryPoints"].(map[string]any)
	if _, clash := eps["traefik"]; clash {
		return nil, fmt.Errorf("shipped configuration defines entry point traefik, which the suite uses for the API")
	}
	eps["traefik"] = map[string]any{"address": fmt.Sprintf("127.0.0.1:%d", ports.api)}
	api, ok := cfg["api"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("shipped configuration has no api section")
	}
	api["insecure"] = true
	if o.metrics {
		if _, clash := cfg["metrics"]; clash {
			return nil, fmt.Errorf("shipped configuration has a metrics section, which the suite would replace")
		}
		cfg["metrics"] = map[string]any{"prometheus": map[string]any{
			"entryPoint": "traefik", "addEntryPointsLabels": true, "addServicesLabels": true,
		}}
	}
	logCfg, ok := cfg["log"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("shipped configuration has no log section")
	}
	logCfg["noColor"] = true // the log is read by the suite and printed on failure
	if lvl := os.Getenv("SCAFO_E2E_TRAEFIK_LOG"); lvl != "" {
		logCfg["level"] = lvl
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
	return launchTraefik(t, name, func(ports traefikPorts) *traefik {
		cfg, err := staticConfig(renderShippedNamed(t, token, opts.ingressName), overrides{
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
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		file := filepath.Join(dir, "traefik.yml")
		if err := os.WriteFile(file, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		return &traefik{
			name:  name,
			ports: ports,
			proc:  newProc(t, name, bins.traefik, []string{"--configFile=" + file}, nil),
			http: &http.Client{
				Timeout: 5 * time.Second,
				// Never follow redirects: a redirect is an answer to assert on.
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			},
		}
	})
}

// launchTraefik picks free loopback ports, builds a Traefik with build and starts it,
// waiting for its API. A free port can be taken by another process (other test
// packages run in parallel) between the probe and Traefik's bind; when Traefik exits
// with "address already in use" it is retried on fresh ports, up to four times.
func launchTraefik(t *testing.T, name string, build func(ports traefikPorts) *traefik) *traefik {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ports := traefikPorts{web: freePort(t, "127.0.0.1"), websecure: freePort(t, "127.0.0.1"), api: freePort(t, "127.0.0.1")}
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

func (tr *traefik) webAddr() string { return fmt.Sprintf("127.0.0.1:%d", tr.ports.web) }

// response is one answer through Traefik.
type response struct {
	status int
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
	r := response{status: resp.StatusCode, body: string(b)}
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

// waitServedBy polls host+path until the echo named want answers.
func (tr *traefik) waitServedBy(t *testing.T, host, path, want string, timeout time.Duration) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s%s on %s served by %s", host, path, tr.name, want), timeout, func() error {
		r, err := tr.get(host, path)
		if err != nil {
			return err
		}
		if r.from() != want {
			return fmt.Errorf("served by %s", r.from())
		}
		return nil
	})
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
	Routers  map[string]routerInfo  `json:"routers"`
	Services map[string]serviceInfo `json:"services"`
}

func (tr *traefik) rawData() (rawData, error) {
	var rd rawData
	resp, err := tr.http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/rawdata", tr.ports.api))
	if err != nil {
		return rd, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rd, fmt.Errorf("api/rawdata: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		return rd, fmt.Errorf("decoding api/rawdata: %w", err)
	}
	return rd, nil
}

// fromProvider keeps the routers and services of our provider (@http).
func (rd rawData) fromProvider() (routers map[string]routerInfo, services map[string]serviceInfo) {
	routers, services = map[string]routerInfo{}, map[string]serviceInfo{}
	for name, r := range rd.Routers {
		if strings.HasSuffix(name, "@http") {
			routers[name] = r
		}
	}
	for name, s := range rd.Services {
		if strings.HasSuffix(name, "@http") {
			services[name] = s
		}
	}
	return routers, services
}

// requireProviderClean is scenario 11, run at the end of every scenario: Traefik's API
// shows every router and service from our provider enabled, with no errors, and at
// least one router (a provider that delivered nothing is not "clean").
func (tr *traefik) requireProviderClean(t *testing.T) {
	t.Helper()
	rd, err := tr.rawData()
	if err != nil {
		t.Fatalf("%s: reading the API: %v", tr.name, err)
	}
	routers, services := rd.fromProvider()
	if len(routers) == 0 {
		t.Errorf("%s: no routers from the http provider", tr.name)
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
		t.Logf("%s: %d routers and %d services from the http provider, all enabled, no errors", tr.name, len(routers), len(services))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
