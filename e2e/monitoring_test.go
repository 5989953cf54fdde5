package e2e

import (
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
)

// The operator's side of issue 28: the Grafana dashboard (deploy/grafana/scafo.json) and the
// alert rules (deploy/prometheus/scafo-rules.yml) query only what a node exports.
// deploy/prometheus/queried-metrics.txt is every metric and label they query, read by
// Prometheus's own parser (its test keeps the list current); this checks the list against the
// /metrics of a running node with every subsystem that exports metrics on.

const queriedMetricsFile = "deploy/prometheus/queried-metrics.txt"

// queriedTraefikMetricsFile is the Traefik metrics the dashboard's per-application panels
// query (TestDashboardCountsEachApplicationsTrafficThroughTraefik checks it).
const queriedTraefikMetricsFile = "deploy/prometheus/queried-traefik-metrics.txt"

// refusalReasons are scafo_requests_refused_total's reasons (node/httpapi/metrics.go), as
// deploy/grafana/README.md and docs/operating.md name them.
var refusalReasons = []string{"write_rate", "token", "token_lookups", "conn_reserve", "conn_per_source", "conn_limit"}

// queriedMetrics is queried-metrics.txt: metric → the labels its matchers name, and grouping
// label → the metrics of the queries grouping by it (one of which must carry it).
type queriedMetrics struct {
	metrics  map[string][]string
	grouping map[string][]string
}

// readQueriedMetrics reads file (queriedMetricsFile or queriedTraefikMetricsFile), which
// must list at least atLeast metrics (the control against a list emptied by mistake).
func readQueriedMetrics(t *testing.T, file string, atLeast int) queriedMetrics {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bins.root, file))
	if err != nil {
		t.Fatal(err)
	}
	q := queriedMetrics{metrics: map[string][]string{}, grouping: map[string][]string{}}
	for i, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch {
		case f[0] == "metric" && len(f) >= 2:
			q.metrics[f[1]] = f[2:]
		case f[0] == "label" && len(f) >= 3:
			q.grouping[f[1]] = f[2:]
		default:
			t.Fatalf("%s:%d: %q is neither `metric <name> [label…]` nor `label <name> <metric…>`", file, i+1, l)
		}
	}
	if len(q.metrics) < atLeast {
		t.Fatalf("%s lists %d metrics: not the list the dashboard and the rules query", file, len(q.metrics))
	}
	return q
}

// scrape is one /metrics answer: each sample name with the label names seen on it.
type scrape map[string]map[string]bool

// parseExposition reads Prometheus's text exposition format (what promhttp serves a plain
// GET) with Prometheus's own parser: every sample name (a histogram's _bucket, _count and
// _sum; a summary's quantiles, _count and _sum) with the label names seen on it.
func parseExposition(r io.Reader) (scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	s := scrape{}
	see := func(name string, labels map[string]string, extra ...string) {
		if s[name] == nil {
			s[name] = map[string]bool{}
		}
		for _, l := range append(slices.Collect(maps.Keys(labels)), extra...) {
			s[name][l] = true
		}
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := labelPairs(m.GetLabel())
			switch {
			case m.GetHistogram() != nil:
				see(name+"_bucket", labels, "le")
				see(name+"_count", labels)
				see(name+"_sum", labels)
			case m.GetSummary() != nil:
				if len(m.GetSummary().GetQuantile()) > 0 {
					see(name, labels, "quantile")
				}
				see(name+"_count", labels)
				see(name+"_sum", labels)
			default:
				see(name, labels)
			}
		}
	}
	return s, nil
}

// missing lists what q queries that s lacks: a metric with no sample, a matcher label not on the
// metric, a grouping label on none of the metrics grouped by it.
func (q queriedMetrics) missing(s scrape) []string {
	var out []string
	for _, m := range slices.Sorted(maps.Keys(q.metrics)) {
		labels, ok := s[m]
		if !ok {
			out = append(out, "metric "+m)
			continue
		}
		for _, l := range q.metrics[m] {
			if !labels[l] {
				out = append(out, fmt.Sprintf("label %s on %s", l, m))
			}
		}
	}
	for _, l := range slices.Sorted(maps.Keys(q.grouping)) {
		found := false
		for _, m := range q.grouping[l] {
			found = found || s[m][l]
		}
		if !found {
			out = append(out, fmt.Sprintf("label %s (grouped by) on any of %v", l, q.grouping[l]))
		}
	}
	return out
}

// TestMissingNamesWhatAScrapeLacks: the comparison the check below relies on names a metric with
// no sample, a matcher label a metric lacks, and a grouping label none of its metrics carry, and
// nothing when the scrape has it all.
func TestMissingNamesWhatAScrapeLacks(t *testing.T) {
	q := queriedMetrics{
		metrics:  map[string][]string{"a_total": {"kind"}, "b": nil},
		grouping: map[string][]string{"op": {"a_total", "b"}},
	}
	full := scrape{"a_total": {"kind": true, "op": true}, "b": {}}
	if got := q.missing(full); len(got) != 0 {
		t.Fatalf("missing %v from a scrape with everything", got)
	}
	lacking := scrape{"a_total": {"result": true}}
	got := q.missing(lacking)
	want := []string{"label kind on a_total", "metric b", "label op (grouped by) on any of [a_total b]"}
	if !slices.Equal(got, want) {
		t.Fatalf("missing %q, want %q", got, want)
	}
}

// TestDashboardAndAlertsQueryOnlyWhatANodeExports: a node with fleet certificates (issued by
// Pebble, validation on: the name resolves to the node's own listener, which answers the
// challenge), ingress groups, ingress reports (an HTTP-provider poll naming itself, of one
// group), instance probes (an instance that answers, then dies), writes and a /v1/storage
// request exports every metric and label the dashboard and the alert rules query, and every
// reason of scafo_requests_refused_total (initialised at 0, not provoked). The check
// waits until the node has exported them all (certificates are valid, the probe verdict has
// changed), and names whatever is still missing when it gives up.
func TestDashboardAndAlertsQueryOnlyWhatANodeExports(t *testing.T) {
	requireBinaries(t)
	want := readQueriedMetrics(t, queriedMetricsFile, 10)

	// Every name resolves (for Pebble's VA) to 127.0.0.1, where the node listens, on the port
	// Pebble validates.
	const ip = "127.0.0.1"
	// The node's port is held while Pebble and challtestsrv take theirs, so none of them gets it.
	hold, err := net.Listen("tcp", hostPort(ip, 0))
	if err != nil {
		t.Fatal(err)
	}
	port := hold.Addr().(*net.TCPAddr).Port
	p := pebbletest.Start(t, pebbletest.Config{HTTPPort: port})
	hold.Close()
	n := newNode(t, "mon1", ip, port, t.TempDir(),
		"--platform.domains=mon.example.com,eu.example.net",
		"--platform.groups=eu.example.net=eu",
		"--acme.enabled", "--acme.caServer="+p.Directory, "--acme.caRoots="+p.CARootsFile,
		"--acme.email=ops@example.com",
		"--probe.interval=200ms",
		"--reconcile.interval=500ms",
	)
	n.start(t)

	// An instance the node probes (TCP: no health path), on a port of this test's own.
	inst, err := net.Listen("tcp", hostPort(ip, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	go func() {
		for {
			c, err := inst.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	n.putApp(t, appSpec{Name: "shop", Account: "acme", Placement: []string{n.name}})
	n.call(t, http.MethodPut, "/v1/apps/euapp", map[string]any{
		"name": "euapp", "account": "acme", "placement": []string{n.name}, "ingress": map[string]string{"group": "eu"},
	}, nil)
	n.setInstance(t, "shop", inst.Addr().(*net.TCPAddr).Port, true)

	// An HTTP-provider Traefik of group eu, reporting as edge-eu; a /v1/storage request.
	get := func(path string, h map[string]string) (int, http.Header) {
		req, err := http.NewRequest(http.MethodGet, n.url(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testIngressToken)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := apiClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header
	}
	code, h := get("/v1/ingress/traefik?group=eu", map[string]string{"X-Scafo-Ingress": "edge-eu"})
	if code != http.StatusOK || h.Get("X-Scafo-Ingress-Report") != "recorded" {
		t.Fatalf("poll of group eu: %d, report %q", code, h.Get("X-Scafo-Ingress-Report"))
	}
	get("/v1/storage/keys", nil)

	metrics := func() (string, error) {
		resp, err := apiClient.Get(n.url("/metrics"))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("/metrics: %d %s", resp.StatusCode, b)
		}
		return string(b), nil
	}
	scrapeNode := func() (scrape, error) {
		b, err := metrics()
		if err != nil {
			return nil, err
		}
		return parseExposition(strings.NewReader(b))
	}

	// The instance answers its probes; then it dies, and its verdict changes.
	const probedUp = `scafo_instance_probe_results_total{kind="tcp",result="up"}`
	waitFor(t, "a probe of the instance answered up", 30*time.Second, func() error {
		b, err := metrics()
		if err != nil {
			return err
		}
		if !strings.Contains(b, probedUp) {
			return fmt.Errorf("no %s yet", probedUp)
		}
		return nil
	})
	inst.Close()

	err = proc.Poll(120*time.Second, 250*time.Millisecond, func() error {
		s, err := scrapeNode()
		if err != nil {
			return err
		}
		if m := want.missing(s); len(m) > 0 {
			return fmt.Errorf("not exported: %s", strings.Join(m, "; "))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the dashboard and the alert rules query what the node does not export (%s lists them; the node's names are in node/metrics.go and the subsystems' collectors): %v", queriedMetricsFile, err)
	}
	// The refusal reasons the dashboard and the runbooks name: each series is exported from
	// the node's start, at 0 before any refusal (none of them is provoked here), so a rate
	// over it reads 0, not no data.
	b, err := metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range refusalReasons {
		if series := `scafo_requests_refused_total{reason="` + reason + `"}`; !strings.Contains(b, series+" ") {
			t.Errorf("%s is not exported", series)
		}
	}
	t.Logf("all %d metrics and %d grouping labels of %s exported", len(want.metrics), len(want.grouping), queriedMetricsFile)
}
