package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/store/s3"
)

// Tokens every test fleet uses (hex, like a minted token).
const (
	testIngressToken = "e2e0ingress0token0000000000000000000000000000000000000000000001"
	testAdminToken   = "e2e0admin0token00000000000000000000000000000000000000000000002"
	// The node's instance port range, passed explicitly so the test does not depend on
	// the default.
	portsMin = 24000
	portsMax = 28999
)

// apiClient talks to node APIs; a hung node fails the test instead of hanging it.
var apiClient = &http.Client{Timeout: 10 * time.Second}

// node is one scafo-node process: name n<i>, address 127.0.0.<i+1>, API on that
// address, state in its own temp dir, store shared with its fleet.
type node struct {
	name string
	ip   string
	port int
	proc *proc.Proc
}

// fleet is a set of nodes sharing one dir store.
type fleet struct {
	store string
	nodes []*node
}

// nodeOptions adjust a fleet's nodes.
type nodeOptions struct {
	// extra flags for every node (e.g. --traefik.healthCheck.interval=1s).
	args []string
	// each, when set, adds flags for node i (0-based) alone.
	each func(i int) []string
}

// startFleet starts n nodes sharing a store and waits until every one is ready.
func startFleet(t *testing.T, n int, opts nodeOptions) *fleet {
	t.Helper()
	requireBinaries(t)
	f := &fleet{store: filepath.Join(t.TempDir(), "store")}
	if err := os.MkdirAll(f.store, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		ip := "127.0.0." + strconv.Itoa(i+1)
		args := []string{
			"--ports.min=" + strconv.Itoa(portsMin),
			"--ports.max=" + strconv.Itoa(portsMax),
		}
		args = append(args, opts.args...)
		if opts.each != nil {
			args = append(args, opts.each(i-1)...)
		}
		f.nodes = append(f.nodes, newNode(t, "n"+strconv.Itoa(i), ip, freePort(t, ip), f.store, args...))
	}
	for _, nd := range f.nodes {
		nd.start(t)
	}
	return f
}

// newNode prepares (does not start) the node name listening on ip:port, with its state in
// a temp dir, the fleet's tokens and the dir store at store, and args added.
func newNode(t *testing.T, name, ip string, port int, store string, args ...string) *node {
	t.Helper()
	nd := &node{name: name, ip: ip, port: port}
	nd.proc = newProc(t, name, bins.node, append([]string{
		"--listen=" + hostPort(ip, port),
		"--stateDir=" + t.TempDir(),
		"--node.name=" + name,
		"--node.address=" + ip,
		"--ingress.token=" + testIngressToken,
		"--admin.token=" + testAdminToken,
		"--store.dir.path=" + store,
	}, args...), nil)
	return nd
}

func (n *node) url(path string) string { return "http://" + hostPort(n.ip, n.port) + path }

// start launches the process and waits for /v1/readyz (the first reconcile pass).
func (n *node) start(t *testing.T) {
	t.Helper()
	n.proc.MustStart(t)
	n.waitReady(t)
}

// stop sends SIGTERM and waits for the exit; a node that needs SIGKILL fails the test.
func (n *node) stop(t *testing.T) {
	t.Helper()
	if n.proc.Stop(15 * time.Second) {
		t.Errorf("%s did not exit within 15s of SIGTERM; killed it", n.name)
	}
}

func (n *node) waitReady(t *testing.T) {
	t.Helper()
	const limit = 20 * time.Second
	if err := n.proc.WaitUntil(limit, func() error { return proc.HTTPOK(apiClient, n.url("/v1/readyz")) }); err != nil {
		t.Fatalf("waiting %s for %s ready: %v", limit, n.name, err)
	}
}

// call sends a request with the admin token and decodes a JSON answer into out (if
// non-nil). Any status other than 2xx fails the test.
func (n *node) call(t *testing.T, method, path string, body, out any) {
	t.Helper()
	status, b := n.do(t, method, path, body, testAdminToken)
	if status/100 != 2 {
		t.Fatalf("%s %s on %s: %d %s", method, path, n.name, status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s on %s: decoding %q: %v", method, path, n.name, b, err)
		}
	}
}

func (n *node) do(t *testing.T, method, path string, body any, token string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, n.url(path), rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, n.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// appSpec is the body of PUT /v1/apps/{app}.
type appSpec struct {
	Name      string      `json:"name"`
	Account   string      `json:"account"`
	Placement []string    `json:"placement"`
	Health    *healthSpec `json:"health,omitempty"`
}

type healthSpec struct {
	Path string `json:"path"`
}

func (n *node) putApp(t *testing.T, a appSpec) {
	t.Helper()
	n.call(t, http.MethodPut, "/v1/apps/"+a.Name, a, nil)
}

// claim takes a custom domain for app.
func (n *node) claim(t *testing.T, app, host string) {
	t.Helper()
	n.call(t, http.MethodPut, "/v1/apps/"+app+"/domains/"+url.PathEscape(host), map[string]any{}, nil)
}

// putPaths publishes host's path map wholesale.
func (n *node) putPaths(t *testing.T, app, host string, paths map[string]string) {
	t.Helper()
	if paths == nil {
		paths = map[string]string{}
	}
	n.call(t, http.MethodPut, "/v1/apps/"+app+"/domains/"+url.PathEscape(host)+"/paths",
		map[string]any{"paths": paths}, nil)
}

// allocatePort asks this node for app's stable port (POST /v1/node/instances/{app}).
func (n *node) allocatePort(t *testing.T, app string) int {
	t.Helper()
	var got struct {
		Port int `json:"port"`
	}
	n.call(t, http.MethodPost, "/v1/node/instances/"+app, map[string]any{}, &got)
	if got.Port < portsMin || got.Port > portsMax {
		t.Fatalf("allocating a port for %s on %s: got %d, want within %d..%d", app, n.name, got.Port, portsMin, portsMax)
	}
	return got.Port
}

// setInstance reports this node's instance of app (port and readiness).
func (n *node) setInstance(t *testing.T, app string, port int, ready bool) {
	t.Helper()
	n.call(t, http.MethodPut, "/v1/node/instances/"+app, map[string]any{"port": port, "ready": ready}, nil)
}

// deployment is one application with an echo instance on each node of its placement.
type deployment struct {
	app       string
	instances map[string]*echo // by node name
}

// deploy registers app (account, placement in order, optional health path) through the
// first node, and on every placed node allocates a port, starts an echo instance named
// "<app>@<node>" on the node's address and reports it ready.
func (f *fleet) deploy(t *testing.T, app, account string, placement []*node, healthPath string) *deployment {
	t.Helper()
	spec := appSpec{Name: app, Account: account}
	for _, n := range placement {
		spec.Placement = append(spec.Placement, n.name)
	}
	if healthPath != "" {
		spec.Health = &healthSpec{Path: healthPath}
	}
	f.nodes[0].putApp(t, spec)
	d := &deployment{app: app, instances: map[string]*echo{}}
	for _, n := range placement {
		port := n.allocatePort(t, app)
		d.instances[n.name] = startEcho(t, app+"@"+n.name, n.ip, port)
		n.setInstance(t, app, port, true)
	}
	// A node writes its record (instances, readiness) asynchronously after the PUT:
	// wait until every node of the fleet publishes every placed upstream, so a test
	// that stops a node next does not race its heartbeat.
	for _, n := range f.nodes {
		waitFor(t, n.name+" publishes "+app+" on every placed node", routeTimeout, func() error {
			return n.hasUpstreams(app, len(placement))
		})
	}
	return d
}

// hasUpstreams reports whether n's routing document routes app with want upstreams.
func (n *node) hasUpstreams(app string, want int) error {
	doc, err := n.routes()
	if err != nil {
		return err
	}
	for _, r := range doc {
		if r.Application == app && len(r.Upstreams) == want {
			return nil
		}
	}
	return fmt.Errorf("%s: %s not yet routed with %d upstreams", n.name, app, want)
}

// routeSummary is one route of a node's routing document.
type routeSummary struct {
	Application string            `json:"application"`
	Upstreams   []json.RawMessage `json:"upstreams"`
}

// routes returns n's routing document by host.
func (n *node) routes() (map[string]routeSummary, error) {
	req, err := http.NewRequest(http.MethodGet, n.url("/v1/ingress/routes"), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testIngressToken)
	resp, err := apiClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: /v1/ingress/routes: %d", n.name, resp.StatusCode)
	}
	var doc struct {
		Routes []struct {
			Host string `json:"host"`
			routeSummary
		} `json:"routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: decoding routes: %w", n.name, err)
	}
	out := make(map[string]routeSummary, len(doc.Routes))
	for _, r := range doc.Routes {
		out[r.Host] = r.routeSummary
	}
	return out, nil
}

// on returns the echo instance of d on node n.
func (d *deployment) on(n *node) *echo { return d.instances[n.name] }

// nodeBase is a node's base URL, as the plugin's endpoints take it.
func nodeBase(n *node) string { return "http://" + hostPort(n.ip, n.port) }

// ingressPolls sums scafo_ingress_polls_total{format="traefik"} on a node's /metrics:
// the Traefik polls it has answered (a long-poll counts when it ends).
func (n *node) ingressPolls(t *testing.T) int {
	t.Helper()
	_, samples := scrapeSamples(t, apiClient, n.url("/metrics"), "scafo", n.name, "scafo_ingress_polls_total")
	total := 0
	for _, s := range samples {
		if s.labels["format"] == "traefik" {
			total += int(s.value)
		}
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

// waitSkipped waits until n's /v1/status (admin token) lists object among the skipped
// objects, with a reason containing every one of subs.
func (n *node) waitSkipped(t *testing.T, object string, subs ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s /v1/status to list %s skipped for %q", n.name, object, subs), routeTimeout, func() error {
		var st struct {
			Skipped []struct{ Object, Reason string } `json:"skipped"`
		}
		n.call(t, http.MethodGet, "/v1/status", nil, &st)
		for _, s := range st.Skipped {
			if s.Object == object && !slices.ContainsFunc(subs, func(sub string) bool { return !strings.Contains(s.Reason, sub) }) {
				return nil
			}
		}
		return fmt.Errorf("skipped: %v", st.Skipped)
	})
}

// writeStoreObject writes key into the fleet's dir store directly, around the API, the
// way the dir backend does (a temp file renamed over the key, so a reader never sees a
// partial file). It does not move the serial.
func writeStoreObject(t *testing.T, f *fleet, key, value string) {
	t.Helper()
	path := filepath.Join(f.store, filepath.FromSlash(key))
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.WriteString(value); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
}

// bumpSerialUnnamed moves the store's serial one step with no names after it ("N+1
// epoch"), as an out-of-band writer would: a node that reads it cannot know what
// changed and re-reads the whole store.
func bumpSerialUnnamed(t *testing.T, f *fleet) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.store, "serial"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	num, epoch, _ := strings.Cut(strings.TrimSpace(first), " ")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		t.Fatalf("serial %q: %v", first, err)
	}
	writeStoreObject(t, f, "serial", strings.TrimSpace(strconv.FormatUint(n+1, 10)+" "+epoch))
}
