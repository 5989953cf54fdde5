package httpapi_test

// Floods of rejected credentials, and refusals that read the same whatever the
// request's shape (docs/design.md §5), through the API in process.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/httpapi"
)

// ---- rejected requests are cheap ----

// rejectionLines counts the log lines about rejected requests.
func rejectionLines(logs string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "rejected") {
			n++
		}
	}
	return n
}

// TestRejectedRequestsAreCheap: a flood of bad credentials reads the store a bounded
// number of times (none for a token that is not shaped like an application token, once
// for a well-formed one), and is logged in a few lines, not one per request.
func TestRejectedRequestsAreCheap(t *testing.T) {
	t.Parallel()
	n, st := countingTokens(t)
	n.fleetOf("tito-classic")
	var tok struct{ ID, Token string }
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", ipAdmin, `{"account":"acme","app":"tito-classic","roles":["publish"]}`), &tok)
	n.Must(200, "PUT", pathsURL, tok.Token, `{"paths":{}}`)

	const flood = 200
	bad := map[string]string{
		"unknown id, well formed":     "scafo_0123456789abcdef_" + strings.Repeat("cd", 32),
		"real id, wrong secret":       "scafo_" + tok.ID + "_" + strings.Repeat("0", 64),
		"real id, short secret":       "scafo_" + tok.ID + "_abc",
		"real id, non-hex secret":     "scafo_" + tok.ID + "_" + strings.Repeat("zz", 32),
		"real id, upper-case secret":  "scafo_" + tok.ID + "_" + strings.ToUpper(tok.Token[len(tok.Token)-64:]),
		"real token with a suffix":    tok.Token + "x",
		"not an application token":    "hunter2",
		"upper-case id, well formed":  "scafo_0123456789ABCDEF_" + strings.Repeat("cd", 32),
		"real token, trailing '_'":    tok.Token + "_",
		"real id, secret of 65 chars": "scafo_" + tok.ID + "_" + strings.Repeat("a", 65),
	}
	wellFormed := 2 // the first two are shaped like tokens: at most one read each
	logsBefore := rejectionLines(n.Logs.String())
	readsBefore := int(st.Records.Load())
	for what, b := range bad {
		for i := 0; i < flood/len(bad); i++ {
			if resp, body := n.Do("PUT", pathsURL, b, `{"paths":{}}`); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s: %d %s", what, resp.StatusCode, body)
			}
		}
	}
	for i := 0; i < flood; i++ {
		if resp, _ := n.Get("/v1/ingress/routes", "not-the-ingress-token"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bad ingress token: %d", resp.StatusCode)
		}
	}
	if reads := int(st.Records.Load()) - readsBefore; reads > wellFormed {
		t.Errorf("%d bad application tokens read the store %d times, want at most %d", flood, reads, wellFormed)
	}
	if lines := rejectionLines(n.Logs.String()) - logsBefore; lines > 3 {
		t.Errorf("%d rejected requests from one address logged %d lines, want at most 3", 2*flood, lines)
	}
	// The real token still works, and is still read from the store each time (a
	// revocation takes effect at once).
	readsBefore = int(st.Records.Load())
	n.Must(200, "PUT", pathsURL, tok.Token, `{"paths":{}}`)
	if int(st.Records.Load()) == readsBefore {
		t.Error("a valid application token was not looked up in the store")
	}
	// A known (public) token id with a new wrong secret each time is not let past the
	// lookup budget by the id having been seen valid: that is keyed by the whole token.
	readsBefore = int(st.Records.Load())
	for i := 0; i < flood; i++ {
		wrong := fmt.Sprintf("scafo_%s_%064x", tok.ID, rand.Uint64())
		if resp, _ := n.Do("PUT", pathsURL, wrong, `{"paths":{}}`); resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("wrong secret for a real id: %d", resp.StatusCode)
		}
	}
	if reads := int(st.Records.Load()) - readsBefore; reads != 0 {
		t.Errorf("%d wrong secrets for a known id read the store %d times, want none (they fail the MAC)", flood, reads)
	}
	// A flood of random well-formed tokens (a new id each time, so no cache helps)
	// fails the MAC: 401 without a store read (tokenmac_test.go has the rest).
	readsBefore = int(st.Records.Load())
	for i := 0; i < flood; i++ {
		rnd := fmt.Sprintf("scafo_%016x_%s", rand.Uint64(), strings.Repeat("ab", 32))
		if resp, _ := n.Do("PUT", pathsURL, rnd, `{"paths":{}}`); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("random token: %d", resp.StatusCode)
		}
	}
	if reads := int(st.Records.Load()) - readsBefore; reads != 0 {
		t.Errorf("%d random well-formed tokens from one source read the store %d times, want none", flood, reads)
	}
	n.Must(200, "PUT", pathsURL, tok.Token, `{"paths":{}}`) // a token seen valid is not held back
	n.Must(200, "DELETE", "/v1/tokens/"+tok.ID, ipAdmin, "")
	n.Must(401, "PUT", pathsURL, tok.Token, `{"paths":{}}`)
	if strings.Contains(n.Logs.String(), tok.Token) {
		t.Fatal("an application token appears in the logs")
	}
}

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
