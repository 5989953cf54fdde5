package prometheus

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The tests of the alert rules and of the queries the dashboard and the rules make, through
// promtool, Prometheus's own checker (built once by promtool.sh into <repo>/.bin; PROMTOOL_BIN
// overrides). Without it they skip with the command to run, except under CI (CI set), where
// they fail.

var update = flag.Bool("update", false, "rewrite queried-metrics.txt from the rules and the dashboard")

const (
	rulesFile     = "scafo-rules.yml"
	unitTestsFile = "scafo-rules.test.yml"
	dashboardFile = "../grafana/scafo.json"
	queriedFile   = "queried-metrics.txt"
	// queriedTraefikFile is the Traefik metrics the per-application panels query.
	queriedTraefikFile = "queried-traefik-metrics.txt"
	readmeFile         = "README.md"
)

// promtool returns the promtool binary the tests run.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL_BIN"); p != "" {
		return p
	}
	p, err := filepath.Abs(filepath.Join("..", "..", ".bin", "promtool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("no promtool (%v): run `deploy/prometheus/promtool.sh install`", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// runPromtool runs promtool with args in dir and returns its combined output and error.
func runPromtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

type rule struct {
	Alert       string            `yaml:"alert,omitempty"`
	Record      string            `yaml:"record,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

func readRules(t *testing.T, path string) (ruleFile, []rule) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var all []rule
	for _, g := range f.Groups {
		all = append(all, g.Rules...)
	}
	if len(all) == 0 {
		t.Fatalf("%s: no rules", path)
	}
	return f, all
}

type unitTests struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	Tests              []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestAlertRulesPassPromtoolCheck: `promtool check rules`, every linter on and fatal, accepts
// the file and counts every rule in it; each alert carries a severity Alertmanager routes on, a
// summary, a description, and a runbook that names a heading of README.md. A rule promtool
// refuses (the control) fails the same check.
func TestAlertRulesPassPromtoolCheck(t *testing.T) {
	_, rules := readRules(t, rulesFile)
	out, err := runPromtool(t, ".", "check", "rules", "--lint=all", "--lint-fatal", rulesFile)
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules)); !strings.Contains(out, want) {
		t.Fatalf("promtool check rules: want %q in\n%s", want, out)
	}

	readme, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(readme))
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("rule %q is not an alert (this file holds alerts only)", r.Record)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("%s: two alerts of one name", r.Alert)
		}
		seen[r.Alert] = true
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		want := "deploy/prometheus/README.md#" + strings.ToLower(r.Alert)
		if r.Annotations["runbook"] != want {
			t.Errorf("%s: runbook %q, want %q", r.Alert, r.Annotations["runbook"], want)
		}
		if !anchors[strings.ToLower(r.Alert)] {
			t.Errorf("%s: README.md has no heading %q (the runbook the alert links)", r.Alert, r.Alert)
		}
	}

	broken := filepath.Join(t.TempDir(), "broken.yml")
	writeFile(t, broken, []byte("groups:\n  - name: x\n    rules:\n      - alert: Broken\n        expr: rate(scafo_reconcile_errors_total[5m]\n"))
	if out, err := runPromtool(t, ".", "check", "rules", broken); err == nil {
		t.Fatalf("promtool check rules accepted an unbalanced expression:\n%s", out)
	}
}

// headingAnchors are the GitHub anchors of a Markdown file's headings.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(md, "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestEveryAlertHasAFiringAndAQuietUnitTest: scafo-rules.test.yml tests the rules file, and
// for every alert holds at least one evaluation where it fires and one where it stays quiet
// (exp_alerts empty), and names no alert the rules do not define.
func TestEveryAlertHasAFiringAndAQuietUnitTest(t *testing.T) {
	_, rules := readRules(t, rulesFile)
	ut := readUnitTests(t)
	if !slices.Equal(ut.RuleFiles, []string{rulesFile}) {
		t.Fatalf("%s tests %v, want [%s]", unitTestsFile, ut.RuleFiles, rulesFile)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tg := range ut.Tests {
		for _, c := range tg.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname]++
			} else {
				quiet[c.Alertname]++
			}
		}
	}
	defined := map[string]bool{}
	for _, r := range rules {
		defined[r.Alert] = true
		if fires[r.Alert] == 0 {
			t.Errorf("%s: no unit test where it fires", r.Alert)
		}
		if quiet[r.Alert] == 0 {
			t.Errorf("%s: no unit test where it stays quiet", r.Alert)
		}
	}
	for name := range fires {
		if !defined[name] {
			t.Errorf("%s tests %s, which the rules do not define", unitTestsFile, name)
		}
	}
	for name := range quiet {
		if !defined[name] {
			t.Errorf("%s tests %s, which the rules do not define", unitTestsFile, name)
		}
	}
}

func readUnitTests(t *testing.T) unitTests {
	t.Helper()
	b, err := os.ReadFile(unitTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var ut unitTests
	if err := yaml.Unmarshal(b, &ut); err != nil {
		t.Fatalf("%s: %v", unitTestsFile, err)
	}
	if len(ut.Tests) == 0 {
		t.Fatalf("%s: no tests", unitTestsFile)
	}
	return ut
}

// TestUnitTestsFailWhenAnAlertCannotFire: `promtool test rules` runs every case of
// scafo-rules.test.yml against the rules as shipped and passes (alerts fire exactly with
// the labels and rendered annotations expected, and only then); and the firing cases
// depend on each rule: with one alert's expression replaced by one that never fires
// (everything else as shipped), it fails and names that alert, for every alert in turn.
func TestUnitTestsFailWhenAnAlertCannotFire(t *testing.T) {
	if out, err := runPromtool(t, ".", "test", "rules", unitTestsFile); err != nil || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules on the rules as shipped: %v, want SUCCESS in\n%s", err, out)
	}
	_, rules := readRules(t, rulesFile)
	tests, err := os.ReadFile(unitTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		t.Run(r.Alert, func(t *testing.T) {
			t.Parallel()
			f, _ := readRules(t, rulesFile)
			for gi := range f.Groups {
				for ri := range f.Groups[gi].Rules {
					if f.Groups[gi].Rules[ri].Alert == r.Alert {
						f.Groups[gi].Rules[ri].Expr = "vector(0) > 1"
					}
				}
			}
			b, err := yaml.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, rulesFile), b)
			writeFile(t, filepath.Join(dir, unitTestsFile), tests)
			out, err := runPromtool(t, dir, "test", "rules", unitTestsFile)
			if err == nil {
				t.Fatalf("%s never firing: promtool test rules still passes:\n%s", r.Alert, out)
			}
			if !strings.Contains(out, "alertname: "+r.Alert) {
				t.Fatalf("%s never firing: promtool test rules fails without naming it:\n%s", r.Alert, out)
			}
		})
	}
}

// dashboardQueries are the PromQL queries of the dashboard (each panel target, and each query
// variable's label_values(metric, label) as the selector it reads), with Grafana's variables
// replaced by values PromQL accepts, keyed by where they are ("panel 4 \"Title\" A").
func dashboardQueries(t *testing.T) (keys []string, exprs map[string]string) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs = map[string]string{}
	add := func(key, expr string) {
		keys = append(keys, key)
		exprs[key] = grafanaToPromQL(expr)
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		lv := labelValuesRE.FindStringSubmatch(q)
		if lv == nil {
			t.Fatalf("variable %s: query %q is not label_values(<selector>, <label>)", v.Name, q)
		}
		add(fmt.Sprintf("variable %s", v.Name), fmt.Sprintf("count by (%s) (%s)", lv[2], lv[1]))
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			add(fmt.Sprintf("panel %d %q %s", p.ID, p.Title, tg.RefID), tg.Expr)
		}
	}
	if len(keys) == 0 {
		t.Fatalf("%s: no queries", dashboardFile)
	}
	return keys, exprs
}

var (
	labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)
	grafanaVarRE  = regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}?`)
)

// grafanaToPromQL replaces the dashboard's variables the way Grafana would before sending a
// query: intervals by a duration, the others (template variables in label matchers) by a value.
func grafanaToPromQL(expr string) string {
	return grafanaVarRE.ReplaceAllStringFunc(expr, func(v string) string {
		name := grafanaVarRE.FindStringSubmatch(v)[1]
		switch name {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		case "__interval_ms", "__range_ms":
			return "300000"
		case "__range_s":
			return "300"
		default:
			return "value"
		}
	})
}

// TestDashboardQueriesAreValidPromQL: every query of the dashboard, variables substituted, is
// PromQL Prometheus accepts (each becomes a recording rule `promtool check rules` parses).
func TestDashboardQueriesAreValidPromQL(t *testing.T) {
	keys, exprs := dashboardQueries(t)
	type rec struct {
		Record string `yaml:"record,omitempty"`
		Expr   string `yaml:"expr"`
	}
	var recs []rec
	for i, k := range keys {
		recs = append(recs, rec{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: exprs[k]})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": recs}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	writeFile(t, file, b)
	out, err := runPromtool(t, ".", "check", "rules", "--lint=none", file)
	if err != nil {
		for i, k := range keys {
			t.Logf("dashboard:query_%d is %s: %s", i, k, exprs[k])
		}
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(keys)); !strings.Contains(out, want) {
		t.Fatalf("want %q in\n%s", want, out)
	}
}

// probeLabel is the label matcher promtool adds to every selector of a query, so that each
// selector (and its metric name) is found in promtool's rendering of the parsed query.
const probeLabel = `scafo_probe="1"`

var (
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\{([^{}]*` + regexp.QuoteMeta(probeLabel) + `[^{}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"`)
	// labelReplaceRE finds the label a label_replace writes: its last four arguments (dst,
	// replacement, src, regex), as promtool prints them.
	labelReplaceRE = regexp.MustCompile(`"([a-zA-Z_][a-zA-Z0-9_]*)",\s*"(?:[^"\\]|\\.)*",\s*"[a-zA-Z_][a-zA-Z0-9_]*",\s*"(?:[^"\\]|\\.)*"\s*\)`)
	groupingRE     = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)`)
)

// targetLabels are the labels Prometheus attaches to every scraped series (not exported by the
// node, so not checked against its scrape).
var targetLabels = map[string]bool{"job": true, "instance": true}

// queried are the metrics a set of queries select, with the labels their matchers name, and
// the grouping labels (by, without, on, …) with the metrics of the query they may come from.
type queried struct {
	metrics  map[string]map[string]bool // metric → matcher labels
	grouping map[string]map[string]bool // label → metrics of the queries grouping by it
}

// parseQueries reads each query with Prometheus's parser (promtool adds probeLabel to every
// selector and prints the query back) and collects what it selects.
func parseQueries(t *testing.T, exprs map[string]string) queried {
	t.Helper()
	q := queried{metrics: map[string]map[string]bool{}, grouping: map[string]map[string]bool{}}
	for key, expr := range exprs {
		out, err := runPromtool(t, ".", "--experimental", "promql", "label-matchers", "set", expr, "scafo_probe", "1")
		if err != nil {
			t.Fatalf("%s: promtool could not parse %q: %v\n%s", key, expr, err, out)
		}
		sels := selectorRE.FindAllStringSubmatch(out, -1)
		if len(sels) == 0 {
			t.Fatalf("%s: no selector found in %q (promtool printed %q)", key, expr, out)
		}
		var names []string
		for _, s := range sels {
			name := s[1]
			if name == "" {
				t.Fatalf("%s: a selector without a metric name (%s): name the metric", key, s[0])
			}
			names = append(names, name)
			if q.metrics[name] == nil {
				q.metrics[name] = map[string]bool{}
			}
			for _, m := range matcherRE.FindAllStringSubmatch(s[2], -1) {
				if l := m[1]; l != "scafo_probe" && !targetLabels[l] {
					q.metrics[name][l] = true
				}
			}
		}
		made := map[string]bool{}
		for _, m := range labelReplaceRE.FindAllStringSubmatch(out, -1) {
			made[m[1]] = true
		}
		for _, g := range groupingRE.FindAllStringSubmatch(out, -1) {
			for _, l := range strings.Split(g[1], ",") {
				l = strings.TrimSpace(l)
				if l == "" || targetLabels[l] || made[l] {
					continue
				}
				if q.grouping[l] == nil {
					q.grouping[l] = map[string]bool{}
				}
				for _, n := range names {
					q.grouping[l][n] = true
				}
			}
		}
	}
	return q
}

// render writes q as a queried-metrics file: header, then its metrics and grouping labels.
func (q queried) render(header string) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	for _, m := range sortedKeys(q.metrics) {
		fmt.Fprintf(&b, "metric %s", m)
		for _, l := range sortedKeys(q.metrics[m]) {
			fmt.Fprintf(&b, " %s", l)
		}
		b.WriteByte('\n')
	}
	for _, l := range sortedKeys(q.grouping) {
		fmt.Fprintf(&b, "label %s %s\n", l, strings.Join(sortedKeys(q.grouping[l]), " "))
	}
	return b.Bytes()
}

// byExporter splits q into the metrics whose names keep returns true for, with the grouping
// labels of those metrics.
func (q queried) byExporter(keep func(metric string) bool) queried {
	out := queried{metrics: map[string]map[string]bool{}, grouping: map[string]map[string]bool{}}
	for m, labels := range q.metrics {
		if keep(m) {
			out.metrics[m] = labels
		}
	}
	for l, ms := range q.grouping {
		for m := range ms {
			if keep(m) {
				if out.grouping[l] == nil {
					out.grouping[l] = map[string]bool{}
				}
				out.grouping[l][m] = true
			}
		}
	}
	return out
}

// The headers of the two lists: the node's metrics, and the Traefiks' the per-application
// panels query.
const (
	queriedHeader = "# Every metric deploy/prometheus/scafo-rules.yml and deploy/grafana/scafo.json query, with the\n" +
		"# labels their matchers name; then every label they group or match by (by, without, on, …),\n" +
		"# with the metrics of the queries doing so (one of which must carry it). Written by\n" +
		"# `go test ./deploy/prometheus -run QueriedMetrics -update` from Prometheus's parse of each query\n" +
		"# (job and instance, the labels Prometheus adds, are left out); e2e's\n" +
		"# TestDashboardAndAlertsQueryOnlyWhatANodeExports checks it against a running node's /metrics.\n" +
		"# Traefik's metrics are in queried-traefik-metrics.txt.\n"
	queriedTraefikHeader = "# Every Traefik metric deploy/grafana/scafo.json queries (the per-application panels), with the\n" +
		"# labels their matchers name; then every label they group or match by, with the metrics of\n" +
		"# the queries doing so (labels a label_replace makes, application, are left out). Written by\n" +
		"# `go test ./deploy/prometheus -run QueriedMetrics -update`; e2e's\n" +
		"# TestDashboardCountsEachApplicationsTrafficThroughTraefik checks it against a Traefik's /metrics.\n"
)

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestQueriedMetricsListIsCurrent: queried-metrics.txt (the node's metrics: scafo_, and its
// Go and process collectors' go_ and process_) and queried-traefik-metrics.txt (Traefik's,
// traefik_) are what the rules and the dashboard query, as Prometheus's parser reads them (so
// the running-node and running-Traefik checks in e2e check all of it): -update rewrites them.
// No other exporter's name is queried, and the lists hold the metrics of each area the
// dashboard covers (the control against a vacuous list).
func TestQueriedMetricsListIsCurrent(t *testing.T) {
	_, rules := readRules(t, rulesFile)
	exprs := map[string]string{}
	for _, r := range rules {
		exprs["alert "+r.Alert] = r.Expr
	}
	_, dash := dashboardQueries(t)
	for k, e := range dash {
		exprs[k] = e
	}
	q := parseQueries(t, exprs)
	isNode := func(m string) bool {
		// The node's registry: its own metrics, and client_golang's Go and process collectors.
		return strings.HasPrefix(m, "scafo_") || strings.HasPrefix(m, "go_") || strings.HasPrefix(m, "process_")
	}
	isTraefik := func(m string) bool { return strings.HasPrefix(m, "traefik_") }
	for m := range q.metrics {
		if !isNode(m) && !isTraefik(m) {
			t.Errorf("%s is neither a scafo-node metric (scafo_, go_ or process_) nor Traefik's (traefik_)", m)
		}
	}
	for _, f := range []struct {
		file, header string
		q            queried
	}{
		{queriedFile, queriedHeader, q.byExporter(isNode)},
		{queriedTraefikFile, queriedTraefikHeader, q.byExporter(isTraefik)},
	} {
		got := f.q.render(f.header)
		if *update {
			writeFile(t, f.file, got)
		}
		want, err := os.ReadFile(f.file)
		if err != nil {
			t.Fatalf("%v (go test ./deploy/prometheus -run QueriedMetrics -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s is stale (go test ./deploy/prometheus -run QueriedMetrics -update):\n--- want\n%s\n--- got\n%s", f.file, want, got)
		}
	}
	for _, m := range []string{"scafo_revision_age_seconds", "scafo_reconcile_errors_total", "scafo_store_requests_total",
		"scafo_ingresses", "scafo_certificate_state", "scafo_certificate_not_after_seconds", "scafo_instance_probe_down",
		"scafo_store_foreign", "scafo_node_name_conflict", "scafo_instance_probe_transitions_total",
		"traefik_service_requests_total", "traefik_service_request_duration_seconds_bucket"} {
		if q.metrics[m] == nil {
			t.Errorf("the rules and the dashboard query no %s", m)
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
