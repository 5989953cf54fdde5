package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/httpapi"
)

// Every answer's headers and the Host guard (hosts.go), through the API in process.

// concrete turns a route pattern into a path it matches: each {param} and the trailing
// "*" a plain segment.
func concrete(pattern string) string {
	p := regexp.MustCompile(`\{[a-z]+\}`).ReplaceAllStringFunc(pattern, func(s string) string {
		switch s {
		case "{format}":
			return api.FormatRoutes
		case "{host}":
			return "shop.example.org"
		}
		return "x1"
	})
	return strings.TrimSuffix(p, "*") + map[bool]string{true: "x1"}[strings.HasSuffix(p, "*")]
}

// withHost sends a request to n with the given Host.
func withHost(t *testing.T, n *inProcess, method, path, token, host string) (*http.Response, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, "http://127.0.0.1"+path, nil)
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := n.Serve(req)
	return rec.Result(), rec.Body.Bytes()
}

// TestEveryRouteAnswersNoStoreNoSniff: every route of the table (routes.go), whatever
// its answer (200, 304, 4xx), and the router's own 404 and 405 and the Host guard's 421,
// carries Cache-Control: no-store and X-Content-Type-Options: nosniff (a poll's 304:
// node's TestWireGoldens).
func TestEveryRouteAnswersNoStoreNoSniff(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	check := func(what string, resp *http.Response) {
		t.Helper()
		if cc, ns := resp.Header.Get("Cache-Control"), resp.Header.Get("X-Content-Type-Options"); cc != "no-store" || ns != "nosniff" {
			t.Errorf("%s: %d with Cache-Control %q, X-Content-Type-Options %q; want no-store, nosniff", what, resp.StatusCode, cc, ns)
		}
	}
	routes := httpapi.RouteTable()
	if len(routes) < 30 {
		t.Fatalf("%d routes in the table, want the whole table", len(routes))
	}
	for _, rt := range routes {
		tok := ipAdmin
		if strings.HasPrefix(rt.Pattern, api.PathStorage) {
			tok = ipIngress
		}
		for _, token := range []string{tok, ""} {
			resp, _ := n.Do(rt.Method, concrete(rt.Pattern), token, "")
			check(rt.Method+" "+concrete(rt.Pattern)+map[bool]string{true: " (no token)"}[token == ""], resp)
		}
	}
	resp, _ := n.Do(http.MethodGet, "/v1/nothing", "", "")
	check("an unknown path", resp)
	resp, _ = n.Do(http.MethodPatch, api.PathHealthz, "", "")
	check("a method not allowed", resp)
	resp, _ = withHost(t, n, http.MethodGet, api.PathHealthz, "", "evil.example")
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host evil.example: %d, want 421", resp.StatusCode)
	}
	check("a refused Host", resp)
}

// TestARebindingHostIsRefused: a request whose Host is a name the node does not go by
// (a page of evil.example made to resolve to the node's address) is answered 421 with a
// JSON error naming the Host, on /metrics, the health endpoints and /v1/status alike;
// an IP literal (v4, v6, with or without a port), localhost, node.name, a platform domain
// (the API apex) and a name of api.allowedHosts pass, in any case and with a trailing dot; the
// ACME challenge answers any Host (the CA asks for an application's host).
func TestARebindingHostIsRefused(t *testing.T) {
	t.Parallel()
	// api.allowedHosts, as the node hands it on beside the platform domains.
	n := newInProcess(t, func(c *httpapi.Config) { c.Hosts = append(c.Hosts, "Node-1.Internal.example.net") })
	paths := []string{api.PathMetrics, api.PathHealthz, api.PathReadyz, api.PathStatus, api.PathIngress + api.FormatTraefik}
	for _, host := range []string{"evil.example", "evil.example:7400", "localhost.evil.example", "127.0.0.1.evil.example",
		"apps.example.com.evil.example", "internal.example.net", "x.apps.example.com", "vps-a.evil.example"} {
		for _, p := range paths {
			resp, body := withHost(t, n, http.MethodGet, p, ipAdmin, host)
			var e api.Error
			if resp.StatusCode != http.StatusMisdirectedRequest || json.Unmarshal(body, &e) != nil ||
				e.Error != "misdirected request" || !strings.Contains(e.Detail, `"`+host+`"`) {
				t.Errorf("Host %s on %s: %d %s, want 421 naming the Host", host, p, resp.StatusCode, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1", "127.0.0.1:7400", "[::1]:7400", "[::1]", "10.83.0.1", "localhost", "localhost:7400",
		"LOCALHOST.", "vps-a", "vps-a:7400", "apps.example.com", "apps.example.com:443", "node-1.internal.example.net", "node-1.internal.example.net.:7400"} {
		for _, p := range paths {
			if resp, body := withHost(t, n, http.MethodGet, p, ipAdmin, host); resp.StatusCode != http.StatusOK {
				t.Errorf("Host %s on %s: %d %s, want 200", host, p, resp.StatusCode, body)
			}
		}
	}
	if resp, body := withHost(t, n, http.MethodGet, "/.well-known/acme-challenge/abc", "", "shop.example.org"); resp.StatusCode == http.StatusMisdirectedRequest {
		t.Errorf("the ACME challenge for shop.example.org: %d %s, want it answered by the challenge handler", resp.StatusCode, body)
	}
}
