package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/html"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

// uiHandler is the route table behind its guards, with no dependency behind it: the
// status page needs none (it holds no data).
func uiHandler(t *testing.T) http.Handler {
	t.Helper()
	s, err := New(Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler()
}

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
	h := uiHandler(t)
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

// TestStatusPageIsNeverRoutedOnThePublicApex: every route under /ui is under a prefix
// the apex denies (routing.DeniedAPIPrefixes; the render's isolation test replays
// /ui spellings through Traefik's own path handling).
func TestStatusPageIsNeverRoutedOnThePublicApex(t *testing.T) {
	denied := func(path string) bool {
		for _, d := range routing.DeniedAPIPrefixes {
			if strings.HasSuffix(d, "/") && (path == strings.TrimSuffix(d, "/") || strings.HasPrefix(path, d)) ||
				!strings.HasSuffix(d, "/") && strings.HasPrefix(path, d) {
				return true
			}
		}
		return false
	}
	n := 0
	for _, rt := range testAPI(t, Config{}, Deps{}).table {
		if strings.HasPrefix(rt.pattern, api.PathUIRoot) {
			n++
			if p := strings.TrimSuffix(rt.pattern, "*"); !denied(p) {
				t.Errorf("route %s %s is not under a denied apex prefix %v", rt.method, rt.pattern, routing.DeniedAPIPrefixes)
			}
		}
	}
	for a := range uiAssets {
		if !denied(api.PathUI + a) {
			t.Errorf("%s%s is not under a denied apex prefix", api.PathUI, a)
		}
	}
	if n == 0 {
		t.Fatal("no /ui route in the table")
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
