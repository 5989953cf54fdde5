package fleet

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// isolationState is sampleState plus another account (globex) with a ready app.
func isolationState() State {
	st := sampleState()
	st.Apps = append(st.Apps, App{Name: "gx", Account: "globex", Placement: []string{"vps-a"}})
	st.Nodes[0].Instances["gx"] = Instance{Port: 24700, Ready: true}
	return st
}

// requireSameEverywhere derives st under several input orders and fails if the
// document or the report moves.
func requireSameEverywhere(t *testing.T, st State, o Options) (*routing.Document, []Skipped) {
	t.Helper()
	d, sk := Derive(st, o)
	for seed := range uint64(4) {
		d2, sk2 := Derive(shuffled(st, rand.New(rand.NewPCG(seed, 7))), o)
		if !bytes.Equal(mustMarshal(t, d), mustMarshal(t, d2)) || !slices.Equal(sk, sk2) {
			t.Fatalf("result depends on input order (seed %d)", seed)
		}
	}
	if _, err := routing.Decode(mustMarshal(t, d)); err != nil {
		t.Fatalf("derived document does not decode: %v", err)
	}
	return d, sk
}

// TestWildcardNeverCoversAnotherAccountsName: whatever is in the store, a custom
// wildcard route never covers a name another account holds (exact-first lookup would
// hand that host's traffic to the wildcard the moment the host lost its router). The
// wildcard loses, whatever the input order, and the loss is reported.
func TestWildcardNeverCoversAnotherAccountsName(t *testing.T) {
	st := isolationState()
	st.Claims = append(st.Claims,
		Claim{Host: "a.shop.example.org", Account: "globex", App: "gx"},   // under acme's *.shop.example.org
		Claim{Host: "vip.shop.example.org", Account: "acme", App: "shop"}, // acme's own: fine
		Claim{Host: "*.tito.io", Account: "globex", App: "gx"},            // over tito's go.tito.io
		Claim{Host: "*.gx.example", Account: "globex", App: "gx"},         // covers nothing of anyone else
		Claim{Host: "x.gx.example", Account: "globex", App: "gx"},
	)
	d, sk := requireSameEverywhere(t, st, opts())
	for _, h := range []string{"*.shop.example.org", "*.tito.io"} {
		if routeFor(t, d, h) != nil {
			t.Errorf("%s routed over another account's name", h)
		}
	}
	requireSkipped(t, sk, "domains/*.shop.example.org.json", `covers "a.shop.example.org", held by application "gx" of another account`)
	requireSkipped(t, sk, "domains/*.tito.io.json", `covers "go.tito.io", held by application "tito-go" of another account`)
	for _, h := range []string{"a.shop.example.org", "vip.shop.example.org", "go.tito.io", "*.gx.example", "x.gx.example"} {
		if routeFor(t, d, h) == nil {
			t.Errorf("%s not routed", h)
		}
	}

	// The covered name holds even while its application has nothing ready.
	st2 := deepCopy(st)
	setReady(&st2, "vps-a", "gx", false)
	d, _ = requireSameEverywhere(t, st2, opts())
	if routeFor(t, d, "*.shop.example.org") != nil {
		t.Error("wildcard routed over another account's unready name")
	}

	// Without the other account's name, the wildcard is back.
	st.Claims = slices.DeleteFunc(st.Claims, func(c Claim) bool { return c.Host == "a.shop.example.org" })
	d, _ = requireSameEverywhere(t, st, opts())
	if routeFor(t, d, "*.shop.example.org") == nil {
		t.Error("wildcard dropped with no conflict left")
	}
}

// TestHostsThatExistAlwaysHaveTheirOwnRoute: fail closed. A platform host of an
// existing application and a claimed name, exact or wildcard, keep their route while
// nothing is ready, with no upstreams (an ingress answers 503), so no other router
// (an operator's catch-all) ever catches them. Path-map targets that are not ready
// still fall through to the host's own route. (A claimed apex: TestClaimedApexLeavesTheAPI.)
func TestHostsThatExistAlwaysHaveTheirOwnRoute(t *testing.T) {
	st := sampleState()
	for _, n := range []string{"vps-a", "vps-b"} {
		setReady(&st, n, "tito-go", false)
		setReady(&st, n, "shop", false)
	}
	d, sk := requireSameEverywhere(t, st, opts())
	for h, app := range map[string]string{"go.tito.io": "tito-go", "tito-go.apps.example.com": "tito-go",
		"*.shop.example.org": "shop", "shop.apps.example.com": "shop"} {
		r := routeFor(t, d, h)
		if r == nil || r.Application != app || r.Upstreams == nil || len(r.Upstreams) != 0 {
			t.Fatalf("%s = %+v, want %s's route with an empty (non-nil) upstream list", h, r, app)
		}
	}
	requireSkipped(t, sk, "apps/tito-go.json", "no ready instance")
	requireSkipped(t, sk, "domains/go.tito.io.json", "no ready instance")
	requireSkipped(t, sk, "domains/*.shop.example.org.json", "no ready instance")
	// ti.to's prefixes pointed at go.tito.io: dropped (seed 000), ti.to answers them.
	if r := routeFor(t, d, "ti.to"); r == nil || r.Paths != nil || len(r.Upstreams) == 0 {
		t.Fatalf("ti.to = %+v, want routed to its own application with no paths", r)
	}
	requireSkipped(t, sk, "domains/ti.to.json#paths", "2 entries ignored: target's application has no ready instance")
	// Every consumer takes the empty lists: Marshal writes [], Decode and Prefer accept.
	b := mustMarshal(t, d)
	if !bytes.Contains(b, []byte(`{"host":"go.tito.io","application":"tito-go","upstreams":[],"healthPath":"/healthz"}`)) {
		t.Fatalf("go.tito.io not written with an empty upstream list: %s", b)
	}
	p, err := routing.Prefer(d, "vps-b")
	if err != nil || len(routeFor(t, p, "go.tito.io").Upstreams) != 0 {
		t.Fatalf("Prefer: %v", err)
	}
}

// TestClaimedHostsWithoutAHolderFailClosed: a claim object the node could not decode
// (State.UnreadableClaims), or one that names no usable holder (a missing application,
// another account's application, two objects for one host), still marks its host as
// existing: a route owned by routing.UnownedApplication with no upstreams (503), out of
// the API if it is an apex, and never covered by anyone's wildcard.
func TestClaimedHostsWithoutAHolderFailClosed(t *testing.T) {
	o := opts()
	o.PlatformDomains = []string{"apps.example.com", "apps.example.net"}
	st := isolationState()
	st.UnreadableClaims = []string{
		"lost.example.org",   // under acme's wildcard below
		"apps.example.net",   // an apex
		"*.broken.example",   // a wildcard: nothing to route
		"Bad Host",           // not a name
		"x.apps.example.com", // the platform's
	}
	st.Claims = append(st.Claims,
		Claim{Host: "*.example.org", Account: "acme", App: "shop"},
		Claim{Host: "orphan.example", Account: "acme", App: "gone"},
		Claim{Host: "stolen.example", Account: "acme", App: "tito-go"},
		Claim{Host: "twice.example", Account: "acme", App: "shop"},
		Claim{Host: "twice.example", Account: "globex", App: "gx"},
		Claim{Host: "*.orphan.example", Account: "acme", App: "gone"},
		Claim{Host: "y.shop.example.org", Account: "globex", App: "gone"}, // no holder, under acme's wildcard
	)
	d, sk := requireSameEverywhere(t, st, o)
	for _, h := range []string{"lost.example.org", "apps.example.net", "orphan.example", "stolen.example", "twice.example", "y.shop.example.org"} {
		r := routeFor(t, d, h)
		if r == nil || r.Application != routing.UnownedApplication || r.Upstreams == nil || len(r.Upstreams) != 0 || r.Paths != nil {
			t.Errorf("%s = %+v, want a route of %q without upstreams", h, r, routing.UnownedApplication)
		}
	}
	for _, h := range []string{"*.broken.example", "*.orphan.example", "x.apps.example.com", "*.example.org", "*.shop.example.org"} {
		if r := routeFor(t, d, h); r != nil {
			t.Errorf("%s routed: %+v", h, r)
		}
	}
	requireSkipped(t, sk, "domains/lost.example.org.json", "could not be decoded")
	requireSkipped(t, sk, "domains/*.example.org.json", `covers "lost.example.org", held by no application`)
	requireSkipped(t, sk, "domains/*.shop.example.org.json", `covers "y.shop.example.org", held by no application`)
	requireSkipped(t, sk, "domains/*.broken.example.json", "could not be decoded")
	requireSkipped(t, sk, "domains/Bad Host.json", "could not be decoded")
	requireSkipped(t, sk, "domains/x.apps.example.com.json", "platform host")
	requireSkipped(t, sk, "domains/orphan.example.json", `application "gone" not found`)
	requireSkipped(t, sk, "domains/stolen.example.json", `claim account "acme" is not the account of application "tito-go"`)
	requireSkipped(t, sk, "domains/twice.example.json", `2 claim objects name host "twice.example"`)
	if !slices.Equal(d.API.Hosts, []string{"apps.example.com"}) {
		t.Fatalf("api.hosts = %v, want the unreadable apex left out", d.API.Hosts)
	}

	// An unreadable object for a host that also has a readable one: two objects, no holder.
	st = sampleState()
	st.UnreadableClaims = []string{"go.tito.io"}
	d, sk = requireSameEverywhere(t, st, opts())
	if r := routeFor(t, d, "go.tito.io"); r == nil || r.Application != routing.UnownedApplication {
		t.Fatalf("go.tito.io = %+v", r)
	}
	requireSkipped(t, sk, "domains/go.tito.io.json", "2 claim objects")

	// The reserved name is not an application's.
	st = sampleState()
	st.Apps = append(st.Apps, App{Name: routing.UnownedApplication, Account: "acme", Placement: []string{"vps-a"}})
	d, sk = requireSameEverywhere(t, st, opts())
	if routeFor(t, d, routing.UnownedApplication+".apps.example.com") != nil {
		t.Fatal("an application took the reserved name")
	}
	requireSkipped(t, sk, AppKey(routing.UnownedApplication), "reserved")
}
