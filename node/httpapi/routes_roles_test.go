package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// Hostile round six (issue 23 step 6 moved every handler into node/httpapi): every
// route of the API answers each credential as docs/design.md §8 says. A request a
// credential may not make is refused (401 or 403) before its body is read, so each
// admitted request here carries a body the handler refuses (400) or a target that does
// not exist (404): nothing changes, and a dropped guard shows as a 400/404 where a
// 401/403 was due. Credentials: none, a made-up bearer, the ingress token, the admin
// token, the read-only token, and application tokens of account acme's app shop (publish; instance) and of
// account evil's app cart (instance).
func TestEveryRouteAnswersEachCredentialAsTheDesignSays(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/cart", testnode.AdminToken, `{"account":"evil","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/shop/domains/shop.example", testnode.AdminToken, `{}`)
	_, shopPublish := testnode.IssueToken(t, n, "acme", "shop", `"publish"`)
	_, shopInstance := testnode.IssueToken(t, n, "acme", "shop", `"instance"`)
	_, cartInstance := testnode.IssueToken(t, n, "evil", "cart", `"instance"`)
	creds := []struct{ name, tok string }{
		{"none", ""}, {"made-up", "scafo_0123456789abcdef_" + strings.Repeat("ab", 32)},
		{"ingress", testnode.IngressToken}, {"admin", testnode.AdminToken}, {"readonly", testnode.ReadOnlyToken},
		{"shop-publish", shopPublish}, {"shop-instance", shopInstance}, {"cart-instance", cartInstance},
	}
	const bad = `{"nope":1}` // every write's decoder refuses an unknown field: 400
	type allow map[string]bool
	all := func(names ...string) allow {
		a := allow{}
		for _, n := range names {
			a[n] = true
		}
		return a
	}
	anyone := all("none", "made-up", "ingress", "admin", "readonly", "shop-publish", "shop-instance", "cart-instance")
	for _, rt := range []struct {
		method, path, body string
		ok                 allow
	}{
		{"GET", "/v1/healthz", "", anyone},
		{"GET", "/v1/readyz", "", anyone},
		{"GET", "/metrics", "", anyone},
		{"GET", api.PathInstanceHealth + "shop", "", anyone},
		{"GET", "/v1/ingress/routes", "", all("ingress", "admin", "readonly")},
		{"GET", "/v1/ingress/traefik", "", all("ingress", "admin")},
		{"GET", "/v1/status", "", all("ingress", "admin", "readonly")},
		{"GET", "/v1/apps", "", all("admin", "readonly")},
		{"GET", "/v1/apps/shop", "", all("admin", "readonly")},
		{"PUT", "/v1/apps/shop", bad, all("admin")},
		{"DELETE", "/v1/apps/nope", "", all("admin")},
		{"GET", "/v1/apps/shop/domains/shop.example", "", all("admin", "readonly")},
		{"PUT", "/v1/apps/shop/domains/shop.example", bad, all("admin")},
		{"DELETE", "/v1/apps/shop/domains/nope.example", "", all("admin")},
		{"GET", "/v1/node/instances", "", all("admin", "readonly")},
		{"POST", "/v1/tokens", bad, all("admin")},
		{"DELETE", "/v1/tokens/0123456789abcdef", "", all("admin")},
		{"GET", "/v1/audit", "", all("admin", "readonly")},
		{"GET", "/v1/apps/shop/domains/shop.example/paths", "", all("admin", "shop-publish", "shop-instance")},
		{"PUT", "/v1/apps/shop/domains/shop.example/paths", bad, all("admin", "shop-publish", "shop-instance")},
		{"POST", "/v1/node/instances/shop", bad, all("admin", "shop-instance")},
		// The body is decoded before the domain authorizes (handlePutInstance): a
		// well-formed one, so the role decides.
		{"PUT", "/v1/node/instances/shop", `{"ready":false}`, all("admin", "shop-instance")},
		{"PUT", "/v1/node/instances/cart", `{"ready":false}`, all("admin", "cart-instance")},
		{"DELETE", "/v1/node/instances/nope", "", all("admin")},
		{"GET", "/v1/storage/keys", "", all("ingress")},
		{"GET", "/v1/storage/keys/nope", "", all("ingress")},
		{"HEAD", "/v1/storage/keys/nope", "", all("ingress")},
		{"PUT", "/v1/storage/keys/x", "", all("ingress")},
		{"DELETE", "/v1/storage/keys/nope", "", all("ingress")},
		{"POST", "/v1/storage/locks/x", bad, all("ingress")},
		{"DELETE", "/v1/storage/locks/nope", "", all("ingress")},
	} {
		for _, c := range creds {
			resp, b := n.Do(rt.method, rt.path, c.tok, rt.body)
			refused := resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
			if rt.ok[c.name] == refused || resp.StatusCode >= 500 {
				t.Errorf("%s %s with %s: %d %.200s, want %s", rt.method, rt.path, c.name, resp.StatusCode, b,
					map[bool]string{true: "admitted", false: "401 or 403"}[rt.ok[c.name]])
			}
			t.Logf("%s %s %s: %d", rt.method, rt.path, c.name, resp.StatusCode)
		}
	}
}
