package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
)

// pollCase is one poll's request and what parsePoll makes of it.
type pollCase struct {
	name    string
	format  string
	query   string
	headers []string // name, value, …
	admin   bool
	// want: the parsed poll (checked field by field: check), or the refusal.
	check   func(t *testing.T, p pollRequest)
	code    int    // a refusal's status (0: parsed)
	errWant string // the refusal's error, naming the field
	detail  string // a substring of its detail
}

func pollCases() []pollCase {
	const tr, rt = api.FormatTraefik, api.FormatRoutes
	probeHdr := []string{api.HeaderIngress, "edge-1", api.HeaderAppliedProbe, "http://127.0.0.1:80"}
	return []pollCase{
		{name: "no parameter", format: rt, check: func(t *testing.T, p pollRequest) {
			if p.format != rt || p.wait != 0 || p.groups != nil || p.prefer != "" || p.report != nil || p.reportErr != nil || p.probe != nil {
				t.Errorf("%+v, want nothing asked", p)
			}
		}},
		{name: "unknown format", format: "nginx", code: 404, errWant: "unknown format", detail: `format "nginx"`},
		{name: "wait", format: tr, query: "wait=30s", check: func(t *testing.T, p pollRequest) {
			if p.wait != 30*time.Second {
				t.Errorf("wait %s", p.wait)
			}
		}},
		{name: "wait past the cap", format: tr, query: "wait=10m", check: func(t *testing.T, p pollRequest) {
			if p.wait != maxWait {
				t.Errorf("wait %s, want the cap %s", p.wait, maxWait)
			}
		}},
		{name: "wait negative", format: tr, query: "wait=-1s", code: 400, errWant: "invalid wait", detail: "wait"},
		{name: "wait not a duration", format: tr, query: "wait=soon", code: 400, errWant: "invalid wait", detail: `wait "soon"`},
		{name: "wait twice", format: tr, query: "wait=1s&wait=2s", code: 400, errWant: "invalid wait", detail: "wait: given 2 times"},
		{name: "query that does not parse", format: tr, query: "group=eu-1;x", code: 400, errWant: "invalid query"},
		{name: "groups", format: tr, query: "group=eu-2,eu-1", check: func(t *testing.T, p pollRequest) {
			if strings.Join(p.groups, ",") != "eu-1,eu-2" {
				t.Errorf("groups %v, want eu-1,eu-2 (canonical)", p.groups)
			}
		}},
		{name: "group twice", format: tr, query: "group=eu-1&group=eu-2", code: 400, errWant: "invalid group", detail: "group"},
		{name: "group malformed", format: tr, query: "group=EU_1", code: 400, errWant: "invalid group", detail: "group"},
		{name: "group listed twice", format: tr, query: "group=eu-1,eu-1", code: 400, errWant: "invalid group", detail: "twice"},
		{name: "prefer self", format: tr, query: "prefer=self", check: func(t *testing.T, p pollRequest) {
			if p.prefer != "vps-a" {
				t.Errorf("prefer %q, want this node's name", p.prefer)
			}
		}},
		{name: "prefer a node", format: tr, query: "prefer=vps-b", check: func(t *testing.T, p pollRequest) {
			if p.prefer != "vps-b" {
				t.Errorf("prefer %q", p.prefer)
			}
		}},
		{name: "prefer empty", format: tr, query: "prefer=", code: 400, errWant: "invalid prefer", detail: "prefer: empty"},
		{name: "prefer malformed", format: tr, query: "prefer=VPS_B", code: 400, errWant: "invalid prefer", detail: "prefer"},
		{name: "prefer a dotted name", format: tr, query: "prefer=a.b", code: 400, errWant: "invalid prefer", detail: "prefer"},
		{name: "prefer a leading hyphen", format: tr, query: "prefer=-x", code: 400, errWant: "invalid prefer", detail: "prefer"},
		{name: "prefer dot-dot escaped", format: tr, query: "prefer=%2e%2e", code: 400, errWant: "invalid prefer", detail: "prefer"},
		{name: "prefer twice", format: tr, query: "prefer=a&prefer=b", code: 400, errWant: "invalid prefer", detail: "prefer: given 2 times"},
		{name: "report of an HTTP provider, with its groups", format: tr, query: "group=eu-1",
			headers: []string{api.HeaderIngress, "edge-1"}, check: func(t *testing.T, p pollRequest) {
				if p.report == nil || p.report.Name != "edge-1" || p.report.Kind != api.KindHTTP || p.report.Groups != "eu-1" || p.report.Probe {
					t.Errorf("report %+v", p.report)
				}
			}},
		{name: "report of a plugin", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderIngressKind, api.KindPlugin,
			api.HeaderAppliedSerial, "12", api.HeaderAppliedEpoch, strings.Repeat("a", 16), api.HeaderAppliedRevision, strings.Repeat("b", 32)},
			check: func(t *testing.T, p pollRequest) {
				want := ingress.Report{Name: "edge-1", Kind: api.KindPlugin, Serial: 12, Epoch: strings.Repeat("a", 16), Revision: strings.Repeat("b", 32)}
				if p.report == nil || *p.report != want {
					t.Errorf("report %+v, want %+v", p.report, want)
				}
			}},
		// A refused report never refuses the poll: it is served, the report refused.
		{name: "report with a bad name", format: tr, headers: []string{api.HeaderIngress, "Edge_1"}, check: reportRefused(api.HeaderIngress)},
		{name: "report of an unknown kind", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderIngressKind, "nginx"}, check: reportRefused(api.HeaderIngressKind)},
		{name: "plugin serial malformed", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, "x"}, check: reportRefused(api.HeaderAppliedSerial)},
		{name: "plugin epoch malformed", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedEpoch, "XY"}, check: reportRefused(api.HeaderAppliedEpoch)},
		{name: "plugin revision malformed", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedRevision, "abc"}, check: reportRefused(api.HeaderAppliedRevision)},
		{name: "an HTTP provider claiming what it applied", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderAppliedSerial, "3"}, check: reportRefused(api.HeaderAppliedSerial)},
		{name: "the admin's poll is no report", format: tr, admin: true, headers: []string{api.HeaderIngress, "edge-1"}, check: func(t *testing.T, p pollRequest) {
			if p.report != nil || p.reportErr != nil {
				t.Errorf("the admin's poll: report %+v (%v), want none", p.report, p.reportErr)
			}
		}},
		{name: "applied probe", format: tr, headers: probeHdr, check: func(t *testing.T, p pollRequest) {
			if p.probe == nil || p.probe.Ingress != "edge-1" || p.probe.EntryPoint != "http://127.0.0.1:80" || p.probe.Node != "http://node.example:7400" {
				t.Errorf("probe %+v", p.probe)
			}
			if p.report == nil || !p.report.Probe {
				t.Errorf("report %+v, want it to declare the probe", p.report)
			}
		}},
		{name: "applied probe given twice", format: tr, headers: append(probeHdr, api.HeaderAppliedProbe, "http://127.0.0.1:81"), code: 400, errWant: "invalid applied probe", detail: api.HeaderAppliedProbe + ": given 2 times"},
		{name: "applied probe not a URL", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderAppliedProbe, "ftp://x"}, code: 400, errWant: "invalid applied probe", detail: api.HeaderAppliedProbe},
		{name: "applied probe http://127.0.0.1:80/x", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderAppliedProbe, "http://127.0.0.1:80/x"}, code: 400, errWant: "invalid applied probe", detail: api.HeaderAppliedProbe},
		{name: "applied probe http://u:p@127.0.0.1:80", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderAppliedProbe, "http://u:p@127.0.0.1:80"}, code: 400, errWant: "invalid applied probe", detail: api.HeaderAppliedProbe},
		{name: "applied probe 127.0.0.1:80", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderAppliedProbe, "127.0.0.1:80"}, code: 400, errWant: "invalid applied probe", detail: api.HeaderAppliedProbe},
		{name: "applied probe http://127.0.0.1:99999", format: tr, headers: []string{api.HeaderIngress, "edge-1", api.HeaderAppliedProbe, "http://127.0.0.1:99999"}, code: 400, errWant: "invalid applied probe", detail: api.HeaderAppliedProbe},
		{name: "applied probe on the routing document", format: rt, headers: probeHdr, code: 400, errWant: "invalid applied probe", detail: "only on"},
		{name: "applied probe with the admin token", format: tr, admin: true, headers: probeHdr, code: 400, errWant: "invalid applied probe", detail: "not an ingress"},
		{name: "applied probe without an ingress", format: tr, headers: []string{api.HeaderAppliedProbe, "http://127.0.0.1:80"}, code: 400, errWant: "invalid applied probe", detail: "needs " + api.HeaderIngress},
		{name: "applied probe of a plugin", format: tr, headers: append(probeHdr, api.HeaderIngressKind, api.KindPlugin), code: 400, errWant: "invalid applied probe", detail: "the plugin and the front report what they applied"},
		{name: "applied probe with a bad report", format: tr, headers: []string{api.HeaderIngress, "Edge_1", api.HeaderAppliedProbe, "http://127.0.0.1:80"}, code: 400, errWant: "invalid applied probe", detail: api.HeaderIngress},
	}
}

func reportRefused(header string) func(t *testing.T, p pollRequest) {
	return func(t *testing.T, p pollRequest) {
		t.Helper()
		if p.report != nil || p.reportErr == nil || !strings.HasPrefix(p.reportErr.Error(), header) {
			t.Errorf("report %+v, error %v: want it refused naming %s", p.report, p.reportErr, header)
		}
	}
}

func (c pollCase) request() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://node.example:7400"+api.PathIngress+c.format+"?"+c.query, nil)
	for i := 0; i+1 < len(c.headers); i += 2 {
		r.Header.Add(c.headers[i], c.headers[i+1])
	}
	return r
}

// TestParsePollReadsEveryInputOnce: every input of a poll (format, wait, group, prefer,
// the report headers, the applied probe), valid and not; a bad value is refused naming
// its field, a bad report is refused alone (the poll is served).
func TestParsePollReadsEveryInputOnce(t *testing.T) {
	for _, c := range pollCases() {
		t.Run(c.name, func(t *testing.T) {
			p, perr := parsePoll(c.request(), c.format, "vps-a", c.admin)
			switch {
			case c.code == 0 && perr != nil:
				t.Fatalf("refused: %d %s: %s", perr.code, perr.error, perr.detail)
			case c.code == 0:
				c.check(t, p)
			case perr == nil:
				t.Fatalf("parsed %+v, want %d %s", p, c.code, c.errWant)
			case perr.code != c.code || perr.error != c.errWant || !strings.Contains(perr.detail, c.detail):
				t.Fatalf("%d %q %q, want %d %q with %q", perr.code, perr.error, perr.detail, c.code, c.errWant, c.detail)
			}
		})
	}
}

// TestABadPollIsAJSONErrorNamingTheField: over the API's handler, every refused poll
// of TestParsePollReadsEveryInputOnce is answered with its status and a JSON error
// naming the field.
func TestABadPollIsAJSONErrorNamingTheField(t *testing.T) {
	const ingressTok, adminTok = "ingress-token-0123456789", "admin-token-0123456789"
	a := testAPI(t, Config{NodeName: "vps-a", IngressToken: ingressTok, AdminToken: adminTok, WriteTimeout: time.Second,
		Hosts: []string{"node.example"}}, Deps{}) // the name the polls are sent to (api.allowedHosts)
	h := a.Handler()
	for _, c := range pollCases() {
		if c.code == 0 {
			continue // a valid poll needs a published snapshot
		}
		r := c.request()
		tok := ingressTok
		if c.admin {
			tok = adminTok
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var body api.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Errorf("%s: %d %q: not a JSON error: %v", c.name, rec.Code, rec.Body, err)
			continue
		}
		if rec.Code != c.code || body.Error != c.errWant || !strings.Contains(body.Detail, c.detail) {
			t.Errorf("%s: %d %+v, want %d %q with %q", c.name, rec.Code, body, c.code, c.errWant, c.detail)
		}
	}
}
