package fleetwrite_test

// The write domain's refusals as the API answers them, in process (node/internal/apitest:
// httpapi over a dir store, no node, no listener): the path map's body, its warnings,
// and the routing change budget's 429. What the domain decides is tested in package
// fleetwrite; here, that each answer reaches the client as its one status.

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/internal/apitest"
)

const pathsURL = "/v1/apps/tito-classic/domains/ti.to/paths"

// titoFleet creates tito-classic (holding ti.to) and tito-go in account acme, and
// evil in account other.
func titoFleet(p *apitest.API) {
	for app, account := range map[string]string{"tito-classic": "acme", "tito-go": "acme", "evil": "other"} {
		p.Must(201, "PUT", "/v1/apps/"+app, apitest.Admin, fmt.Sprintf(`{"account":%q,"placement":["vps-a"]}`, account))
	}
	p.Must(201, "PUT", "/v1/apps/tito-classic/domains/ti.to", apitest.Admin, "")
}

// storeBytes is every object of the API's store, by key.
func storeBytes(t *testing.T, p *apitest.API) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, prefix := range []string{"apps/", "domains/", "serial"} {
		es, err := p.Store.List(t.Context(), prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			o, err := p.Store.Get(t.Context(), e.Key)
			if err != nil {
				t.Fatal(err)
			}
			out[e.Key] = string(o.Value)
		}
	}
	return out
}

// TestPathsBodyWithoutWrapperRefused: a path map's body is {"paths": {…}}, decoded
// strictly (a key given twice is refused, over HTTP: a handler could decode otherwise
// than jsonx's own test); anything else is a 400 naming what is wrong, and changes nothing.
func TestPathsBodyWithoutWrapperRefused(t *testing.T) {
	p := apitest.New(t, apitest.Options{})
	titoFleet(p)
	p.Must(200, "PUT", pathsURL, apitest.Admin, `{"paths":{"paulca":"tito-go.apps.example.com"}}`)
	before := storeBytes(t, p)
	for _, tc := range []struct{ name, body, want string }{
		{"bare map", `{"paulca":"tito-go.apps.example.com"}`, "paulca"},
		{"typo", `{"path":{}}`, `"path"`},
		{"absent", `{}`, `"paths"`},
		{"null", `{"paths":null}`, `"paths"`},
		{"not an object", `{"paths":["a"]}`, "paths"},
		{"trailing", `{"paths":{}} {}`, "trailing"},
		{"slash prefix", `{"paths":{"/paulca":"tito-go.apps.example.com"}}`, `paths["/paulca"]`},
		{"dotdot", `{"paths":{"..":"tito-go.apps.example.com"}}`, `paths[".."]`},
		{"upper prefix", `{"paths":{"Paulca":"tito-go.apps.example.com"}}`, `paths["Paulca"]`},
		{"bad target", `{"paths":{"paulca":"tito go"}}`, `paths["paulca"] target`},
		{"empty", ``, "body"},
		{"upper-case key", `{"PATHS":{}}`, `"PATHS"`},
		{"long-s key", `{"pathſ":{}}`, `"pathſ"`},
		{"duplicate prefix", `{"paths":{"bob":"tito-go.apps.example.com","bob":"tito-go.apps.example.com"}}`, "duplicate"},
		{"duplicate prefix apart", `{"paths":{"bob":"tito-go.apps.example.com","alice":"tito-go.apps.example.com","bob":"ti.to"}}`, "duplicate"},
		{"duplicate wrapper", `{"paths":{"bob":"tito-go.apps.example.com"},"paths":{}}`, "duplicate"},
	} {
		resp, b := p.Do("PUT", pathsURL, apitest.Admin, tc.body)
		var e api.Error
		json.Unmarshal(b, &e)
		if resp.StatusCode != 400 || !strings.Contains(e.Error+" "+e.Detail, tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.name, resp.StatusCode, b, tc.want)
		}
	}
	if after := storeBytes(t, p); !maps.Equal(before, after) {
		t.Fatal("a refused request changed the store")
	}
}

// TestCrossAccountTargetRoutesNothing: a path map's targets that are not a ready route
// of the account are accepted with a warning, one message whatever the reason: another
// account's route and a name that routes nothing read the same, so a warning leaks
// nothing about other tenants.
func TestCrossAccountTargetRoutesNothing(t *testing.T) {
	p := apitest.New(t, apitest.Options{})
	titoFleet(p)
	p.Publish("evil.apps.example.com")
	var ans struct{ Warnings []string }
	json.Unmarshal(p.Must(200, "PUT", pathsURL, apitest.Admin,
		`{"paths":{"steal":"evil.apps.example.com","zzz":"nothing.apps.example.com"}}`), &ans)
	if len(ans.Warnings) != 2 ||
		strings.ReplaceAll(ans.Warnings[0], "steal: target evil", "") != strings.ReplaceAll(ans.Warnings[1], "zzz: target nothing", "") {
		t.Fatalf("warnings %v: want two that differ only in the names", ans.Warnings)
	}
}

// TestATenantsRoutingChangesAreBudgetedFleetWide: past its account's routing change
// budget (fleetwrite's TestRouteBudgetIsSharedByEveryNodeOfTheFleet), a tenant's change
// is answered 429 naming the budget and the account, with a Retry-After, and counted in
// scafo_routing_changes_refused_total; a no-op still passes, and the admin is never
// refused.
func TestATenantsRoutingChangesAreBudgetedFleetWide(t *testing.T) {
	metrics := prometheus.NewRegistry()
	b := apitest.New(t, apitest.Options{Write: func(c *fleetwrite.Config) {
		c.Metrics, c.RouteBudget = metrics, fleetwrite.RouteBudget{Burst: 2, PerMinute: 0.01}
	}})
	b.Must(201, "PUT", "/v1/apps/evil", apitest.Admin, `{"account":"mallory","placement":["vps-a"]}`)
	_, tok := b.IssueToken("mallory", "evil", `"instance"`)
	b.Must(201, "POST", "/v1/node/instances/evil", tok, `{}`)
	b.Must(200, "PUT", "/v1/node/instances/evil", tok, `{"ready":true}`)
	b.Must(200, "PUT", "/v1/node/instances/evil", tok, `{"ready":false}`)
	b.Must(200, "PUT", "/v1/node/instances/evil", tok, `{"ready":false}`) // a no-op: free
	resp, rb := b.Do("PUT", "/v1/node/instances/evil", tok, `{"ready":true}`)
	var e api.Error
	json.Unmarshal(rb, &e)
	if resp.StatusCode != 429 || e.Error != "routing change budget" || !strings.Contains(e.Detail, "writes.routeBurst") || !strings.Contains(e.Detail, "mallory") {
		t.Fatalf("past the budget: %d %s, want 429 naming the routing change budget and the account", resp.StatusCode, rb)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	fams, err := metrics.Gather()
	counted := false
	for _, f := range fams {
		counted = counted || f.GetName() == "scafo_routing_changes_refused_total" && len(f.Metric) == 1 && f.Metric[0].GetCounter().GetValue() == 1
	}
	if !counted {
		t.Errorf("scafo_routing_changes_refused_total does not count the refused change (%v)", err)
	}
	for i := range 4 {
		b.Must(200, "PUT", "/v1/node/instances/evil", apitest.Admin, fmt.Sprintf(`{"ready":%v}`, i%2 == 0))
	}
}

// TestHostileInstanceWrites: an instance token's writes at odd paths with
// ?wait=applied are answered with a 4xx (never a wait on a name that is not an
// application, never a panic) and allocate nothing; onto another account's pair, 409;
// a release repeated, 404 (nothing to wait for), never "applied" twice.
func TestHostileInstanceWrites(t *testing.T) {
	p := apitest.New(t, apitest.Options{})
	p.Must(201, "PUT", "/v1/apps/shop", apitest.Admin, `{"account":"acme","placement":["vps-a"]}`)
	p.Must(201, "PUT", "/v1/apps/rival", apitest.Admin, `{"account":"evil","placement":["vps-a"]}`)
	_, tok := p.IssueToken("acme", "shop", `"instance"`)
	for _, path := range []string{"/v1/node/instances/", "/v1/node/instances//", "/v1/node/instances/shop%2Fx",
		"/v1/node/instances/sh%6Fp", "/v1/node/instances/shop/", "/v1/node/instances/" + strings.Repeat("a", 4000), "/v1/node/instances/..%2Fshop"} {
		for _, who := range []string{tok, apitest.Admin} {
			for _, method := range []string{"POST", "PUT", "DELETE"} {
				if rec := p.Rec(method, path+"?wait=applied&timeout=20s", who, `{"ready":true}`); rec.Code < 400 || rec.Code >= 500 {
					t.Errorf("%s %.60s: %d %.200s, want a 4xx", method, path, rec.Code, rec.Body)
				}
			}
		}
	}
	if got := p.Writer.Instances(); len(got) != 0 {
		t.Fatalf("odd paths allocated %+v", got)
	}
	var shop fleetwrite.Instance
	json.Unmarshal(p.Must(201, "POST", "/v1/node/instances/shop", tok, ""), &shop)
	_, rivalTok := p.IssueToken("evil", "rival", `"instance"`)
	for _, port := range shop.Ports {
		if rec := p.Rec("PUT", "/v1/node/instances/rival", rivalTok, fmt.Sprintf(`{"port":%d,"ready":true}`, port)); rec.Code != 409 {
			t.Errorf("rival onto shop's port %d: %d %s, want 409", port, rec.Code, rec.Body)
		}
	}
	p.Must(200, "DELETE", "/v1/node/instances/shop", tok, "")
	p.Must(404, "DELETE", "/v1/node/instances/shop?wait=applied&timeout=10s", tok, "")
}
