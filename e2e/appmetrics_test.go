package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/scafo/ingress/render"
)

// Issue 38, item 2: the dashboard's per-application panels (deploy/grafana/scafo.json) over
// real Traefiks' own metrics. Two Traefiks with Prometheus metrics on, each fed the render of
// its node (prefer=self), route known traffic to two applications: one behind a failover
// chain, one that answers some requests 500, slowly, and is also reached through the other's
// path map. Both are scraped before and after; every per-application query of the dashboard
// is evaluated by promtool (Prometheus's engine, deploy/prometheus/promtool.sh) over the
// scraped series and must give each application what the test sent it.

const (
	// appMetricsSlow is how long billing's instance takes to answer: every one of its
	// requests lands above Traefik's 0.3 s bucket.
	appMetricsSlow = 400 * time.Millisecond
	// appMetricsJob is the scrape job the test gives the Traefiks' series ($traefik_job).
	appMetricsJob = "traefik"
)

// promtoolBin is Prometheus's promtool (deploy/prometheus/promtool.sh path: built once into
// .bin, or PROMTOOL_BIN).
func promtoolBin(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(bins.root, "deploy", "prometheus", "promtool.sh"), "path").Output()
	if err != nil {
		t.Fatalf("deploy/prometheus/promtool.sh path: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// scrapedSample is one sample of a scrape, with its labels (job and instance included).
type scrapedSample struct {
	labels map[string]string
	value  float64
}

// scrapeTraefikServices reads one Traefik's /metrics: its text, and every sample of the service
// metrics the dashboard queries, keyed by its series as promtool reads it.
func scrapeTraefikServices(t *testing.T, tr *traefik) (text string, samples map[string]scrapedSample) {
	t.Helper()
	return scrapeSamples(t, tr.http, fmt.Sprintf("http://127.0.0.1:%d/metrics", tr.ports.api), appMetricsJob, tr.name,
		"traefik_service_requests_total", "traefik_service_request_duration_seconds")
}

// scrapeSamples GETs url (Prometheus's text format) and returns its text and the samples of
// the families named (counters and gauges as they are, a histogram as its _bucket series, le
// included, and _count), each with the labels job and instance, keyed by its series in
// PromQL's notation.
func scrapeSamples(t *testing.T, client *http.Client, url, job, instance string, families ...string) (text string, samples map[string]scrapedSample) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	samples = map[string]scrapedSample{}
	add := func(name string, metricLabels, extra map[string]string, v float64) {
		labels := map[string]string{"job": job, "instance": instance}
		maps.Copy(labels, metricLabels)
		maps.Copy(labels, extra)
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			parts = append(parts, k+"="+strconv.Quote(labels[k]))
		}
		samples[name+"{"+strings.Join(parts, ",")+"}"] = scrapedSample{labels: labels, value: v}
	}
	for _, name := range families {
		mf := mfs[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := labelPairs(m.GetLabel())
			switch {
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				for _, bk := range h.GetBucket() {
					add(name+"_bucket", labels, map[string]string{"le": strconv.FormatFloat(bk.GetUpperBound(), 'g', -1, 64)}, float64(bk.GetCumulativeCount()))
				}
				add(name+"_bucket", labels, map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
				add(name+"_count", labels, nil, float64(h.GetSampleCount()))
			case m.GetCounter() != nil:
				add(name, labels, nil, m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				add(name, labels, nil, m.GetGauge().GetValue())
			}
		}
	}
	return string(b), samples
}

// labelPairs are a parsed sample's labels as a map.
func labelPairs[P interface {
	GetName() string
	GetValue() string
}](ps []P) map[string]string {
	out := make(map[string]string, len(ps))
	for _, p := range ps {
		out[p.GetName()] = p.GetValue()
	}
	return out
}

// TestDashboardCountsEachApplicationsTrafficThroughTraefik: see the top of this file. What the
// test sends: shop (failover chain n1, n2 on both Traefiks, prefer=self puts each Traefik's
// own node first) 20 requests through each Traefik, 15 to its platform host and 5 to its
// custom host; billing (one instance, answering after appMetricsSlow) 12 through each, 7 to
// its host, 3 to /fail (500) and 2 through shop's path map. Then: the scrape's service series
// map to those applications by render.ServiceApplication with exactly those counts, the
// failover services have no series (a request counts once, at its leaf); Traefik exports
// every metric and label deploy/prometheus/queried-traefik-metrics.txt lists; and each
// per-application query of the dashboard, evaluated by promtool with its variables at All and
// at application=billing, gives requests per second = count / 60 s (the scrapes are put one
// minute apart), the 5xx ratio 0 and 6/24, and latency percentiles inside the bucket the
// scraped counts put them in (billing's above 0.3 s).
func TestDashboardCountsEachApplicationsTrafficThroughTraefik(t *testing.T) {
	requireBinaries(t)
	promtool := promtoolBin(t)
	f := startFleet(t, 2, nodeOptions{args: ownPorts()})
	n1, n2 := f.nodes[0], f.nodes[1]
	f.deploy(t, "shop", "acme", []*node{n1, n2}, "")
	n1.putApp(t, appSpec{Name: "billing", Account: "acme", Placement: []string{n1.name}})
	port := n1.allocatePort(t, "billing")
	// billing answers like echo after appMetricsSlow, with 500 for the path /fail.
	slow := &echo{name: "billing@n1", ip: n1.ip, port: port, delay: appMetricsSlow, failPath: "/fail"}
	slow.start(t)
	t.Cleanup(slow.stop)
	n1.setInstance(t, "billing", port, true)
	const shopHost, billingHost = "www.example.org", "billing.apps.localhost"
	n1.claim(t, "shop", shopHost)
	n1.putPaths(t, "shop", shopHost, map[string]string{"billing": billingHost})

	trs := []*traefik{
		startTraefik(t, "traefik-a", traefikOptions{node: n1, ingressName: "edge-a", metrics: true}),
		startTraefik(t, "traefik-b", traefikOptions{node: n2, ingressName: "edge-b", metrics: true}),
	}
	selfShop := map[string]string{"traefik-a": "shop@n1", "traefik-b": "shop@n2"}
	for _, tr := range trs {
		tr.waitServedBy(t, "shop.apps.localhost", "/", selfShop[tr.name], routeTimeout)
		tr.waitServedBy(t, shopHost, "/", selfShop[tr.name], routeTimeout)
		tr.waitServedBy(t, billingHost, "/", "billing@n1", routeTimeout)
		tr.waitServedBy(t, shopHost, "/billing/x", "billing@n1", routeTimeout)
	}

	before := map[string]map[string]scrapedSample{}
	for _, tr := range trs {
		_, before[tr.name] = scrapeTraefikServices(t, tr)
	}
	type send struct {
		host, path, from string
		status, n        int
	}
	var wg sync.WaitGroup
	for _, tr := range trs {
		for _, s := range []send{
			{"shop.apps.localhost", "/", selfShop[tr.name], 200, 15},
			{shopHost, "/", selfShop[tr.name], 200, 5},
			{billingHost, "/", "billing@n1", 200, 7},
			{billingHost, "/fail", "billing@n1", 500, 3},
			{shopHost, "/billing/y", "billing@n1", 200, 2},
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range s.n {
					r, err := tr.get(s.host, s.path)
					if err != nil || r.status != s.status || r.from() != s.from {
						t.Errorf("%s: GET %s%s: %d from %s (%v), want %d from %s", tr.name, s.host, s.path, r.status, r.from(), err, s.status, s.from)
					}
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	sent := map[string]float64{"shop": 40, "billing": 24}
	sentErrors := map[string]float64{"shop": 0, "billing": 6}

	// The scrapes: what each application's leaves counted, through the render's mapping.
	after := map[string]map[string]scrapedSample{}
	traefikWant := readQueriedMetrics(t, queriedTraefikMetricsFile, 2)
	counted, errs := map[string]float64{}, map[string]float64{}
	buckets := map[string]map[float64]float64{} // application → le → requests in the window
	for _, tr := range trs {
		var text string
		text, after[tr.name] = scrapeTraefikServices(t, tr)
		s, err := parseExposition(strings.NewReader(text))
		if err != nil {
			t.Fatalf("%s /metrics: %v", tr.name, err)
		}
		if m := traefikWant.missing(s); len(m) > 0 {
			t.Errorf("%s does not export what the dashboard queries (%s): %v", tr.name, queriedTraefikMetricsFile, m)
		}
		for key, smp := range after[tr.name] {
			svc := smp.labels["service"]
			if svc == "app-shop@http" || strings.Contains(svc, ".failover") {
				t.Errorf("%s: a failover service has a series (%s): its requests would count twice", tr.name, key)
			}
			app, ok := render.ServiceApplication(svc)
			if !ok {
				continue
			}
			delta := smp.value - before[tr.name][key].value
			switch {
			case strings.HasPrefix(key, "traefik_service_requests_total{"):
				counted[app] += delta
				if strings.HasPrefix(smp.labels["code"], "5") {
					errs[app] += delta
				}
			case smp.labels["le"] != "":
				le, err := strconv.ParseFloat(smp.labels["le"], 64)
				if err != nil {
					t.Fatalf("%s: le %q: %v", key, smp.labels["le"], err)
				}
				if buckets[app] == nil {
					buckets[app] = map[float64]float64{}
				}
				buckets[app][le] += delta
			}
		}
	}
	for app, n := range sent {
		if counted[app] != n || errs[app] != sentErrors[app] {
			t.Errorf("%s: the Traefiks counted %v requests (%v 5xx) at its leaves, the test sent %v (%v)", app, counted[app], errs[app], n, sentErrors[app])
		}
	}
	if len(counted) != len(sent) {
		t.Errorf("applications counted: %v, want %v", counted, sent)
	}
	if b := buckets["billing"][0.3]; b != 0 {
		t.Errorf("billing: %v requests under 0.3 s, each took at least %s", b, appMetricsSlow)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The dashboard's per-application queries, evaluated by Prometheus's engine.
	queries := traefikQueries(t)
	tests := []any{}
	expected := []map[string]any{}
	for i, q := range queries {
		for _, pick := range []string{"", "billing"} {
			apps := slices.Sorted(maps.Keys(sent))
			if pick != "" {
				apps = []string{pick}
			}
			key := fmt.Sprintf("%d%s", i, pick)
			expr := q.promql(pick)
			for _, app := range apps {
				lo, hi := q.expect(t, app, sent[app], sentErrors[app], buckets[app])
				for name, v := range map[string]float64{"scafo_e2e_lo": lo, "scafo_e2e_hi": hi} {
					expected = append(expected, map[string]any{
						"series": fmt.Sprintf(`%s{application=%q,query=%q}`, name, app, key),
						"values": strings.TrimSpace(strings.Repeat(strconv.FormatFloat(v, 'g', -1, 64)+" ", 5)),
					})
				}
			}
			var within []map[string]any
			for _, app := range apps {
				within = append(within, map[string]any{"labels": fmt.Sprintf(`{application=%q}`, app), "value": 1})
			}
			sel := func(name string) string { return fmt.Sprintf(`%s{query=%q}`, name, key) }
			tests = append(tests,
				// Each application's value within [lo, hi] ...
				map[string]any{"expr": fmt.Sprintf("((%s) >= bool on(application) %s) * on(application) ((%s) <= bool on(application) %s)", expr, sel("scafo_e2e_lo"), expr, sel("scafo_e2e_hi")),
					"eval_time": "4m", "exp_samples": within},
				// ... and no other application.
				map[string]any{"expr": fmt.Sprintf("(%s) unless on(application) %s", expr, sel("scafo_e2e_lo")),
					"eval_time": "4m", "exp_samples": []any{}})
		}
	}
	// The scraped counters as input series: one minute apart, each minute adding what the
	// window between the scrapes added (a straight line, which rate's extrapolation keeps
	// exact); the evaluation at 4m over 2m sees minutes 3 and 4 only.
	var input []map[string]any
	for _, tr := range trs {
		for _, key := range slices.Sorted(maps.Keys(after[tr.name])) {
			b, a := before[tr.name][key].value, after[tr.name][key].value
			input = append(input, map[string]any{"series": key, "values": fmt.Sprintf("%s+%sx4",
				strconv.FormatFloat(b, 'g', -1, 64), strconv.FormatFloat(a-b, 'g', -1, 64))})
		}
	}
	input = append(input, expected...)
	doc, err := yaml.Marshal(map[string]any{
		"evaluation_interval": "1m",
		"tests":               []any{map[string]any{"interval": "1m", "input_series": input, "promql_expr_test": tests}},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "dashboard-per-application.test.yml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", file)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		for i, q := range queries {
			t.Logf("query %d (%s): %s", i, q.where, q.promql(""))
		}
		t.Fatalf("promtool test rules on the dashboard's per-application queries: %v\n%s", err, out)
	}
	t.Logf("%d per-application queries of the dashboard, at All and at one application, give the counts sent (%d promtool cases); billing's buckets %v",
		len(queries), len(tests), buckets["billing"])
}

// traefikQuery is one query of the dashboard over Traefik's metrics.
type traefikQuery struct {
	where    string
	expr     string
	quantile float64 // histogram_quantile's φ; 0 for the others
	ratio    bool    // the 5xx share
}

var quantileRE = regexp.MustCompile(`^histogram_quantile\(([0-9.]+),`)

// traefikQueries are the dashboard's queries over traefik_ metrics, each classified as the
// request rate, the 5xx ratio or a latency percentile; one the test would not know how to
// check fails it.
func traefikQueries(t *testing.T) []traefikQuery {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bins.root, "deploy", "grafana", "scafo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []traefikQuery
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, "traefik_") {
				continue
			}
			q := traefikQuery{where: fmt.Sprintf("panel %d %q %s", p.ID, p.Title, tg.RefID), expr: tg.Expr}
			switch m := quantileRE.FindStringSubmatch(tg.Expr); {
			case m != nil:
				if q.quantile, err = strconv.ParseFloat(m[1], 64); err != nil {
					t.Fatalf("%s: %v", q.where, err)
				}
			case strings.Contains(tg.Expr, `code=~"5.."`):
				q.ratio = true
			case strings.HasPrefix(tg.Expr, "sum by (application) (label_replace(rate(traefik_service_requests_total{") && strings.Count(tg.Expr, "traefik_service") == 1:
			default:
				t.Fatalf("%s: a per-application query this test does not check: %s", q.where, tg.Expr)
			}
			out = append(out, q)
		}
	}
	if len(out) < 5 {
		t.Fatalf("%d per-application queries in the dashboard, want the request rate, the 5xx ratio and three percentiles", len(out))
	}
	return out
}

// promql is the query as Grafana sends it: the Traefik job, a 2m rate interval, and the
// application variable at All (pick "") or at one application.
func (q traefikQuery) promql(pick string) string {
	app := "[a-z0-9-]+" // the variable's allValue
	if pick != "" {
		app = regexp.QuoteMeta(pick)
	}
	return strings.NewReplacer("$traefik_job", appMetricsJob, "$__rate_interval", "2m", "$application", app).Replace(q.expr)
}

// expect is the range q must evaluate to for app: requests per second (sent over the minute
// the test puts between the scrapes) and the 5xx share exactly (to 1e-9); a percentile
// inside the bucket its rank falls in, by the scraped counts (histogram_quantile interpolates
// within it; past the last finite bound it answers that bound).
func (q traefikQuery) expect(t *testing.T, app string, sent, sentErrors float64, buckets map[float64]float64) (lo, hi float64) {
	t.Helper()
	const tolerance = 1e-9
	switch {
	case q.ratio:
		v := sentErrors / sent
		return v - tolerance, v + tolerance
	case q.quantile == 0:
		v := sent / 60
		return v - tolerance, v + tolerance
	}
	les := slices.Sorted(maps.Keys(buckets))
	if len(les) < 2 || !math.IsInf(les[len(les)-1], 1) || buckets[les[len(les)-1]] != sent {
		t.Fatalf("%s: buckets %v: want finite buckets and +Inf counting the %v requests sent", app, buckets, sent)
	}
	rank := q.quantile * sent
	i := sort.Search(len(les), func(i int) bool { return buckets[les[i]] >= rank })
	if i == len(les)-1 {
		return les[i-1], les[i-1]
	}
	if i > 0 {
		lo = les[i-1]
	}
	return lo, les[i]
}
