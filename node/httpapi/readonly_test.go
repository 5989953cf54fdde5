package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/httpapi"
)

// TestTheReadOnlyTokenMakesOnlyTheRoutesMarkedReadOnly iterates the route table: the
// read-only token is admitted on a route marked readOnly (every one a GET) and refused
// on every other route that takes a token, 403 with a JSON body naming its role,
// before anything is read or written; the routing document it reads is never an ingress's
// poll (the Traefik configuration, a report or an applied probe: 403), and the store
// holds nothing new after all of it.
func TestTheReadOnlyTokenMakesOnlyTheRoutesMarkedReadOnly(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/x1", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	before := auditCount(t, n)
	readOnly := 0
	for _, rt := range httpapi.RouteTable() {
		if rt.Public {
			continue
		}
		what := rt.Method + " " + concrete(rt.Pattern)
		if rt.ReadOnly && rt.Method != http.MethodGet {
			t.Errorf("%s is marked readOnly: only a GET may be", what)
		}
		resp, b := n.Do(rt.Method, concrete(rt.Pattern), testnode.ReadOnlyToken, `{"nope":1}`)
		refused := resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
		switch {
		case rt.ReadOnly && (refused || resp.StatusCode >= 500):
			t.Errorf("%s with the read-only token: %d %.200s, want admitted", what, resp.StatusCode, b)
		case !rt.ReadOnly && rt.Method == http.MethodHead && resp.StatusCode != http.StatusForbidden: // no body
			t.Errorf("%s with the read-only token: %d, want 403", what, resp.StatusCode)
		case !rt.ReadOnly && rt.Method != http.MethodHead && !refusedAs(resp, b, "read-only"):
			t.Errorf("%s with the read-only token: %d %.200s, want 403 naming the read-only role", what, resp.StatusCode, b)
		}
		if rt.ReadOnly {
			readOnly++
		}
	}
	if readOnly < 7 {
		t.Errorf("%d routes marked readOnly, want status, the routing document, applications, claims, instances and audit", readOnly)
	}
	for _, c := range []struct {
		what, path string
		hdr        []string
	}{
		{"the Traefik configuration", api.PathIngress + api.FormatTraefik, nil},
		{"a report", api.PathIngress + api.FormatRoutes, []string{api.HeaderIngress, "edge-1", api.HeaderIngressKind, api.KindPlugin}},
		{"an applied probe", api.PathIngress + api.FormatRoutes, []string{api.HeaderAppliedProbe, "http://127.0.0.1:80"}},
	} {
		if resp, b := n.Get(c.path, testnode.ReadOnlyToken, c.hdr...); !refusedAs(resp, b, "read-only") {
			t.Errorf("%s with the read-only token: %d %.200s, want 403 naming the read-only role", c.what, resp.StatusCode, b)
		}
	}
	if ins := statusIngresses(t, n); len(ins) != 0 {
		t.Errorf("the read-only token's polls listed %+v, want no ingress", ins)
	}
	if after := auditCount(t, n); after != before {
		t.Errorf("the audit log went from %d to %d records: the read-only token changed something", before, after)
	}
}

// TestTheStatusPageReadsWithoutAWarning: what the status page reads (status, the routing
// document, applications, the audit log) the read-only token reads whole; the ingress
// token reads status and the routing document, and its refusals on applications and
// the audit log are a 403 naming its role (the page says "needs the admin or read-only
// token"), without a WARN line: it is the fleet's own credential, not an attacker's guess
// (they were a 401 and a WARN "bad token" every 30 s of an open page).
func TestTheStatusPageReadsWithoutAWarning(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	page := []string{api.PathStatus, api.PathIngress + api.FormatRoutes, api.PathApps, api.PathAudit + "?limit=20"}
	for _, p := range page {
		if resp, b := n.Get(p, testnode.ReadOnlyToken); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the read-only token: %d %.200s, want 200", p, resp.StatusCode, b)
		}
	}
	for i, p := range page {
		resp, b := n.Get(p, testnode.IngressToken)
		if i < 2 && resp.StatusCode != http.StatusOK || i >= 2 && !refusedAs(resp, b, "ingress") {
			t.Errorf("GET %s with the ingress token: %d %.200s", p, resp.StatusCode, b)
		}
	}
	if strings.Contains(n.Logs.String(), "level=WARN") {
		t.Errorf("the page's reads logged a WARN:\n%s", n.Logs.String())
	}
}

// refusedAs reports whether resp is a 403 whose JSON body names role.
func refusedAs(resp *http.Response, b []byte, role string) bool {
	var e api.Error
	return resp.StatusCode == http.StatusForbidden && json.Unmarshal(b, &e) == nil && e.Role == role && e.Detail != ""
}

func auditCount(t *testing.T, n *testnode.Node) int {
	t.Helper()
	var body struct{ Records []json.RawMessage }
	if err := json.Unmarshal(n.Must(200, "GET", api.PathAudit, testnode.AdminToken, ""), &body); err != nil {
		t.Fatal(err)
	}
	return len(body.Records)
}
