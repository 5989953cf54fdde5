package fleet

import (
	"reflect"
	"testing"
)

// Issue 25 item 10: the same-account rule of path-map targets, tried directly on the
// names a hostile tenant would aim at: another account's exact custom domain (a
// claim), a name under another account's wildcard claim, and another account's
// platform host. A target of the same account's own custom domain is the control:
// it is published, so the refusals are the rule's doing, not a missing route.
func TestPathMapTargetsOfAnotherAccountsClaimsAreRefused(t *testing.T) {
	st := sampleState()
	st.Claims = append(st.Claims, Claim{Host: "shop.acme.example", Account: "acme", App: "shop"})
	for i := range st.Claims {
		if st.Claims[i].Host == "ti.to" {
			st.Claims[i].Paths = map[string]string{
				"own":      "go.tito.io",            // tito's own claim: published
				"exact":    "shop.acme.example",     // acme's exact claim
				"covered":  "a.shop.example.org",    // under acme's wildcard claim
				"wildcard": "*.shop.example.org",    // acme's wildcard itself
				"platform": "shop.apps.example.com", // acme's platform host
			}
		}
	}
	d, sk := Derive(st, opts())
	if r := routeFor(t, d, "shop.acme.example"); r == nil || len(r.Upstreams) == 0 {
		t.Fatalf("shop.acme.example = %+v: the exact claim must route (else the test proves nothing)", r)
	}
	r := routeFor(t, d, "ti.to")
	if want := map[string]string{"own": "go.tito.io"}; !reflect.DeepEqual(r.Paths, want) {
		t.Fatalf("ti.to paths = %v, want only %v: a path map reached another account's name", r.Paths, want)
	}
	obj := "domains/ti.to.json#paths"
	requireSkipped(t, sk, obj, `target belongs to another account: "exact" → "shop.acme.example"`)
	requireSkipped(t, sk, obj, `"platform" → "shop.apps.example.com"`)
	requireSkipped(t, sk, obj, `"covered"`)
	requireSkipped(t, sk, obj, `"wildcard"`)

	// The same maps on acme's side: its own exact claim and platform host are fine.
	for i := range st.Claims {
		if st.Claims[i].Host == "ti.to" {
			st.Claims[i].Paths = nil
		}
		if st.Claims[i].Host == "shop.acme.example" {
			st.Claims[i].Paths = map[string]string{"p": "shop.apps.example.com", "t": "ti.to"}
		}
	}
	d, sk = Derive(st, opts())
	if r := routeFor(t, d, "shop.acme.example"); !reflect.DeepEqual(r.Paths, map[string]string{"p": "shop.apps.example.com"}) {
		t.Fatalf("shop.acme.example paths = %v, want its own platform host only", r.Paths)
	}
	requireSkipped(t, sk, "domains/shop.acme.example.json#paths", `target belongs to another account: "t" → "ti.to"`)
}
