package node

// Hostile clients (DESIGN §5): connections held without a token, floods of rejected
// credentials, refusals that read the same whatever the request's shape.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// ---- a refusal reads the same whatever the request's shape ----

// TestControlPlaneRefusalIgnoresHostShape: an application token on the control-plane
// application gets one answer, 403 with one body, for every host spelling and body,
// on both methods of the path-map door.
func TestControlPlaneRefusalIgnoresHostShape(t *testing.T) {
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	n.waitReady()
	fleetOf(t, n, "console")
	n.must(201, "PUT", "/v1/apps/console/domains/console.example.com", testAdminToken, "")
	var tok struct{ Token string }
	json.Unmarshal(n.must(201, "POST", "/v1/tokens", testAdminToken, `{"account":"acme","app":"console","roles":["publish"]}`), &tok)
	n.must(200, "PUT", "/v1/apps/console", testAdminToken, `{"account":"acme","placement":["vps-a"],"controlPlane":true}`)

	hosts := []string{
		"console.example.com", // claimed by console
		"ti.to",               // claimed by console (fleetOf)
		"unclaimed.example.com",
		"Bad_Host!",
		"-leading-dash.example.com",
		"a..b",
		"CONSOLE.EXAMPLE.COM",
		strings.Repeat("x", 300) + ".com",
	}
	bodies := []string{`{"paths":{}}`, `{"paths":{"a":"console.apps.example.com"}}`, `{"pathz":{}}`, `{"paths":{"../x":"-"}}`, `[]`}
	var want string
	check := func(method, host, body string) {
		t.Helper()
		resp, b := n.do(method, "/v1/apps/console/domains/"+url.PathEscape(host)+"/paths", tok.Token, body)
		got := fmt.Sprintf("%d %s", resp.StatusCode, b)
		if want == "" {
			want = got
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "control") {
				t.Fatalf("%s %s: %s, want a 403 naming the control plane", method, host, got)
			}
		}
		if got != want {
			t.Errorf("%s %q body %s: %s, want %s", method, host, body, got, want)
		}
	}
	for _, h := range hosts {
		check("GET", h, "")
		for _, b := range bodies {
			check("PUT", h, b)
		}
	}
}
