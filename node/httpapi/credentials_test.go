package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
)

// The credentials of the route × credential table (docs/design.md §8): none, a made-up
// bearer, the ingress token with one more character, a well-formed application token the fleet never issued, the node's three
// tokens and, mid-rotation, their previous ones, and application tokens of account
// acme's application shop (publish; instance) and of account evil's application cart
// (instance).
var credentialNames = []string{
	"none", "made-up", "almost", "forged",
	"ingress", "ingress-previous", "admin", "admin-previous", "readonly", "readonly-previous",
	"shop-publish", "shop-instance", "cart-instance",
}

// A cell's expected answer: admitted (the handler's own answer, below 500), or the
// guard's or the write domain's refusal.
const (
	admitted  = 0
	refuse401 = http.StatusUnauthorized
	refuse403 = http.StatusForbidden
)

// credentialRow is one route of the table: its concrete request and each credential's
// expected answer (a credential not listed: 401 when it is no credential of the node,
// else 403).
type credentialRow struct {
	method, path, body string
	ok                 []string // admitted
	unauth             []string // refused 401 besides none, made-up and forged
}

var (
	everyone     = credentialNames
	ingressRole  = []string{"ingress", "ingress-previous"}
	adminRole    = []string{"admin", "admin-previous"}
	readOnlyRole = []string{"readonly", "readonly-previous"}
	appTokens    = []string{"shop-publish", "shop-instance", "cart-instance"}
)

func cat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// credentialTable is every route of the API, by its pattern in the route table, with
// the request made of it and who may make it; extra rows (a second request of one
// route) are keyed "<method> <pattern> #<what>". A request a credential may not make is
// refused (401 or 403) before its body is read, so each admitted request carries a body
// the handler refuses (400) or a target that does not exist (404): nothing changes, and
// a dropped guard shows as a 400/404 where a 401/403 was due.
func credentialTable() map[string]credentialRow {
	const bad = `{"nope":1}` // every write's decoder refuses an unknown field: 400
	return map[string]credentialRow{
		"GET " + api.PathHealthz:                                       {method: "GET", path: api.PathHealthz, ok: everyone},
		"GET " + api.PathReadyz:                                        {method: "GET", path: api.PathReadyz, ok: everyone},
		"GET " + api.PathInstanceHealth + "{app}":                      {method: "GET", path: api.PathInstanceHealth + "nope", ok: everyone},
		"GET /.well-known/acme-challenge/{token}":                      {method: "GET", path: "/.well-known/acme-challenge/x", ok: everyone},
		"GET " + api.PathMetrics:                                       {method: "GET", path: api.PathMetrics, ok: everyone},
		"GET " + api.PathUIRoot:                                        {method: "GET", path: api.PathUIRoot, ok: everyone},
		"GET " + api.PathUI + "*":                                      {method: "GET", path: api.PathUI + "app.js", ok: everyone},
		"GET " + api.PathIngressApplied + "{ingress}/{revision}/{mac}": {method: "GET", path: api.PathIngressApplied + "edge-1/r1/" + strings.Repeat("0", 64), ok: everyone},

		"GET " + api.PathStatus: {method: "GET", path: api.PathStatus, ok: cat(ingressRole, adminRole, readOnlyRole), unauth: appTokens},
		// The read-only token reads the keyless routing document, never the Traefik
		// configuration (it can carry private keys).
		"GET " + api.PathIngress + "{format}":          {method: "GET", path: api.PathIngress + api.FormatRoutes, ok: cat(ingressRole, adminRole, readOnlyRole), unauth: appTokens},
		"GET " + api.PathIngress + "{format} #traefik": {method: "GET", path: api.PathIngress + api.FormatTraefik, ok: cat(ingressRole, adminRole), unauth: appTokens},

		"GET " + api.PathApps + "/{app}/domains/{host}/paths": {method: "GET", path: api.PathApps + "/shop/domains/shop.example/paths", ok: cat(adminRole, []string{"shop-publish", "shop-instance"})},
		"PUT " + api.PathApps + "/{app}/domains/{host}/paths": {method: "PUT", path: api.PathApps + "/shop/domains/shop.example/paths", body: bad, ok: cat(adminRole, []string{"shop-publish", "shop-instance"})},
		// Another tenant's application: refused before anything is read.
		"PUT " + api.PathApps + "/{app}/domains/{host}/paths #cart": {method: "PUT", path: api.PathApps + "/cart/domains/cart.example/paths", body: `{"paths":{}}`, ok: cat(adminRole, []string{"cart-instance"})},
		// A missing application: the same refusal as for an existing one (no oracle).
		"PUT " + api.PathApps + "/{app}/domains/{host}/paths #missing": {method: "PUT", path: api.PathApps + "/nope/domains/x.example/paths", body: bad, ok: adminRole},
		"POST " + api.PathNodeInstances + "/{app}":                     {method: "POST", path: api.PathNodeInstances + "/shop", body: bad, ok: cat(adminRole, []string{"shop-instance"})},
		// The body is decoded before the domain authorizes: a well-formed one, so the
		// role decides.
		"PUT " + api.PathNodeInstances + "/{app}":       {method: "PUT", path: api.PathNodeInstances + "/shop", body: `{"ready":false}`, ok: cat(adminRole, []string{"shop-instance"})},
		"PUT " + api.PathNodeInstances + "/{app} #cart": {method: "PUT", path: api.PathNodeInstances + "/cart", body: `{"ready":false}`, ok: cat(adminRole, []string{"cart-instance"})},
		"DELETE " + api.PathNodeInstances + "/{app}":    {method: "DELETE", path: api.PathNodeInstances + "/nope", ok: adminRole},

		"GET " + api.PathApps:                              {method: "GET", path: api.PathApps, ok: cat(adminRole, readOnlyRole)},
		"GET " + api.PathApps + "/{app}":                   {method: "GET", path: api.PathApps + "/shop", ok: cat(adminRole, readOnlyRole)},
		"PUT " + api.PathApps + "/{app}":                   {method: "PUT", path: api.PathApps + "/shop", body: bad, ok: adminRole},
		"DELETE " + api.PathApps + "/{app}":                {method: "DELETE", path: api.PathApps + "/nope", ok: adminRole},
		"GET " + api.PathApps + "/{app}/domains/{host}":    {method: "GET", path: api.PathApps + "/shop/domains/shop.example", ok: cat(adminRole, readOnlyRole)},
		"PUT " + api.PathApps + "/{app}/domains/{host}":    {method: "PUT", path: api.PathApps + "/shop/domains/shop.example", body: bad, ok: adminRole},
		"DELETE " + api.PathApps + "/{app}/domains/{host}": {method: "DELETE", path: api.PathApps + "/shop/domains/nope.example", ok: adminRole},
		"GET " + api.PathNodeInstances:                     {method: "GET", path: api.PathNodeInstances, ok: cat(adminRole, readOnlyRole)},
		"POST " + api.PathTokens:                           {method: "POST", path: api.PathTokens, body: bad, ok: adminRole},
		"DELETE " + api.PathTokens + "/{id}":               {method: "DELETE", path: api.PathTokens + "/0123456789abcdef", ok: adminRole},
		"GET " + api.PathAudit:                             {method: "GET", path: api.PathAudit, ok: cat(adminRole, readOnlyRole)},

		// The storage namespace holds the fleet's private keys: the ingress token only;
		// application tokens are refused like any unknown token, without a store read.
		"GET " + api.PathStorage + "/keys":       {method: "GET", path: api.PathStorage + "/keys", ok: ingressRole, unauth: appTokens},
		"GET " + api.PathStorage + "/keys/*":     {method: "GET", path: api.PathStorage + "/keys/nope", ok: ingressRole, unauth: appTokens},
		"HEAD " + api.PathStorage + "/keys/*":    {method: "HEAD", path: api.PathStorage + "/keys/nope", ok: ingressRole, unauth: appTokens},
		"PUT " + api.PathStorage + "/keys/*":     {method: "PUT", path: api.PathStorage + "/keys/x", body: "", ok: ingressRole, unauth: appTokens},
		"DELETE " + api.PathStorage + "/keys/*":  {method: "DELETE", path: api.PathStorage + "/keys/nope", ok: ingressRole, unauth: appTokens},
		"POST " + api.PathStorage + "/locks/*":   {method: "POST", path: api.PathStorage + "/locks/x", body: bad, ok: ingressRole, unauth: appTokens},
		"DELETE " + api.PathStorage + "/locks/*": {method: "DELETE", path: api.PathStorage + "/locks/nope", ok: ingressRole, unauth: appTokens},
	}
}

// want is the expected answer of credential c on row r.
func (r credentialRow) want(c string) int {
	switch {
	case slices.Contains(r.ok, c):
		return admitted
	case c == "none" || c == "made-up" || c == "almost" || c == "forged" || slices.Contains(r.unauth, c):
		return refuse401
	default:
		return refuse403
	}
}

// TestEveryRouteAnswersEachCredentialAsItsRoleAllows: every route of the route table
// (a route without a row fails) answers each credential as docs/design.md §8 says:
// admitted, or refused 401 (no credential of the node) or 403 (a known credential on a
// route its role does not reach; the node's own roles named in the body); a refused
// request changes nothing in the store, and the previous tokens of a rotation act as
// the current ones. A refusal costs no store call, but an application token's 403 (its
// record is read to learn its role) and the token key's periodic recheck. No token is ever logged.
func TestEveryRouteAnswersEachCredentialAsItsRoleAllows(t *testing.T) {
	t.Parallel()
	p, st := countedAPI(t, fleetwrite.TokenMACKey)
	p.Must(201, "PUT", "/v1/apps/shop", ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
	p.Must(201, "PUT", "/v1/apps/cart", ipAdmin, `{"account":"evil","placement":["vps-a"]}`)
	p.Must(201, "PUT", "/v1/apps/shop/domains/shop.example", ipAdmin, `{}`)
	tokens := map[string]string{
		"none": "", "made-up": "not-a-token-0123456789", "almost": ipIngress + "x", "forged": "scafo_0123456789abcdef_" + strings.Repeat("ab", 32),
		"ingress": ipIngress, "ingress-previous": ipIngressPrevious, "admin": ipAdmin, "admin-previous": ipAdminPrevious,
		"readonly": ipReadOnly, "readonly-previous": ipReadOnlyPrevious,
		"shop-publish":  p.issue(t, "acme", "shop", "publish"),
		"shop-instance": p.issue(t, "acme", "shop", "instance"),
		"cart-instance": p.issue(t, "evil", "cart", "instance"),
	}
	table := credentialTable()
	for _, rt := range httpapi.RouteTable() {
		if _, ok := table[rt.Method+" "+rt.Pattern]; !ok {
			t.Errorf("route %s %s has no row in the credential table", rt.Method, rt.Pattern)
		}
		if rt.ReadOnly && rt.Method != http.MethodGet {
			t.Errorf("%s %s is marked readOnly: only a GET may be", rt.Method, rt.Pattern)
		}
	}
	routes := map[string]bool{}
	for _, rt := range httpapi.RouteTable() {
		routes[rt.Method+" "+rt.Pattern] = true
	}
	for _, key := range slices.Sorted(maps.Keys(table)) {
		row := table[key]
		if route, _, _ := strings.Cut(key, " #"); !routes[route] {
			t.Errorf("row %q names no route of the table", key)
		}
		for _, c := range credentialNames {
			before, logged := storeState(t, p), len(p.Logs.String())
			calls := st.n.Load()
			rec := p.Rec(row.method, row.path, tokens[c], row.body)
			calls = st.n.Load() - calls
			want := row.want(c)
			got := rec.Code
			switch {
			case want == admitted && (got == 401 || got == 403 || got >= 500):
				t.Errorf("%s %s with %s: %d %.200s, want admitted", row.method, row.path, c, got, rec.Body)
			case want != admitted && got != want:
				t.Errorf("%s %s with %s: %d %.200s, want %d", row.method, row.path, c, got, rec.Body, want)
			}
			if want == admitted {
				continue
			}
			for _, tok := range tokens {
				if tok != "" && strings.Contains(p.Logs.String(), tok) {
					t.Fatalf("%s %s with %s: a token is in the log:\n%s", row.method, row.path, c, p.Logs.String())
				}
			}
			if calls != 0 && !(got == 403 && slices.Contains(appTokens, c)) {
				t.Errorf("%s %s with %s: refused %d after %d store calls, want none", row.method, row.path, c, got, calls)
			}
			if after := storeState(t, p); after != before {
				t.Errorf("%s %s with %s was refused but changed the store", row.method, row.path, c)
			}
			if got == 401 && (!strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") || row.method != "HEAD" && !strings.Contains(rec.Body.String(), `"error"`)) {
				t.Errorf("%s %s with %s: 401 %q %s, want WWW-Authenticate Bearer and a JSON error", row.method, row.path, c, rec.Header().Get("WWW-Authenticate"), rec.Body)
			}
			if role := nodeRole(c); got == 403 && role != "" && row.method != "HEAD" {
				var e api.Error
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Role != role || e.Detail == "" {
					t.Errorf("%s %s with %s: 403 %.200s, want a body naming the %s role", row.method, row.path, c, rec.Body, role)
				}
				// A read refused to the fleet's own credential is no attacker's guess (the
				// status page with the ingress token asks for the audit log every 30 s):
				// counted, never a WARN line.
				if row.method == "GET" && strings.Contains(p.Logs.String()[logged:], "level=WARN") {
					t.Errorf("GET %s with %s logged a WARN: %s", row.path, c, p.Logs.String()[logged:])
				}
			}
		}
	}
}

// nodeRole is the role the ingress and read-only tokens name in their 403s ("" for the
// others: the admin's one refusal, on /v1/storage, names the ingress token instead).
func nodeRole(c string) string {
	switch {
	case strings.HasPrefix(c, "ingress"):
		return "ingress"
	case strings.HasPrefix(c, "readonly"):
		return "read-only"
	}
	return ""
}

// storeState is every key of the store with its etag.
func storeState(t *testing.T, p *inProcess) string {
	t.Helper()
	es, err := p.Store.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(es)
}
