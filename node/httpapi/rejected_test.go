package httpapi_test

// Refusals that read the same whatever the request's shape (docs/design.md §5), through
// the API in process. Floods of rejected credentials are TestForgedTokensCostNoStoreReadAndNoBudget's.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/httpapi"
)

// ---- a refusal reads the same whatever the request's shape ----

// TestControlPlaneRefusalIgnoresHostShape: an application token on the control-plane
// application gets one answer, 403 with one body, for every host spelling and body,
// on both methods of the path-map door.
func TestControlPlaneRefusalIgnoresHostShape(t *testing.T) {
	t.Parallel()
	// Every refused attempt counts against writes.rate.
	n := newInProcess(t, func(c *httpapi.Config) { c.WriteRate, c.WriteBurst = 1000, 1000 })
	n.fleetOf("console")
	n.Must(201, "PUT", "/v1/apps/console/domains/console.example.com", ipAdmin, "")
	var tok struct{ Token string }
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", ipAdmin, `{"account":"acme","app":"console","roles":["publish"]}`), &tok)
	n.Must(200, "PUT", "/v1/apps/console", ipAdmin, `{"account":"acme","placement":["vps-a"],"controlPlane":true}`)

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
		resp, b := n.Do(method, "/v1/apps/console/domains/"+url.PathEscape(host)+"/paths", tok.Token, body)
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
