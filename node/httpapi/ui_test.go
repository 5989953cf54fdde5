package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

func uiGet(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1:7400"
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// TestStatusPageIsServedWithoutATokenUnderAStrictPolicy: the page and its assets are
// answered without a token (they hold no data), each with its own content type, and
// every answer under /ui (404s and the redirect included) carries the strict policy:
// scripts, styles and API calls from this origin only, no inline script or style, no
// framing, never cached, never sniffed, no referrer.
func TestStatusPageIsServedWithoutATokenUnderAStrictPolicy(t *testing.T) {
	h := testAPI(t, Config{}, Deps{}).Handler() // the status page needs no dependency (it holds no data)
	for _, c := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/ui/", 200, "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"GET", "/ui/index.html", 200, "text/html; charset=utf-8", `<link rel="stylesheet" href="style.css">`},
		{"HEAD", "/ui/", 200, "text/html; charset=utf-8", ""},
		{"GET", "/ui/app.js", 200, "text/javascript; charset=utf-8", "'use strict';"},
		{"GET", "/ui/style.css", 200, "text/css; charset=utf-8", "table {"},
		{"GET", "/ui", 301, "", ""},
		{"GET", "/ui/nope.js", 404, "application/json", `"not found"`},
		{"GET", "/ui/ui.go", 404, "application/json", `"not found"`},
		{"GET", "/ui/../v1/status", 404, "application/json", `"not found"`}, // only the named files
		{"GET", "/ui/ui/app.js", 404, "application/json", `"not found"`},
	} {
		resp := uiGet(t, h, c.method, c.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d (%s)", c.method, c.path, resp.StatusCode, c.status, body)
			continue
		}
		if c.ctype != "" && resp.Header.Get("Content-Type") != c.ctype {
			t.Errorf("%s %s: Content-Type %q, want %q", c.method, c.path, resp.Header.Get("Content-Type"), c.ctype)
		}
		if !bytes.Contains(body, []byte(c.body)) {
			t.Errorf("%s %s: body lacks %q", c.method, c.path, c.body)
		}
		if c.status == 301 && resp.Header.Get("Location") != api.PathUI {
			t.Errorf("%s %s: Location %q, want %s", c.method, c.path, resp.Header.Get("Location"), api.PathUI)
		}
		for k, want := range map[string]string{
			"Cache-Control":          "no-store",
			"X-Content-Type-Options": "nosniff",
			"X-Frame-Options":        "DENY",
			"Referrer-Policy":        "no-referrer",
			"Set-Cookie":             "",
		} {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("%s %s: %s %q, want %q", c.method, c.path, k, got, want)
			}
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
			"object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: Content-Security-Policy %q lacks %q", c.method, c.path, csp, want)
			}
		}
		for _, never := range []string{"unsafe-inline", "unsafe-eval", "unsafe-hashes", "http:", "https:", "data:", "*"} {
			if strings.Contains(csp, never) {
				t.Errorf("%s %s: Content-Security-Policy %q allows %q", c.method, c.path, csp, never)
			}
		}
	}
	for _, method := range []string{"POST", "PUT", "DELETE"} {
		if resp := uiGet(t, h, method, "/ui/"); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /ui/: %d, want 405", method, resp.StatusCode)
		}
	}
}

// TestStatusPageHoldsNoInlineCodeNorRemoteResource: what the policy enforces, the
// files also keep, so a relaxed policy would not quietly start to matter: the page has
// no inline script or style, no event-handler attribute, and loads nothing from
// another origin; the script builds the DOM from text nodes only (no innerHTML and its
// kin, no eval), keeps the token in sessionStorage (never localStorage or a cookie) and
// fetches nothing but this node's own API.
func TestStatusPageHoldsNoInlineCodeNorRemoteResource(t *testing.T) {
	page, err := uiFiles.ReadFile("ui/index.html")
	if err != nil {
		t.Fatal(err)
	}
	z := html.NewTokenizer(bytes.NewReader(page))
	scripts := 0
	for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
		tok := z.Token()
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		attrs := map[string]string{}
		for _, a := range tok.Attr {
			attrs[a.Key] = a.Val
			if strings.HasPrefix(a.Key, "on") || a.Key == "style" {
				t.Errorf("<%s %s=…>: inline code or style", tok.Data, a.Key)
			}
			if (a.Key == "src" || a.Key == "href" || a.Key == "action") && (strings.Contains(a.Val, ":") || strings.HasPrefix(a.Val, "//")) {
				t.Errorf("<%s %s=%q>: not a resource of this node", tok.Data, a.Key, a.Val)
			}
		}
		switch tok.Data {
		case "style":
			t.Errorf("<style> element: inline style")
		case "script":
			scripts++
			if attrs["src"] == "" {
				t.Errorf("<script> without src: inline script")
			} else if z.Next() != html.EndTagToken {
				t.Errorf("<script src=%q> has a body", attrs["src"])
			}
		}
	}
	if scripts != 1 {
		t.Errorf("%d <script> elements, want 1 (app.js)", scripts)
	}
	js, err := uiFiles.ReadFile("ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAll(js, nil) // the rules comment names what is banned
	for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function(",
		"localStorage", "document.cookie", "http:", "https:", "setTimeout('", "setTimeout(\""} {
		if bytes.Contains(code, []byte(banned)) {
			t.Errorf("app.js uses %s", banned)
		}
	}
	for _, m := range regexp.MustCompile(`get\('([^']*)'`).FindAllSubmatch(code, -1) {
		if p := string(m[1]); !strings.HasPrefix(p, "/v1/") {
			t.Errorf("app.js fetches %q, not this node's API", p)
		}
	}
	if !bytes.Contains(code, []byte("sessionStorage.setItem(TOKEN_KEY")) || !bytes.Contains(code, []byte("'Authorization': 'Bearer ' + token()")) {
		t.Error("app.js no longer keeps the token in sessionStorage and sends it as a Bearer header")
	}
}

// TestTheStatusPageAndTheIngressRoutesAreNeverRoutedOnThePublicApex: every route under
// /ui, of the routing endpoints and their applied callback (an ingress's reports ride
// them), and /v1/status is under a prefix the apex denies (routing.DeniedAPIPrefixes;
// the render's isolation test replays /ui spellings through Traefik's own path
// handling).
func TestTheStatusPageAndTheIngressRoutesAreNeverRoutedOnThePublicApex(t *testing.T) {
	denied := func(path string) bool {
		for _, d := range routing.DeniedAPIPrefixes {
			if strings.HasSuffix(d, "/") && (path == strings.TrimSuffix(d, "/") || strings.HasPrefix(path, d)) ||
				!strings.HasSuffix(d, "/") && strings.HasPrefix(path, d) {
				return true
			}
		}
		return false
	}
	seen := map[string]int{}
	for _, rt := range testAPI(t, Config{}, Deps{}).table {
		for _, under := range []string{api.PathUIRoot, api.PathIngress, api.PathIngressApplied, api.PathStatus} {
			if strings.HasPrefix(rt.pattern, under) {
				seen[under]++
				if p := strings.TrimSuffix(rt.pattern, "*"); !denied(p) {
					t.Errorf("route %s %s is not under a denied apex prefix %v", rt.method, rt.pattern, routing.DeniedAPIPrefixes)
				}
			}
		}
	}
	for a := range uiAssets {
		if !denied(api.PathUI + a) {
			t.Errorf("%s%s is not under a denied apex prefix", api.PathUI, a)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("routes found under /ui, the routing endpoints, the callback and status: %v; want each", seen)
	}
}

// TestStatusPageShowsEveryReportOfTheStatus: each optional report of GET /v1/status (a
// pointer field of api.Status, present only when there is something to say: a duplicate
// name, a shared or loopback node.address, the certificates, the revision's and the
// last pass's times) is read by the page (st.<its JSON name> in app.js), so the page
// never says "none" under Warnings while the API reports one. addressWarning was left
// out (e2e's TestStatusPageShowsTheFleetLiveAndItsTextNeverRuns drives the page itself).
func TestStatusPageShowsEveryReportOfTheStatus(t *testing.T) {
	js, err := uiFiles.ReadFile("ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	st := reflect.TypeOf(api.Status{})
	n := 0
	for i := range st.NumField() {
		f := st.Field(i)
		if f.Type.Kind() != reflect.Pointer {
			continue
		}
		n++
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !bytes.Contains(js, []byte("st."+name)) {
			t.Errorf("api.Status.%s (%q): app.js never reads st.%s", f.Name, name, name)
		}
	}
	if n < 5 {
		t.Fatalf("%d pointer fields in api.Status; want at least 5 (revisionSince, lastPass, duplicateName, addressWarning, certificates)", n)
	}
}

// bidiControls are the bidirectional controls the status page neutralises (issue 46
// item 6): embeddings and overrides, isolates, marks.
var bidiControls = []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c}

// TestStatusPageMakesItsTextInOnePlace: app.js makes every text node in text() (one
// call of document.createTextNode), whose BIDI class is exactly bidiControls; and the
// page's cells wrap a long value (overflow-wrap: anywhere) instead of pushing the
// columns after it off screen.
func TestStatusPageMakesItsTextInOnePlace(t *testing.T) {
	js, err := uiFiles.ReadFile("ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAll(js, nil)
	if n := bytes.Count(code, []byte("document.createTextNode(")); n != 1 {
		t.Errorf("app.js calls document.createTextNode %d times, want once (in text())", n)
	}
	if !regexp.MustCompile(`function text\(s\) \{\s*return document\.createTextNode\(String\(s\)\.replace\(BIDI,`).Match(code) {
		t.Error("app.js: text() does not neutralise BIDI before making its text node")
	}
	m := regexp.MustCompile(`const BIDI = /\[([^\]]*)\]/g;`).FindSubmatch(code)
	if m == nil {
		t.Fatal("app.js has no const BIDI = /[…]/g")
	}
	got := map[rune]bool{}
	for _, r := range regexp.MustCompile(`\\u([0-9a-f]{4})(?:-\\u([0-9a-f]{4}))?`).FindAllStringSubmatch(string(m[1]), -1) {
		lo, _ := strconv.ParseUint(r[1], 16, 32)
		hi := lo
		if r[2] != "" {
			hi, _ = strconv.ParseUint(r[2], 16, 32)
		}
		for c := lo; c <= hi; c++ {
			got[rune(c)] = true
		}
	}
	want := map[rune]bool{}
	for _, r := range bidiControls {
		want[r] = true
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("app.js BIDI covers %U, want %U", slices.Sorted(maps.Keys(got)), bidiControls)
	}
	css, err := uiFiles.ReadFile("ui/style.css")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^th, td \{[^}]*overflow-wrap: anywhere;`).Match(css) {
		t.Error("style.css: table cells do not wrap a long value (th, td { overflow-wrap: anywhere })")
	}
}

// pageHarness loads app.js into Node.js over a stand-in DOM, renders the planted
// answers of the file named by argv[3] (render(status, routes, apps, audit)) and prints
// every text the page holds then, as JSON.
const pageHarness = `
const fs = require('fs'), vm = require('vm');
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.attrs = {}; this.hidden = false; }
  appendChild(c) { this.children.push(c); return c; }
  replaceChildren(...cs) { this.children = cs.flat(); }
  setAttribute(k, v) { this.attrs[k] = v; }
  addEventListener() {}
  focus() {}
}
const byId = {};
const document = {
  createElement: (t) => new El(t),
  createTextNode: (s) => ({ text: String(s) }),
  getElementById: (id) => byId[id] || (byId[id] = new El('#' + id)),
  addEventListener() {},
  body: new El('body'),
};
const ctx = vm.createContext({ document, console, sessionStorage: { getItem() { return null; }, setItem() {}, removeItem() {} },
  setTimeout() {}, clearTimeout() {}, fetch() { throw new Error('no fetch here'); } });
vm.runInContext(fs.readFileSync(process.argv[2], 'utf8'), ctx);
const d = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
ctx.render(d.status, d.routes, d.apps, d.audit);
const texts = [];
const walk = (n) => {
  if (typeof n === 'string') { texts.push(n); return; }
  if (n.text !== undefined) { texts.push(n.text); return; }
  for (const c of n.children || []) walk(c);
};
for (const e of Object.values(byId)) walk(e);
process.stdout.write(JSON.stringify(texts));
`

// TestStatusPageNeutralisesBidiControlsInEveryFleetString: every string of the answers
// the page reads (status, the routing document, applications, the audit log) planted
// with each bidirectional control, rendered by app.js itself (in Node.js, over a
// stand-in DOM): no text the page holds then carries one; each shows as its escape
// ("\u202e"). The node's own warnings are among the texts. Skipped where Node.js is not
// installed (.ci/run's machine has it).
func TestStatusPageNeutralisesBidiControlsInEveryFleetString(t *testing.T) {
	nodejs, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("Node.js not installed (%v): the page's script is checked by TestStatusPageMakesItsTextInOnePlace alone", err)
	}
	p := "x" + string(bidiControls) + "y"
	ingress := map[string]any{"name": p, "kind": p, "node": p, "groups": p, "state": p, "behind": 2, "ageSeconds": 3,
		"applied": map[string]any{"serial": 4, "revision": p}}
	planted := map[string]any{
		"status": map[string]any{
			"node": p, "ready": true, "revision": p, "revisionSince": "2026-01-02T03:04:05Z", "lastPass": "2026-01-02T03:04:05Z",
			"store":              map[string]any{"reachable": false, "error": p, "heartbeatError": p, "foreign": true, "foreignReason": p, "adopt": p},
			"servingRemembered":  true,
			"duplicateName":      map[string]any{"address": p, "detail": p},
			"addressWarning":     map[string]any{"address": p, "sharedWith": []string{p}, "loopback": true, "liveNodes": 2, "detail": p},
			"mismatchedSettings": []string{p},
			"nodes":              []any{map[string]any{"name": p, "address": p, "ageSeconds": 1, "stale": true}},
			"groups":             []any{map[string]any{"name": p, "routes": 1, "revision": p}},
			"skipped":            []any{map[string]any{"object": p, "reason": p}},
			"ingresses":          []any{ingress},
			"ingressesSkipped":   []any{map[string]any{"object": p, "reason": p}},
			"ingressesError":     p,
			"certificates": map[string]any{"counts": map[string]int{p: 1}, "names": []any{map[string]any{"name": p, "state": p, "phase": p,
				"lastError": p, "notAfter": "2027-01-01T00:00:00Z", "delegation": map[string]any{"cname": p, "target": p}}}},
			"warnings": []string{"warning " + p},
		},
		"routes": map[string]any{"status": 200, "body": map[string]any{"routes": []any{map[string]any{"host": p, "application": p, "group": p,
			"upstreams": []any{map[string]any{"node": p, "address": p}}, "paths": map[string]string{p: p}}}}},
		"apps": map[string]any{"status": 200, "body": map[string]any{"apps": []any{map[string]any{"name": p, "placement": []string{p, p + "z"},
			"ingress": map[string]any{"group": p}}}}},
		"audit": map[string]any{"status": 200, "body": map[string]any{"records": []any{map[string]any{"time": "2026-01-02T03:04:05Z",
			"actor": p, "node": p, "action": p, "account": p, "app": p, "host": p}}}},
	}
	dir := t.TempDir()
	js, err := uiFiles.ReadFile("ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(planted)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"app.js": js, "data.json": data, "harness.js": []byte(pageHarness)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(nodejs, filepath.Join(dir, "harness.js"), filepath.Join(dir, "app.js"), filepath.Join(dir, "data.json")).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, err.(*exec.ExitError).Stderr)
	}
	var texts []string
	if err := json.Unmarshal(out, &texts); err != nil {
		t.Fatalf("harness output %q: %v", out, err)
	}
	escaped, warned := 0, false
	for _, s := range texts {
		if i := strings.IndexFunc(s, func(r rune) bool { return slices.Contains(bidiControls, r) }); i >= 0 {
			t.Errorf("the page shows %+q: a bidirectional control at byte %d", s, i)
		}
		escaped += strings.Count(s, `\u202e`)
		warned = warned || strings.Contains(s, `warning x\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061cy`)
	}
	if escaped < 40 {
		t.Errorf("%d texts show \\u202e; want every planted string (at least 40) shown with its escapes: %q", escaped, texts)
	}
	if !warned {
		t.Errorf("the node's warning is not among the page's texts: %q", texts)
	}
}
