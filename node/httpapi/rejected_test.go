package httpapi_test

// Floods of rejected credentials, and refusals that read the same whatever the
// request's shape (docs/design.md §5), through the API in process.

import (
	"encoding/json"
	"fmt"
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

// TestRejectedRequestsAreCheap: a flood of bad credentials (made-up tokens, and
// respellings of a real one: case, cuts, a flipped or moved MAC) is refused 401 without
// a read of a token record, and is logged in a few lines, not one per request.
func TestRejectedRequestsAreCheap(t *testing.T) {
	t.Parallel()
	n, st := countingTokens(t)
	n.fleetOf("tito-classic")
	var tok struct{ ID, Token string }
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", ipAdmin, `{"account":"acme","app":"tito-classic","roles":["publish"]}`), &tok)
	n.Must(200, "PUT", pathsURL, tok.Token, `{"paths":{}}`)

	const flood = 200
	secret := tok.Token[len(tok.Token)-64:]
	flip := func(s string, i int) string { // another hex digit at i
		return s[:i] + map[bool]string{true: "1", false: "0"}[s[i] == '0'] + s[i+1:]
	}
	// Spellings of a real token that are not it, and made-up ones: none reads a token
	// record (a well-formed one fails the MAC first).
	bad := map[string]string{
		"unknown id, well formed":     "scafo_0123456789abcdef_" + strings.Repeat("cd", 32),
		"real id, wrong secret":       "scafo_" + tok.ID + "_" + strings.Repeat("0", 64),
		"real id, short secret":       "scafo_" + tok.ID + "_abc",
		"real id, non-hex secret":     "scafo_" + tok.ID + "_" + strings.Repeat("zz", 32),
		"real id, upper-case secret":  "scafo_" + tok.ID + "_" + strings.ToUpper(secret),
		"upper-case MAC":              "scafo_" + tok.ID + "_" + secret[:48] + strings.ToUpper(secret[48:]),
		"upper case":                  strings.ToUpper(tok.Token),
		"upper-case prefix":           "SCAFO_" + strings.TrimPrefix(tok.Token, "scafo_"),
		"real token with a suffix":    tok.Token + "x",
		"truncated secret":            tok.Token[:len(tok.Token)-1],
		"truncated MAC":               "scafo_" + tok.ID + "_" + secret[:63] + "0",
		"MAC flipped":                 "scafo_" + tok.ID + "_" + flip(secret, 63),
		"random part flipped":         "scafo_" + tok.ID + "_" + flip(secret, 0),
		"id flipped":                  "scafo_" + flip(tok.ID, 15) + "_" + secret,
		"MAC moved":                   "scafo_" + tok.ID + "_" + secret[48:] + secret[:48],
		"tab inside":                  tok.Token[:20] + "\t" + tok.Token[21:],
		"dash for underscore":         "scafo_" + tok.ID + "-" + secret,
		"doubled":                     tok.Token + tok.Token,
		"not an application token":    "hunter2",
		"upper-case id, well formed":  "scafo_0123456789ABCDEF_" + strings.Repeat("cd", 32),
		"real token, trailing '_'":    tok.Token + "_",
		"real id, secret of 65 chars": "scafo_" + tok.ID + "_" + strings.Repeat("a", 65),
	}
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
	if reads := int(st.Records.Load()) - readsBefore; reads != 0 {
		t.Errorf("%d bad application tokens read %d token records, want none", flood, reads)
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
