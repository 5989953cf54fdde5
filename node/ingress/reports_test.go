package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/render/routing"
)

// An application token may wait on its own writes; its refused writes are refused as
// without wait (403), never waited on.
func TestWaitAppliedOnAnApplicationTokensOwnWrite(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.ReportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	_, tok := testnode.IssueToken(t, n, "acme", "tito-classic", `"publish"`)
	testnode.StartFakePlugin(t, n, "edge-1")
	resp, body := n.Do(http.MethodPut, "/v1/apps/tito-classic/domains/ti.to/paths?wait=applied&timeout=10s", tok,
		`{"paths":{"paulca":"tito-go.apps.example.com"}}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"applied":true`) || !strings.Contains(string(body), `"paulca"`) {
		t.Fatalf("flip with wait: %d %s", resp.StatusCode, body)
	}
	resp, body = n.Do(http.MethodPut, "/v1/apps/tito-go/domains/ti.to/paths?wait=applied", tok, `{"paths":{}}`)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "applied") {
		t.Errorf("another app's door with wait: %d %s, want the plain 403", resp.StatusCode, body)
	}
}

// Reports ride the routing endpoints, which the public apex never routes.
func TestReportsAreNotReachableThroughTheApex(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/v1/ingress/", "/v1/status"} {
		found := false
		for _, d := range routing.DeniedAPIPrefixes {
			found = found || strings.HasPrefix(p, d)
		}
		if !found {
			t.Errorf("%s is not under a denied apex prefix %v", p, routing.DeniedAPIPrefixes)
		}
	}
}
