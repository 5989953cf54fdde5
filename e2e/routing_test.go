package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// routeTimeout bounds how long a change may take to reach Traefik: a reconcile pass
// (reconcile.interval, 2s), a poll (pollInterval, 1s), the provider throttle and a
// health check interval (5s) with room to spare on a loaded 2-core machine.
const routeTimeout = 30 * time.Second

// Scenarios 7 and 7b: every path api.denied lists (docs/design.md §3: /v1/storage, /v1/ingress/
// in every format, /metrics, /v1/health/, /v1/status) is refused on the public apex by
// Traefik itself, however it is spelled, while the paths a remote CLI needs still reach
// the node; an application claiming the apex then takes it over, API paths included.
// Each request carries the admin token and the ingress token in turn: a node reached
// would answer 200, or its own JSON; Traefik answers 404 (no router) or 400.
func TestPlatformAPIApexDeniesEveryPrivatePathInEverySpelling(t *testing.T) {
	f := startFleet(t, 1, nodeOptions{})
	n1 := f.nodes[0]
	tr := startTraefik(t, "traefik", traefikOptions{node: n1})
	const apex = "apps.localhost"
	waitFor(t, "the apex to reach a node", routeTimeout, func() error {
		r, err := tr.get(apex, "/v1/healthz")
		if err != nil {
			return err
		}
		if r.status != http.StatusOK || r.echo != nil {
			return fmt.Errorf("%d from %s: %.100q", r.status, r.from(), r.body)
		}
		return nil
	})

	// What the node itself answers on the canonical paths, on its own listener: what
	// any of the spellings below would get if it reached a node.
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/v1/status", testAdminToken, http.StatusOK},
		{"/metrics", "", http.StatusOK},
		{"/v1/ingress/routes", testIngressToken, http.StatusOK},
		{"/v1/ingress/traefik", testIngressToken, http.StatusOK},
		{"/v1/status", "", http.StatusUnauthorized},
	} {
		if st, b := n1.do(t, http.MethodGet, tc.path, nil, tc.token); st != tc.want {
			t.Fatalf("the node's own %s: %d %.200s, want %d", tc.path, st, b, tc.want)
		}
	}

	for _, tc := range []struct {
		target string
		want   int // Traefik's own answer
	}{
		{"/v1/status", http.StatusNotFound},
		{"/v1/status/", http.StatusNotFound},
		{"//v1/status", http.StatusNotFound},      // sanitizePath collapses the slashes first
		{"/v1/%73tatus", http.StatusNotFound},     // %73 = s, decoded before routing
		{"/./v1/status", http.StatusNotFound},     // dot segment
		{"/v1/../v1/status", http.StatusNotFound}, // dot-dot segment
		{"/v1/status?x=1", http.StatusNotFound},
		{"/metrics", http.StatusNotFound},
		{"/metrics/", http.StatusNotFound},
		{"/%6detrics", http.StatusNotFound}, // %6d = m
		{"/v1/ingress", http.StatusNotFound},
		{"/v1/ingress/", http.StatusNotFound},
		{"/v1/ingress/routes", http.StatusNotFound},
		{"/v1/ingress/traefik", http.StatusNotFound},
		{"/v1/ingress/traefik?prefer=self", http.StatusNotFound},
		{"/v1/ingress/routes?prefer=self", http.StatusNotFound},
		{"/v1/ingress/routes/", http.StatusNotFound},
		{"//v1/ingress/routes", http.StatusNotFound},
		{"/v1/./ingress/routes", http.StatusNotFound},
		{"/v1/x/../ingress/routes", http.StatusNotFound},
		{"/v1/%69ngress/routes", http.StatusNotFound}, // %69 = i
		{"/v1/ingress/%72outes", http.StatusNotFound}, // %72 = r
		{"/v1/ingress/nginx", http.StatusNotFound},    // a format that does not exist: denied all the same
		{"/v1/ingress%2Ftraefik", http.StatusNotFound},
		{"/v1/ingress%2ftraefik", http.StatusNotFound}, // lower-case escape
		{"/v1/health", http.StatusNotFound},
		{"/v1/health/", http.StatusNotFound},
		{"/v1/health/instances/x", http.StatusNotFound},
		{"/v1/storage", http.StatusNotFound},
		{"/v1/storage/x", http.StatusNotFound},
		{"/v1/%73torage/apps/shop.json", http.StatusNotFound},
		{"/v1/storage%2Fx", http.StatusNotFound},
		{"/v1//status", http.StatusNotFound},
		{"/v1/status;x", http.StatusNotFound},
		{"/v1/%2e%2e/v1/status", http.StatusNotFound}, // escaped dot segments: decoded, then resolved
		{"/v1/x/%2e%2e/status", http.StatusNotFound},
		{"/v1/health%2Finstances%2Fx", http.StatusNotFound},
		{"http://apps.localhost/v1/status", http.StatusNotFound}, // absolute form
		// Spellings that no denied prefix matches do match the apex router, whose entry
		// point refuses the encoded slash (400) before the node sees anything.
		{"/v1%2Fstatus", http.StatusBadRequest},
		{"/v1%2Fingress/routes", http.StatusBadRequest},
		{"/v1/x/..%2Fstatus", http.StatusBadRequest},
		{"/v1/healthz%2F..%2Fstatus", http.StatusBadRequest},
	} {
		for _, token := range []string{testAdminToken, testIngressToken} {
			r, err := tr.raw(apex, tc.target, "Authorization", "Bearer "+token)
			if err != nil {
				t.Errorf("GET %s through the apex: %v", tc.target, err)
				continue
			}
			if !traefikRefused(r, tc.want) {
				t.Errorf("GET %s through the apex (%s token): %d %.200q, want Traefik's own %d (the request must not reach the node)",
					tc.target, tokenName(token), r.status, r.body, tc.want)
			}
		}
	}

	// Case is not folded, by Traefik nor by the node's router: these reach the node,
	// which answers its own 404 (never the status document, the metrics nor a routing document).
	for _, tc := range []struct{ target, token string }{
		{"/v1/Status", testAdminToken}, {"/V1/status", testAdminToken}, {"/METRICS", testAdminToken},
		{"/V1/ingress/routes", testIngressToken},
	} {
		target := tc.target
		r, err := tr.raw(apex, target, "Authorization", "Bearer "+tc.token)
		if err != nil || r.status != http.StatusNotFound || r.echo != nil || strings.Contains(r.body, `"skipped"`) || strings.Contains(r.body, "# HELP") || strings.Contains(r.body, `"revision"`) {
			t.Errorf("GET %s through the apex: %d %.200q %v, want a 404", target, r.status, r.body, err)
		}
	}

	// The paths a remote CLI needs still reach the node through the apex.
	for _, target := range []string{"/v1/healthz", "/v1/readyz"} {
		r, err := tr.raw(apex, target)
		if err != nil || r.status != http.StatusOK || r.echo != nil || r.body == traefikNotFound {
			t.Errorf("GET %s through the apex: %d %.200q %v, want the node's 200", target, r.status, r.body, err)
		}
	}
	r, err := tr.raw(apex, "/v1/apps")
	if err != nil || r.status != http.StatusUnauthorized || !strings.Contains(r.body, `"error":"unauthorized"`) {
		t.Errorf("GET /v1/apps through the apex without a token: %d %.200q %v, want the node's 401 JSON", r.status, r.body, err)
	}
	r, err = tr.raw(apex, "/v1/apps", "Authorization", "Bearer "+testAdminToken)
	if err != nil || r.status != http.StatusOK || !strings.HasPrefix(strings.TrimSpace(r.body), "{") && !strings.HasPrefix(strings.TrimSpace(r.body), "[") {
		t.Errorf("GET /v1/apps through the apex with the admin token: %d %.200q %v, want the node's 200 JSON", r.status, r.body, err)
	}

	// An application claiming the apex takes it over, API paths included.
	f.deploy(t, "console", "platform", []*node{n1}, "/healthz")
	n1.claim(t, "console", apex)
	tr.waitServedBy(t, apex, "/v1/healthz", "console@n1", routeTimeout)
	tr.expectServedBy(t, apex, "/", "console@n1")
	tr.expectServedBy(t, apex, "/v1/ingress/routes", "console@n1")
	tr.requireProviderClean(t, "http")
}

// traefikRefused reports whether r is Traefik's own answer with status want: its 404
// page (no router matched) or a 400 of the entry point, never an upstream's or a node's
// answer (JSON).
func traefikRefused(r response, want int) bool {
	if r.status != want || r.echo != nil {
		return false
	}
	switch want {
	case http.StatusNotFound:
		return r.body == traefikNotFound
	default:
		return !strings.Contains(r.body, `"error"`) && !strings.Contains(r.body, "{")
	}
}

func tokenName(token string) string {
	if token == testAdminToken {
		return "admin"
	}
	return "ingress"
}
