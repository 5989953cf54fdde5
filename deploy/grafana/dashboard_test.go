package grafana

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/scafo/ingress/render"
)

// The dashboard as Grafana reads it: the fields the checks below look at.
type dashboard struct {
	Title         string     `json:"title"`
	UID           string     `json:"uid"`
	SchemaVersion int        `json:"schemaVersion"`
	Panels        []panel    `json:"panels"`
	Templating    templating `json:"templating"`
	Time          struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Datasource  *datasourceRef `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		RefID        string         `json:"refId"`
		Expr         string         `json:"expr"`
		LegendFormat string         `json:"legendFormat"`
		Datasource   *datasourceRef `json:"datasource"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

type templating struct {
	List []struct {
		Name       string         `json:"name"`
		Type       string         `json:"type"`
		Query      any            `json:"query"`
		Datasource *datasourceRef `json:"datasource"`
		Multi      bool           `json:"multi"`
		IncludeAll bool           `json:"includeAll"`
		AllValue   string         `json:"allValue"`
		Regex      string         `json:"regex"`
	} `json:"list"`
}

const dashboardFile = "scafo.json"

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s is not JSON Grafana can import: %v", dashboardFile, err)
	}
	if dec.More() {
		t.Fatalf("%s: data after the dashboard object", dashboardFile)
	}
	return d
}

// panelTypes are Grafana's built-in panel types the dashboard may use (no plugin to install).
var panelTypes = map[string]bool{"row": true, "timeseries": true, "stat": true, "bargauge": true, "gauge": true, "table": true}

var uidRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,40}$`)

// TestDashboardImportsIntoGrafana: the dashboard is one JSON object with the fields Grafana's
// import needs (title, a stable uid, a schema version Grafana 10 and later read, a time range);
// a data-source variable of type prometheus, and job and instance variables read from it (the
// nodes'), traefik_job and application (the Traefiks', application read from their service
// label with the render's mapping, render.ServiceApplicationRegex); every
// panel a built-in type with a unique id, a title and a description, laid out on Grafana's
// 24-column grid without overlaps; every query panel on the data-source variable, with targets
// of unique refIds and non-empty expressions.
func TestDashboardImportsIntoGrafana(t *testing.T) {
	for _, p := range importProblems(readDashboard(t)) {
		t.Error(p)
	}
}

// importProblems lists what keeps d from importing cleanly (see TestDashboardImportsIntoGrafana).
func importProblems(d dashboard) []string {
	var out []string
	errorf := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if d.Title == "" || !uidRE.MatchString(d.UID) {
		errorf("title %q, uid %q: want a title and a uid of 1 to 40 [a-zA-Z0-9_-]", d.Title, d.UID)
	}
	if d.SchemaVersion < 36 {
		errorf("schemaVersion %d: want at least 36 (Grafana 9.1: data-source references by uid)", d.SchemaVersion)
	}
	if d.Time.From == "" || d.Time.To == "" {
		errorf("time %+v: want a default range", d.Time)
	}

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch v.Name {
		case "datasource":
			if v.Type != "datasource" || v.Query != "prometheus" {
				errorf("variable datasource: type %q query %v, want datasource / prometheus", v.Type, v.Query)
			}
		case "job", "instance":
			if v.Type != "query" || v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				errorf("variable %s: type %q datasource %+v, want a query on ${datasource}", v.Name, v.Type, v.Datasource)
			}
			if !v.Multi || !v.IncludeAll || v.AllValue != ".+" {
				errorf("variable %s: want multi, includeAll with allValue .+ (the queries match it with =~)", v.Name)
			}
		case "traefik_job", "application":
			if v.Type != "query" || v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				errorf("variable %s: type %q datasource %+v, want a query on ${datasource}", v.Name, v.Type, v.Datasource)
			}
			if !v.Multi || !v.IncludeAll {
				errorf("variable %s: want multi and includeAll (the queries match it with =~)", v.Name)
			}
			if v.Name == "traefik_job" && v.AllValue != ".+" {
				errorf("variable traefik_job: allValue %q, want .+", v.AllValue)
			}
			// Grafana keeps the first capture of the regex: the application, as the panels'
			// label_replace names it.
			if want := "/^" + render.ServiceApplicationRegex + "$/"; v.Name == "application" && (v.Regex != want || v.AllValue != applicationAllValue) {
				errorf("variable application: regex %q allValue %q, want %q and %q (the render's mapping; any application name)", v.Regex, v.AllValue, want, applicationAllValue)
			}
		default:
			errorf("variable %s: unexpected", v.Name)
		}
	}
	for _, v := range []string{"datasource", "job", "instance", "traefik_job", "application"} {
		if !vars[v] {
			errorf("no %s variable", v)
		}
	}

	if len(d.Panels) == 0 {
		return append(out, "no panels")
	}
	ids := map[int]string{}
	var placed []panel
	queries := 0
	for _, p := range d.Panels {
		if len(p.Panels) > 0 {
			errorf("panel %d %q: a collapsed row (panels inside it are hidden from a first look); keep rows open", p.ID, p.Title)
		}
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 {
			errorf("%s: id must be positive", where)
		}
		if prev, dup := ids[p.ID]; dup {
			errorf("%s: id also used by %q", where, prev)
		}
		ids[p.ID] = p.Title
		if !panelTypes[p.Type] {
			errorf("%s: type %q is not a built-in panel type", where, p.Type)
		}
		if p.Title == "" {
			errorf("%s: no title", where)
		}
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			errorf("%s: gridPos %+v is off Grafana's 24-column grid", where, g)
		}
		for _, q := range placed {
			o := q.GridPos
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				errorf("%s overlaps panel %d %q (%+v, %+v)", where, q.ID, q.Title, g, o)
			}
		}
		placed = append(placed, p)
		if p.Type == "row" {
			if g.W != 24 || g.H != 1 || g.X != 0 {
				errorf("%s: a row spans the grid (w 24, h 1, x 0), has %+v", where, g)
			}
			continue
		}
		if strings.TrimSpace(p.Description) == "" {
			errorf("%s: no description (what it shows, which metric)", where)
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			errorf("%s: datasource %+v, want prometheus ${datasource}", where, p.Datasource)
		}
		if p.FieldConfig.Defaults.Unit == "" && p.Type != "stat" {
			errorf("%s: no unit", where)
		}
		if len(p.Targets) == 0 {
			errorf("%s: no query", where)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			queries++
			if tg.RefID == "" || refs[tg.RefID] {
				errorf("%s: refId %q empty or repeated", where, tg.RefID)
			}
			refs[tg.RefID] = true
			if strings.TrimSpace(tg.Expr) == "" {
				errorf("%s %s: empty expression", where, tg.RefID)
			}
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				errorf("%s %s: datasource %+v, want ${datasource}", where, tg.RefID, tg.Datasource)
			}
		}
	}
	if queries == 0 {
		errorf("no queries")
	}
	return out
}

// TestImportChecksCatchWhatGrafanaWouldRefuse: each check of importProblems fails on the shipped
// dashboard with one defect put in (the controls of the test above).
func TestImportChecksCatchWhatGrafanaWouldRefuse(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(d *dashboard)
		want   string
	}{
		{"no uid", func(d *dashboard) { d.UID = "" }, "uid"},
		{"old schema", func(d *dashboard) { d.SchemaVersion = 27 }, "schemaVersion 27"},
		{"duplicate id", func(d *dashboard) { d.Panels[2].ID = d.Panels[1].ID }, "id also used by"},
		{"overlap", func(d *dashboard) { d.Panels[2].GridPos = d.Panels[1].GridPos }, "overlaps"},
		{"off the grid", func(d *dashboard) { d.Panels[1].GridPos.X = 20 }, "off Grafana's 24-column grid"},
		{"plugin panel", func(d *dashboard) { d.Panels[1].Type = "grafana-piechart-panel" }, "not a built-in panel type"},
		{"fixed data source", func(d *dashboard) {
			d.Panels[1].Datasource = &datasourceRef{Type: "prometheus", UID: "P1809F7CD0C75ACF3"}
		}, "want prometheus ${datasource}"},
		{"no description", func(d *dashboard) { d.Panels[1].Description = "" }, "no description"},
		{"repeated refId", func(d *dashboard) { d.Panels[2].Targets[1].RefID = d.Panels[2].Targets[0].RefID }, "empty or repeated"},
		{"no job variable", func(d *dashboard) { d.Templating.List = d.Templating.List[:1] }, "no job variable"},
		{"application read with another mapping", func(d *dashboard) {
			for i := range d.Templating.List {
				if d.Templating.List[i].Name == "application" {
					d.Templating.List[i].Regex = "/^app-(.+)@.+$/"
				}
			}
		}, "variable application: regex"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := readDashboard(t)
			if len(d.Panels) < 3 || len(d.Panels[2].Targets) < 2 {
				t.Fatal("the controls need panel 2 with two queries")
			}
			c.mutate(&d)
			problems := importProblems(d)
			for _, p := range problems {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Fatalf("want a problem with %q, got %q", c.want, problems)
		})
	}
}

// selectorRE finds a metric selector: a metric name and its matchers, if any.
var selectorRE = regexp.MustCompile(`\b((?:scafo|go|process|traefik)_[a-zA-Z0-9_]+)\b(\{[^{}]*\})?`)

// applicationAllValue is the application variable's All: any application name (a DNS label).
const applicationAllValue = "[a-z0-9-]+"

// The matchers every Traefik selector carries: the Traefik job, and the leaves of the picked
// applications (the selection; label_replace then names the application).
const (
	traefikJobMatcher  = `job=~"$traefik_job"`
	applicationMatcher = `service=~"app-$application\\.[0-9]+\\..+"`
)

// TestDashboardQueriesFollowTheVariables: every metric selector of every query is filtered by
// the job variable, and by the instance variable unless the panel is fleet-wide by design (the
// ingress view every node exports whole), so picking a job or a node narrows every panel. A
// Traefik metric's selector is filtered by the traefik_job and application variables instead
// (never by a Traefik's instance: the panels sum over every Traefik).
func TestDashboardQueriesFollowTheVariables(t *testing.T) {
	d := readDashboard(t)
	fleetWide := map[string]bool{"scafo_ingresses": true, "scafo_ingress_oldest_report_seconds": true}
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			sels := selectorRE.FindAllStringSubmatch(tg.Expr, -1)
			if len(sels) == 0 {
				t.Errorf("panel %d %q %s: no metric selector in %q", p.ID, p.Title, tg.RefID, tg.Expr)
			}
			for _, s := range sels {
				n++
				if strings.HasPrefix(s[1], "traefik_") {
					if !strings.Contains(s[2], traefikJobMatcher) || !strings.Contains(s[2], applicationMatcher) || strings.Contains(s[2], "instance") {
						t.Errorf("panel %d %q %s: %s is not filtered by %s and %s alone", p.ID, p.Title, tg.RefID, s[0], traefikJobMatcher, applicationMatcher)
					}
					continue
				}
				if !strings.Contains(s[2], `job=~"$job"`) {
					t.Errorf("panel %d %q %s: %s is not filtered by job=~\"$job\"", p.ID, p.Title, tg.RefID, s[0])
				}
				if !fleetWide[s[1]] && !strings.Contains(s[2], `instance=~"$instance"`) {
					t.Errorf("panel %d %q %s: %s is not filtered by instance=~\"$instance\"", p.ID, p.Title, tg.RefID, s[0])
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no selectors found")
	}
}

// TestDashboardCoversTheOperatorsQuestions: the dashboard has a panel on each subject an
// operator asks about first (issue 28): revision age, reconcile passes and errors, store
// requests by op, ingresses by state and the oldest report, certificates by state and days to
// expiry, instance probes down, refused requests.
func TestDashboardCoversTheOperatorsQuestions(t *testing.T) {
	d := readDashboard(t)
	var all strings.Builder
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			all.WriteString(tg.Expr + "\n")
		}
	}
	for _, want := range []string{
		"scafo_revision_age_seconds", "scafo_reconcile_duration_seconds_count", "scafo_reconcile_errors_total",
		"sum by (op) (rate(scafo_store_requests_total", "max by (state) (scafo_ingresses",
		"scafo_ingress_oldest_report_seconds", "scafo_certificate_state", "scafo_certificate_not_after_seconds",
		"scafo_instance_probe_down", `code!~"2..|304"`, "scafo_store_foreign", "scafo_node_name_conflict",
		"sum by (reason) (rate(scafo_requests_refused_total", "scafo_longpolls_parked", "scafo_certificate_renewal_failing",
		"sum by (application) (label_replace(rate(traefik_service_requests_total", `code=~"5.."`,
		"histogram_quantile(0.99, sum by (application, le) (label_replace(rate(traefik_service_request_duration_seconds_bucket",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no query with %s", want)
		}
	}
}

// applicationLabel is the label_replace of every Traefik selector: the application from the
// service label, by the render's own mapping (render.ServiceApplication applies the same
// expression), as a PromQL string literal.
var applicationLabel = `"application", "$1", "service", ` + strconvQuote(render.ServiceApplicationRegex) + `)`

// strconvQuote writes s as a PromQL double-quoted string (backslashes and quotes escaped).
func strconvQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// TestApplicationPanelsMapServicesWithTheRendersRegex: every query over a Traefik metric
// wraps each of its selectors in label_replace(rate(<selector>[…]), "application", "$1",
// "service", render.ServiceApplicationRegex) and aggregates by application, so the panels name
// applications exactly as render.ServiceApplication does (e2e's
// TestDashboardCountsEachApplicationsTrafficThroughTraefik evaluates them on a real Traefik's
// metrics).
func TestApplicationPanelsMapServicesWithTheRendersRegex(t *testing.T) {
	d := readDashboard(t)
	queries := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			sels := 0
			for _, s := range selectorRE.FindAllStringSubmatch(tg.Expr, -1) {
				if strings.HasPrefix(s[1], "traefik_") {
					sels++
				}
			}
			if sels == 0 {
				continue
			}
			queries++
			if got := strings.Count(tg.Expr, "label_replace(rate(traefik_"); got != sels {
				t.Errorf("panel %d %q %s: %d of %d Traefik selectors in label_replace(rate(…)): %s", p.ID, p.Title, tg.RefID, got, sels, tg.Expr)
			}
			if got := strings.Count(tg.Expr, applicationLabel); got != sels {
				t.Errorf("panel %d %q %s: %d of %d label_replaces end with %s", p.ID, p.Title, tg.RefID, got, sels, applicationLabel)
			}
			if got := strings.Count(tg.Expr, "sum by (application"); got != sels {
				t.Errorf("panel %d %q %s: %d of %d Traefik selectors summed by application (over every Traefik)", p.ID, p.Title, tg.RefID, got, sels)
			}
		}
	}
	if queries < 5 {
		t.Fatalf("%d queries over Traefik metrics, want the request rate, the error ratio and three percentiles", queries)
	}
}
