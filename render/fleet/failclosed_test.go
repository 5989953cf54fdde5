package fleet

import "testing"

// TestUnreadyWildcardClaimKeepsItsRoute: a custom wildcard whose application has no
// ready instance stays in the document as a route without upstreams, like an exact
// name (TestAppWithoutReadyInstanceFailsClosedAndIsReported). Dropping it instead would
// let requests for x.shop.example.org fall through to whatever else matches them at the
// ingress (an operator's catch-all router), cookies included, while the skip text says
// "503, fail closed".
func TestUnreadyWildcardClaimKeepsItsRoute(t *testing.T) {
	st := sampleState()
	setReady(&st, "vps-a", "shop", false)
	setReady(&st, "vps-b", "shop", false)
	d, sk := Derive(st, opts())
	for _, h := range []string{"*.shop.example.org", "shop.apps.example.com"} {
		r := routeFor(t, d, h)
		if r == nil {
			t.Fatalf("%s: no route; want one without upstreams (503, fail closed)", h)
		}
		if r.Application != "shop" || len(r.Upstreams) != 0 {
			t.Errorf("%s = %+v, want shop's route without upstreams", h, r)
		}
	}
	requireSkipped(t, sk, "domains/*.shop.example.org.json", "no ready instance")
	if err := d.Validate(); err != nil {
		t.Fatalf("the document with a fail-closed wildcard does not validate: %v", err)
	}
}
