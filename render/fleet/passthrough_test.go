package fleet

import "testing"

// passthroughState is sampleState with tito-go terminating TLS itself: a path map of
// ti.to targets its host, and it also claims a wildcard and publishes a path map of its
// own, all of which the API refuses and a hand-written store can still hold.
func passthroughState() State {
	st := sampleState()
	for i := range st.Apps {
		if st.Apps[i].Name == "tito-go" {
			st.Apps[i].Passthrough = true
			st.Apps[i].ProxyProtocol = 2
		}
	}
	st.Claims = append(st.Claims, Claim{Host: "*.go.tito.io", Account: "tito", App: "tito-go"})
	for i := range st.Claims {
		if st.Claims[i].Host == "go.tito.io" {
			st.Claims[i].Paths = map[string]string{"x": "ti.to"}
		}
	}
	return st
}

// TestPassthroughApplicationsRouteExactHostsOnly: every exact host of a passthrough
// application (platform host and claim) carries passthrough and its PROXY protocol
// version, in the same ordered upstream list; its HTTP health path is not used; its
// wildcard claim, its own path map and every prefix targeting it are skipped and
// reported; and the document passes Validate.
func TestPassthroughApplicationsRouteExactHostsOnly(t *testing.T) {
	d, sk := Derive(passthroughState(), opts())
	if err := d.Validate(); err != nil {
		t.Fatalf("derived document invalid: %v", err)
	}
	for _, h := range []string{"go.tito.io", "tito-go.apps.example.com"} {
		r := routeFor(t, d, h)
		if r == nil {
			t.Fatalf("%s: no route", h)
		}
		if !r.Passthrough || r.ProxyProtocol != 2 || r.HealthPath != "" || len(r.Paths) != 0 {
			t.Fatalf("%s = %+v, want passthrough, proxyProtocol 2, no health path, no paths", h, r)
		}
		if got := nodesOf(r.Upstreams); len(got) != 2 || got[0] != "vps-b" || got[1] != "vps-a" {
			t.Fatalf("%s upstreams = %v, want placement order [vps-b vps-a]", h, got)
		}
	}
	if r := routeFor(t, d, "*.go.tito.io"); r != nil {
		t.Fatalf("wildcard claim of a passthrough application routed: %+v", r)
	}
	if r := routeFor(t, d, "ti.to"); r.Passthrough || len(r.Paths) != 0 {
		t.Fatalf("ti.to = %+v: its prefixes target a passthrough host and must drop", r)
	}
	if r := routeFor(t, d, "shop.apps.example.com"); r.Passthrough || r.ProxyProtocol != 0 {
		t.Fatalf("another application became passthrough: %+v", r)
	}
	requireSkipped(t, sk, "domains/*.go.tito.io.json", "wildcard claim of passthrough application")
	requireSkipped(t, sk, "domains/go.tito.io.json#paths", "has no path map")
	requireSkipped(t, sk, "domains/ti.to.json#paths", "passthrough")
	requireSkipped(t, sk, "apps/tito-go.json", "health.path on a passthrough application")
}

// TestTurningPassthroughOnDerivesTheWholeState: the Deriver's patch moves upstreams and
// health paths only, so a change of an application's passthrough or PROXY protocol
// derives everything again and equals Derive.
func TestTurningPassthroughOnDerivesTheWholeState(t *testing.T) {
	var dr Deriver
	st := sampleState()
	dr.Derive(st, opts(), nil)
	for _, change := range []func(a *App){
		func(a *App) { a.Passthrough, a.Health = true, nil },
		func(a *App) { a.ProxyProtocol = 2 },
		func(a *App) { a.Passthrough, a.ProxyProtocol = false, 0 },
	} {
		st = deepCopy(st)
		change(&st.Apps[2])
		got, _, _ := dr.Derive(st, opts(), []string{AppKey("tito-go")})
		want, _ := Derive(st, opts())
		if string(mustMarshal(t, got)) != string(mustMarshal(t, want)) {
			t.Fatalf("Deriver and Derive differ after a passthrough change:\n%s\n%s", mustMarshal(t, got), mustMarshal(t, want))
		}
	}
}
