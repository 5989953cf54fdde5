package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/render/routing"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func opts() Options {
	return Options{PlatformDomains: []string{"apps.example.com"}, APIPublic: true, NodeTTL: time.Minute, Now: now}
}

// sampleState is docs/design.md §2's fleet: shop on vps-a then vps-b (with a custom
// wildcard), tito-classic holding ti.to with a path map to tito-go's go.tito.io.
func sampleState() State {
	return State{
		Apps: []App{
			{Name: "shop", Account: "acme", Placement: []string{"vps-a", "vps-b"}},
			{Name: "tito-classic", Account: "tito", Placement: []string{"vps-a", "vps-b"}},
			{Name: "tito-go", Account: "tito", Placement: []string{"vps-b", "vps-a"}, Health: &Health{Path: "/healthz"}},
		},
		Claims: []Claim{
			{Host: "ti.to", Account: "tito", App: "tito-classic",
				Paths: map[string]string{"paulca": "go.tito.io", "bigcorp": "go.tito.io"}},
			{Host: "go.tito.io", Account: "tito", App: "tito-go"},
			{Host: "*.shop.example.org", Account: "acme", App: "shop"},
		},
		Nodes: []NodeRecord{
			{Name: "vps-a", Address: "10.83.0.1", APIPort: 7400, Seen: now.Add(-10 * time.Second),
				Instances: map[string]Instance{
					"shop":         {Port: 24417, Ready: true},
					"tito-classic": {Port: 24500, Ready: true},
					"tito-go":      {Port: 24600, Ready: true},
				}},
			{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400, Seen: now.Add(-5 * time.Second),
				Instances: map[string]Instance{
					"shop":    {Port: 24902, Ready: true},
					"tito-go": {Port: 24601, Ready: true},
				}},
		},
	}
}

func ups(pairs ...string) []routing.Upstream {
	out := make([]routing.Upstream, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, routing.Upstream{Node: pairs[i], Address: pairs[i+1], APIPort: 7400})
	}
	return out
}

func routeFor(t *testing.T, d *routing.Document, host string) *routing.Route {
	t.Helper()
	for i := range d.Routes {
		if d.Routes[i].Host == host {
			return &d.Routes[i]
		}
	}
	return nil
}

func mustMarshal(t testing.TB, d *routing.Document) []byte {
	t.Helper()
	b, err := routing.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// skippedFor returns the reasons reported for object.
func skippedFor(sk []Skipped, object string) []string {
	var out []string
	for _, s := range sk {
		if s.Object == object {
			out = append(out, s.Reason)
		}
	}
	return out
}

func requireSkipped(t *testing.T, sk []Skipped, object, reasonPart string) {
	t.Helper()
	for _, r := range skippedFor(sk, object) {
		if strings.Contains(r, reasonPart) {
			return
		}
	}
	t.Fatalf("no Skipped{%q, …%q…} in %+v", object, reasonPart, sk)
}

func TestDeriveBuildsTheDesignExample(t *testing.T) {
	d, sk := Derive(sampleState(), opts())
	want := &routing.Document{
		V: 1,
		Routes: []routing.Route{
			{Host: "*.shop.example.org", Application: "shop",
				Upstreams: ups("vps-a", "10.83.0.1:24417", "vps-b", "10.83.0.2:24902")},
			{Host: "go.tito.io", Application: "tito-go", HealthPath: "/healthz",
				Upstreams: ups("vps-b", "10.83.0.2:24601", "vps-a", "10.83.0.1:24600")},
			{Host: "shop.apps.example.com", Application: "shop",
				Upstreams: ups("vps-a", "10.83.0.1:24417", "vps-b", "10.83.0.2:24902")},
			{Host: "ti.to", Application: "tito-classic",
				Upstreams: ups("vps-a", "10.83.0.1:24500"),
				Paths:     map[string]string{"paulca": "go.tito.io", "bigcorp": "go.tito.io"}},
			{Host: "tito-classic.apps.example.com", Application: "tito-classic",
				Upstreams: ups("vps-a", "10.83.0.1:24500")},
			{Host: "tito-go.apps.example.com", Application: "tito-go", HealthPath: "/healthz",
				Upstreams: ups("vps-b", "10.83.0.2:24601", "vps-a", "10.83.0.1:24600")},
		},
		API: &routing.API{
			Hosts:     []string{"apps.example.com"},
			Upstreams: ups("vps-a", "10.83.0.1:7400", "vps-b", "10.83.0.2:7400"),
			// docs/design.md §3: the public apex serves what a remote CLI or CI needs and nothing
			// else (the seed's two entries are a subset).
			Denied: []string{"/metrics", "/ui", "/v1/health/", "/v1/ingress/", "/v1/status", "/v1/storage"},
		},
	}
	want.Seal()
	if got, w := mustMarshal(t, d), mustMarshal(t, want); !bytes.Equal(got, w) {
		t.Fatalf("Derive =\n%s\nwant\n%s", got, w)
	}
	if len(sk) != 0 {
		t.Fatalf("skipped %+v, want nothing", sk)
	}
	// The document is valid by Decode's rules and survives a round trip.
	back, err := routing.Decode(mustMarshal(t, d))
	if err != nil {
		t.Fatalf("Decode(Derive): %v", err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip changed the document")
	}
}

// shuffled returns st with every slice shuffled and every map rebuilt in a random
// insertion order. Placement lists keep their order: it is content.
func shuffled(st State, rng *rand.Rand) State {
	out := State{Apps: slices.Clone(st.Apps), Claims: slices.Clone(st.Claims), Nodes: slices.Clone(st.Nodes),
		UnreadableClaims: slices.Clone(st.UnreadableClaims)}
	rng.Shuffle(len(out.UnreadableClaims), func(i, j int) {
		out.UnreadableClaims[i], out.UnreadableClaims[j] = out.UnreadableClaims[j], out.UnreadableClaims[i]
	})
	rng.Shuffle(len(out.Apps), func(i, j int) { out.Apps[i], out.Apps[j] = out.Apps[j], out.Apps[i] })
	rng.Shuffle(len(out.Claims), func(i, j int) { out.Claims[i], out.Claims[j] = out.Claims[j], out.Claims[i] })
	rng.Shuffle(len(out.Nodes), func(i, j int) { out.Nodes[i], out.Nodes[j] = out.Nodes[j], out.Nodes[i] })
	for i := range out.Claims {
		out.Claims[i].Paths = reinsert(out.Claims[i].Paths, rng)
	}
	for i := range out.Nodes {
		out.Nodes[i].Instances = reinsert(out.Nodes[i].Instances, rng)
	}
	return out
}

func reinsert[V any](m map[string]V, rng *rand.Rand) map[string]V {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	out := make(map[string]V)
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// TestDeriveIsIndependentOfInputOrder: the document and the report are the same bytes
// whatever the order of the input, and Derive does not modify its input. Applications
// in store key order are found by binary search, in any other order through a map:
// skipped applications (an invalid name, a reserved one, an invalid account, a
// duplicated one) are as absent to a claim either way, which holds their names
// without a holder.
func TestDeriveIsIndependentOfInputOrder(t *testing.T) {
	st := GenerateState(300, 500)
	// Add objects that get skipped, so the report's order is exercised too.
	st.Apps = append(st.Apps,
		App{Name: "Bad", Account: "acct-001"},
		App{Name: routing.UnownedApplication, Account: "acct-001"},
		App{Name: "zz-bad-account", Account: "Not Valid"},
		App{Name: "zz-good", Account: "acct-001", Placement: []string{"vps-a"}},
		App{Name: "zz", Account: "acct-001"}, App{Name: "zz-2", Account: "acct-001"})
	st.Claims = append(st.Claims,
		Claim{Host: "bad.example", Account: "acct-001", App: "Bad"},
		Claim{Host: "unowned.example", Account: "acct-001", App: routing.UnownedApplication},
		Claim{Host: "badacct.example", Account: "acct-001", App: "zz-bad-account"},
		Claim{Host: "missing.example", Account: "acct-001", App: "zz-missing"},
		Claim{Host: "dup.example", Account: "acct-001", App: "dup"},
		Claim{Host: "good.example", Account: "acct-001", App: "zz-good",
			Paths: map[string]string{"a": "app-00001.apps.example.com", "b": "bad.example"}},
		Claim{Host: "zz.example", Account: "acct-001", App: "zz"},
		Claim{Host: "zz-2.example", Account: "acct-001", App: "zz-2"},
		Claim{Host: "x.apps.example.com", Account: "acct-001", App: "app-00001"},
		Claim{Host: "other.example", Account: "acct-001", App: "app-00001",
			Paths: map[string]string{"a": "nope.example", "b": "app-00002.apps.example.com", "c": "c.example", "D": "x.example"}})
	st.Nodes = append(st.Nodes, NodeRecord{Name: "vps-z", Address: "not-an-ip", APIPort: 7400, Seen: now})
	// The node lists applications in store key order ("zz-2" before "zz").
	slices.SortFunc(st.Apps, func(a, b App) int { return strings.Compare(AppKey(a.Name), AppKey(b.Name)) })
	if !namesAscending(st.Apps) {
		t.Fatal("test state is not in name order")
	}
	opt := GenerateOptions()
	for _, st := range []State{st, {Apps: append(slices.Clone(st.Apps), App{Name: "dup", Account: "a"}, App{Name: "dup", Account: "b"}),
		Claims: st.Claims, Nodes: st.Nodes}} {
		before, _ := json.Marshal(st)
		wantDoc, wantSkipped := Derive(st, opt)
		if after, _ := json.Marshal(st); !bytes.Equal(before, after) {
			t.Fatal("Derive modified its input state")
		}
		want := mustMarshal(t, wantDoc)
		if len(wantSkipped) < 5 {
			t.Fatalf("expected several skipped objects, got %+v", wantSkipped)
		}
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, seed*7+1))
			d, sk := Derive(shuffled(st, rng), opt)
			if got := mustMarshal(t, d); !bytes.Equal(got, want) {
				t.Fatalf("seed %d: document bytes differ from the derivation in name order", seed)
			}
			if !slices.Equal(sk, wantSkipped) {
				t.Fatalf("seed %d: skipped differ:\n%+v\n%+v", seed, sk, wantSkipped)
			}
		}
		for _, r := range wantDoc.Routes {
			switch r.Host {
			case "bad.example", "unowned.example", "badacct.example", "missing.example", "dup.example":
				if r.Application != routing.UnownedApplication {
					t.Errorf("%s routed to %q, want %q", r.Host, r.Application, routing.UnownedApplication)
				}
			case "good.example", "zz.example", "zz-2.example":
				if want := strings.TrimSuffix(strings.Replace(r.Host, "good", "zz-good", 1), ".example"); r.Application != want {
					t.Errorf("%s routed to %q, want %q", r.Host, r.Application, want)
				}
			}
		}
	}
}

func TestRevisionMovesWithRoutingContent(t *testing.T) {
	base, _ := Derive(sampleState(), opts())
	for _, tc := range []struct {
		name   string
		mutate func(st *State)
	}{
		{"path entry added", func(st *State) { st.Claims[0].Paths["newco"] = "go.tito.io" }},
		{"path entry removed", func(st *State) { delete(st.Claims[0].Paths, "bigcorp") }},
		{"path entry retargeted", func(st *State) { st.Claims[0].Paths["paulca"] = "tito-go.apps.example.com" }},
		{"path map cleared", func(st *State) { st.Claims[0].Paths = map[string]string{} }},
		{"placement order", func(st *State) { st.Apps[0].Placement = []string{"vps-b", "vps-a"} }},
		{"readiness flips off", func(st *State) { setReady(st, "vps-b", "shop", false) }},
		{"readiness flips on", func(st *State) { setReady(st, "vps-b", "tito-classic", true) }},
		{"instance port", func(st *State) { setPort(st, "vps-a", "shop", 24418) }},
		{"node address", func(st *State) { st.Nodes[1].Address = "10.83.0.9" }},
		{"node api port", func(st *State) { st.Nodes[1].APIPort = 7401 }},
		{"health path", func(st *State) { st.Apps[0].Health = &Health{Path: "/up"} }},
		{"claim added", func(st *State) {
			st.Claims = append(st.Claims, Claim{Host: "shop.example.com", Account: "acme", App: "shop"})
		}},
		{"node goes stale", func(st *State) { st.Nodes[1].Seen = now.Add(-2 * time.Minute) }},
		{"apex claimed", func(st *State) {
			st.Claims = append(st.Claims, Claim{Host: "apps.example.com", Account: "acme", App: "shop"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := deepCopy(sampleState())
			tc.mutate(&st)
			d, _ := Derive(st, opts())
			if d.Revision == base.Revision {
				t.Fatalf("revision %s did not move", d.Revision)
			}
		})
	}
}

func TestRevisionStableWhenOnlyHeartbeatsMove(t *testing.T) {
	base, _ := Derive(sampleState(), opts())
	for _, dt := range []time.Duration{0, time.Second, 30 * time.Second, 50 * time.Second} {
		st := deepCopy(sampleState())
		for i := range st.Nodes {
			st.Nodes[i].Seen = now.Add(-dt)
		}
		o := opts()
		o.Now = now.Add(dt / 10) // the clock moves too
		d, _ := Derive(st, o)
		if d.Revision != base.Revision {
			t.Fatalf("heartbeats %s old: revision moved %s → %s", dt, base.Revision, d.Revision)
		}
	}
}

func setReady(st *State, node, app string, ready bool) {
	for i := range st.Nodes {
		if st.Nodes[i].Name == node {
			inst := st.Nodes[i].Instances[app]
			if inst.Port == 0 {
				inst.Port = 25000
			}
			inst.Ready = ready
			st.Nodes[i].Instances[app] = inst
		}
	}
}

func setPort(st *State, node, app string, port int) {
	for i := range st.Nodes {
		if st.Nodes[i].Name == node {
			inst := st.Nodes[i].Instances[app]
			inst.Port = port
			st.Nodes[i].Instances[app] = inst
		}
	}
}

func deepCopy(st State) State {
	b, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	var out State
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func nodesOf(us []routing.Upstream) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.Node)
	}
	return out
}

// staleState: app "web" placed on n1, n2, n3 (all ready); seen ages given per node.
func staleState(ages ...time.Duration) State {
	st := State{Apps: []App{{Name: "web", Account: "acme", Placement: []string{"n1", "n2", "n3"}}}}
	for i, age := range ages {
		st.Nodes = append(st.Nodes, NodeRecord{
			Name: fmt.Sprintf("n%d", i+1), Address: fmt.Sprintf("10.0.0.%d", i+1), APIPort: 7400,
			Seen: now.Add(-age), Instances: map[string]Instance{"web": {Port: 8000 + i, Ready: true}},
		})
	}
	return st
}

// TestNodeTTLDropsStaleUpstreamsButFailsStatic: what Derive does with the nodes NodeLive
// finds stale, and how it reports them; the window's edges here only as far as they show
// which TTL Derive passes (every edge, and a record never seen:
// TestNodeLiveIsTheTTLWindowAroundSeen). Hostile review 7, F1.
func TestNodeTTLDropsStaleUpstreamsButFailsStatic(t *testing.T) {
	ttl := time.Minute
	for _, tc := range []struct {
		name     string
		ages     []time.Duration
		ttl      time.Duration
		wantWeb  []string
		wantAPI  []string
		wantNote []string // nodes reported stale
	}{
		{"all fresh", []time.Duration{0, 0, 0}, ttl, []string{"n1", "n2", "n3"}, []string{"n1", "n2", "n3"}, nil},
		// The window's edges as Derive passes them to NodeLive (its TTL, not another).
		{"exactly the TTL is not stale", []time.Duration{ttl, 0, 0}, ttl, []string{"n1", "n2", "n3"}, []string{"n1", "n2", "n3"}, nil},
		{"ahead within the TTL is live", []time.Duration{-ttl, 0, 0}, ttl, []string{"n1", "n2", "n3"}, []string{"n1", "n2", "n3"}, nil},
		{"zero TTL: nothing is stale", []time.Duration{time.Hour, time.Hour, time.Hour}, 0,
			[]string{"n1", "n2", "n3"}, []string{"n1", "n2", "n3"}, nil},
		{"primary stale is dropped", []time.Duration{ttl + time.Nanosecond, 0, 0}, ttl,
			[]string{"n2", "n3"}, []string{"n2", "n3"}, []string{"n1"}},
		{"two stale, one fresh", []time.Duration{time.Hour, 0, time.Hour}, ttl,
			[]string{"n2"}, []string{"n2"}, []string{"n1", "n3"}},
		{"all stale: fail static keeps all in placement order", []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour}, ttl,
			[]string{"n1", "n2", "n3"}, []string{"n1", "n2", "n3"}, []string{"n1", "n2", "n3"}},
		// A negative age is a heartbeat dated ahead of this node's clock.
		{"ahead beyond the TTL is stale", []time.Duration{-ttl - time.Nanosecond, 0, 0}, ttl,
			[]string{"n2", "n3"}, []string{"n2", "n3"}, []string{"n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts()
			o.NodeTTL = tc.ttl
			d, sk := Derive(staleState(tc.ages...), o)
			r := routeFor(t, d, "web.apps.example.com")
			if r == nil {
				t.Fatal("web has no route")
			}
			if got := nodesOf(r.Upstreams); !slices.Equal(got, tc.wantWeb) {
				t.Errorf("web upstreams = %v, want %v", got, tc.wantWeb)
			}
			if got := nodesOf(d.API.Upstreams); !slices.Equal(got, tc.wantAPI) {
				t.Errorf("api upstreams = %v, want %v", got, tc.wantAPI)
			}
			var stale []string
			for _, s := range sk {
				if strings.Contains(s.Reason, "heartbeat older than the node TTL") ||
					strings.Contains(s.Reason, "more than the node TTL "+tc.ttl.String()+" ahead of this node's clock") {
					stale = append(stale, strings.TrimSuffix(strings.TrimPrefix(s.Object, "nodes/"), ".json"))
				}
			}
			if !slices.Equal(stale, tc.wantNote) {
				t.Errorf("reported stale %v, want %v", stale, tc.wantNote)
			}
		})
	}
}

// TestOnlyReadyInstancesOfTheCurrentIncarnationOnPlacedNodesAreRouted: the instances
// an application's routes send to: fail static keeps only the ready ones among stale
// nodes; a ready instance on a node outside the placement does not count; an instance
// of another incarnation (the application deleted and recreated under its name, in any
// account: a new ID) is the old owner's process. (Nothing ready at all fails closed:
// TestHostsThatExistAlwaysHaveTheirOwnRoute.)
func TestOnlyReadyInstancesOfTheCurrentIncarnationOnPlacedNodesAreRouted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		st    func() State
		hosts []string
		want  []string // the nodes of each host's upstreams
	}{
		{"fail static: the stale but ready n1 alone", func() State {
			st := staleState(time.Hour, time.Hour, 0)
			setReady(&st, "n3", "web", false)
			setReady(&st, "n2", "web", false)
			return st
		}, []string{"web.apps.example.com"}, []string{"n1"}},
		{"ready on vps-a, placed on vps-b only", func() State {
			st := sampleState()
			st.Apps[1].Placement = []string{"vps-b"} // tito-classic
			setReady(&st, "vps-b", "tito-classic", false)
			return st
		}, []string{"ti.to", "tito-classic.apps.example.com"}, nil},
		{"shop recreated: vps-a's instance is the old incarnation's", func() State {
			st := sampleState()
			st.Apps[0].ID = "00000000000000b2"
			st.Nodes[0].Instances["shop"] = Instance{Port: 24417, Ready: true, AppID: "00000000000000a1"}
			st.Nodes[1].Instances["shop"] = Instance{Port: 24902, Ready: true, AppID: "00000000000000b2"}
			return st
		}, []string{"shop.apps.example.com", "*.shop.example.org"}, []string{"vps-b"}},
	} {
		d, _ := Derive(tc.st(), opts())
		for _, h := range tc.hosts {
			if r := routeFor(t, d, h); r == nil || !slices.Equal(nodesOf(r.Upstreams), tc.want) {
				t.Errorf("%s: %s = %+v, want upstreams on %v", tc.name, h, r, tc.want)
			}
		}
	}
}

// TestPathMapsStayWithinOneAccount: a path map publishes the prefixes whose target is a
// host of the claim's own account (its custom domains, its platform hosts) and drops,
// reporting one line per reason, a target of another account (its exact claim, its
// platform host; issue 25 item 10), a wildcard (another account's claim), a name no
// route holds (one under another account's wildcard claim too), the host itself, and
// an invalid prefix. shop.acme.example, acme's
// exact claim, routes: the refusals of it are the rule's doing, not a missing route.
func TestPathMapsStayWithinOneAccount(t *testing.T) {
	for _, tc := range []struct {
		host    string // whose path map
		paths   map[string]string
		kept    map[string]string
		skipped []string // the reports, one per reason
	}{
		{"ti.to", map[string]string{
			"paulca": "go.tito.io", "plat": "tito-go.apps.example.com", // tito's own
			"bigcorp": "shop.apps.example.com", "exact": "shop.acme.example", "covered": "a.shop.example.org", // acme's
			"evil": "*.shop.example.org", "ghost": "ghost.example.com", "self": "ti.to", "Upper": "go.tito.io", "../x": "go.tito.io",
		}, map[string]string{"paulca": "go.tito.io", "plat": "tito-go.apps.example.com"}, []string{
			`2 entries ignored: target belongs to another account: "bigcorp" → "shop.apps.example.com", "exact" → "shop.acme.example"`,
			`target is not a canonical host name: "evil"`,
			`2 entries ignored: target is not a host of any application: "covered" → "a.shop.example.org", "ghost"`,
			`target is this host itself: "self"`,
			`2 entries ignored: invalid prefix`,
		}},
		{"shop.acme.example", map[string]string{"p": "shop.apps.example.com", "t": "ti.to"},
			map[string]string{"p": "shop.apps.example.com"}, []string{`target belongs to another account: "t" → "ti.to"`}},
	} {
		st := sampleState()
		st.Claims = append(st.Claims, Claim{Host: "shop.acme.example", Account: "acme", App: "shop"})
		for i := range st.Claims {
			if st.Claims[i].Host == "ti.to" || st.Claims[i].Host == tc.host {
				st.Claims[i].Paths = nil
			}
			if st.Claims[i].Host == tc.host {
				st.Claims[i].Paths = tc.paths
			}
		}
		d, sk := Derive(st, opts())
		if r := routeFor(t, d, "shop.acme.example"); r == nil || len(r.Upstreams) == 0 {
			t.Fatalf("shop.acme.example = %+v: the exact claim must route", r)
		}
		if r := routeFor(t, d, tc.host); !reflect.DeepEqual(r.Paths, tc.kept) {
			t.Errorf("%s paths = %v, want %v", tc.host, r.Paths, tc.kept)
		}
		obj := "domains/" + tc.host + ".json#paths"
		for _, why := range tc.skipped {
			requireSkipped(t, sk, obj, why)
		}
		if n := len(skippedFor(sk, obj)); n != len(tc.skipped) {
			t.Errorf("%d reports for %s, want one per reason (%d): %+v", n, obj, len(tc.skipped), sk)
		}
	}
}

func TestPathFailureReportsAreBounded(t *testing.T) {
	st := sampleState()
	for i := range 5000 {
		st.Claims[0].Paths[fmt.Sprintf("x%04d", i)] = "ghost.example.com"
	}
	_, sk := Derive(st, opts())
	reasons := skippedFor(sk, "domains/ti.to.json#paths")
	if len(reasons) != 1 {
		t.Fatalf("want one report, got %d", len(reasons))
	}
	if r := reasons[0]; !strings.HasPrefix(r, "5000 entries ignored") || !strings.HasSuffix(r, "and 4995 more") || len(r) > 400 {
		t.Fatalf("report not bounded or not summarised: %q", r)
	}
}

func TestPathCapDropsDeterministicallyInSortedKeyOrder(t *testing.T) {
	st := sampleState()
	paths := map[string]string{}
	for i := range routing.MaxPaths + 5 {
		paths[fmt.Sprintf("p%05d", i)] = "go.tito.io"
	}
	// An invalid entry sorting early still uses a slot: the cut is made on the map as
	// published, so it does not move with validity or readiness.
	paths["a-ghost"] = "ghost.example.com"
	st.Claims[0].Paths = paths
	d, sk := Derive(st, opts())
	got := routeFor(t, d, "ti.to").Paths
	if len(got) != routing.MaxPaths-1 {
		t.Fatalf("%d prefixes kept, want %d", len(got), routing.MaxPaths-1)
	}
	for i := range routing.MaxPaths + 5 {
		k := fmt.Sprintf("p%05d", i)
		_, kept := got[k]
		if wantKept := i < routing.MaxPaths-1; kept != wantKept {
			t.Fatalf("%s kept=%v, want %v", k, kept, wantKept)
		}
	}
	requireSkipped(t, sk, "domains/ti.to.json#paths",
		`10006 prefixes exceed the cap of 10000 per host; dropped the last 6 in sorted key order ("p09999" … "p10004")`)
	// Same again under another insertion order.
	d2, sk2 := Derive(shuffled(st, rand.New(rand.NewPCG(1, 2))), opts())
	if !bytes.Equal(mustMarshal(t, d), mustMarshal(t, d2)) || !slices.Equal(sk, sk2) {
		t.Fatal("cap result depends on insertion order")
	}
}

func TestWildcardAndPlatformNamespaceClaims(t *testing.T) {
	st := sampleState()
	st.Claims = append(st.Claims,
		Claim{Host: "*.apps.example.com", Account: "acme", App: "shop"},
		Claim{Host: "evil.apps.example.com", Account: "acme", App: "shop"},
		Claim{Host: "a.b.apps.example.com", Account: "acme", App: "shop"},
		Claim{Host: "*.x.apps.example.com", Account: "acme", App: "shop"},
		Claim{Host: "*.example.com", Account: "acme", App: "shop"},     // covers the apex: refused too
		Claim{Host: "*.sub.example.com", Account: "acme", App: "shop"}, // beside the platform domain: allowed
		Claim{Host: "*.*.example.net", Account: "acme", App: "shop"},
		Claim{Host: "*.net", Account: "acme", App: "shop"},
		Claim{Host: "*.example.net", Account: "acme", App: "shop"}, // the platform's own wildcard
	)
	o := opts()
	o.PlatformDomains = []string{"apps.example.com", "example.net"}
	d, sk := requireSameEverywhere(t, st, o)
	if r := routeFor(t, d, "*.sub.example.com"); r == nil || r.Application != "shop" {
		t.Fatalf("*.sub.example.com = %+v, want shop's wildcard route", r)
	}
	if r := routeFor(t, d, "*.shop.example.org"); r == nil {
		t.Fatal("custom wildcard not routed")
	}
	for h, why := range map[string]string{
		"*.apps.example.com":    "is a wildcard of the platform domain apps.example.com",
		"evil.apps.example.com": "is a platform host",
		"a.b.apps.example.com":  "is under the platform domain apps.example.com",
		"*.x.apps.example.com":  "is under the platform domain apps.example.com",
		"*.example.com":         "would cover apps.example.com, a platform domain's apex",
		"*.example.net":         "is a wildcard of the platform domain example.net",
	} {
		if routeFor(t, d, h) != nil {
			t.Errorf("%s routed", h)
		}
		requireSkipped(t, sk, "domains/"+h+".json", why)
		if err := PlatformConflict(h, o.PlatformDomains); err == nil { // the API's rule is the same
			t.Errorf("the API would accept %s", h)
		}
	}
	if !slices.Equal(d.API.Hosts, []string{"apps.example.com", "example.net"}) {
		t.Fatalf("api.hosts = %v", d.API.Hosts)
	}
	requireSkipped(t, sk, "domains/*.*.example.net.json", "first label")
	requireSkipped(t, sk, "domains/*.net.json", "at least two labels")
}

// TestClaimedApexLeavesTheAPI: the API section holds every platform apex no claim
// holds (a claimed apex is its claimant's route, without upstreams while nothing of it
// is ready: out of the API all the same, never flapping), with the denied prefixes, on
// every node's API port in node-name order; none when every apex is claimed, when
// api.public is off, or with no node records.
func TestClaimedApexLeavesTheAPI(t *testing.T) {
	two, off := opts(), opts()
	two.PlatformDomains, off.APIPublic = []string{"apps.example.com", "apps.example.net"}, false
	claim := func(apexes ...string) func(*State) {
		return func(st *State) {
			for _, h := range apexes {
				st.Claims = append(st.Claims, Claim{Host: h, Account: "acme", App: "shop"})
			}
		}
	}
	for _, tc := range []struct {
		name  string
		opt   Options
		edit  func(*State)
		hosts []string // nil: no API section
		ready bool     // apps.example.net's claimant, when claimed
	}{
		{"apps.example.net claimed", two, claim("apps.example.net"), []string{"apps.example.com"}, true},
		{"apps.example.net claimed by an unready application", two, func(st *State) {
			claim("apps.example.net")(st)
			setReady(st, "vps-a", "shop", false)
			setReady(st, "vps-b", "shop", false)
		}, []string{"apps.example.com"}, false},
		{"every apex claimed", two, claim("apps.example.net", "apps.example.com"), nil, true},
		{"api.public off", off, func(*State) {}, nil, false},
		{"no node records", opts(), func(st *State) { st.Nodes = nil }, nil, false},
	} {
		st := sampleState()
		tc.edit(&st)
		d, _ := Derive(st, tc.opt)
		if tc.hosts == nil != (d.API == nil) || d.API != nil &&
			(!slices.Equal(d.API.Hosts, tc.hosts) || !slices.Equal(d.API.Denied, routing.DeniedAPIPrefixes)) {
			t.Errorf("%s: api = %+v, want hosts %v", tc.name, d.API, tc.hosts)
		}
		if r := routeFor(t, d, "apps.example.net"); slices.Contains(tc.opt.PlatformDomains, "apps.example.net") &&
			(r == nil || r.Application != "shop" || (len(r.Upstreams) > 0) != tc.ready) {
			t.Errorf("%s: the claimed apex = %+v, want shop's route (ready %v)", tc.name, r, tc.ready)
		}
	}
	st := sampleState()
	st.Nodes = append(st.Nodes, NodeRecord{Name: "vps-0", Address: "fd00::5", APIPort: 7401, Seen: now})
	d, _ := Derive(st, opts())
	want := []routing.Upstream{
		{Node: "vps-0", Address: "[fd00::5]:7401", APIPort: 7401},
		{Node: "vps-a", Address: "10.83.0.1:7400", APIPort: 7400},
		{Node: "vps-b", Address: "10.83.0.2:7400", APIPort: 7400},
	}
	if !reflect.DeepEqual(d.API.Upstreams, want) {
		t.Fatalf("api upstreams = %+v, want by node name %+v", d.API.Upstreams, want)
	}
}

func TestMalformedObjectsAreSkippedNotFatal(t *testing.T) {
	st := sampleState()
	st.Apps = append(st.Apps,
		App{Name: "Shop2", Account: "acme"},
		App{Name: "twin", Account: "acme", Placement: []string{"vps-a"}},
		App{Name: "twin", Account: "acme", Placement: []string{"vps-b"}},
		App{Name: "noacct", Account: "", Placement: []string{"vps-a"}},
		App{Name: "", Account: "acme"},
	)
	st.Apps[0].Placement = []string{"vps-a", "VPS-B", "vps-a", "vps-b"}
	st.Apps[2].Health = &Health{Path: "healthz"}
	st.Claims = append(st.Claims,
		Claim{Host: "Upper.example", Account: "acme", App: "shop"},
		Claim{Host: "dup.example", Account: "acme", App: "shop"},
		Claim{Host: "dup.example", Account: "tito", App: "tito-go"},
		Claim{Host: "10.0.0.1", Account: "acme", App: "shop"},
	)
	st.Nodes = append(st.Nodes,
		NodeRecord{Name: "vps-c", Address: "vps-c.internal", APIPort: 7400, Seen: now},
		NodeRecord{Name: "vps-d", Address: "10.83.0.4", APIPort: 0, Seen: now},
		NodeRecord{Name: "Vps-E", Address: "10.83.0.5", APIPort: 7400, Seen: now},
	)
	st.Nodes[0].Instances["broken"] = Instance{Port: 70000, Ready: true}
	o := opts()
	o.PlatformDomains = []string{"apps.example.com", "Apps.Example.NET", "localhost", "apps.example.com"}
	d, sk := Derive(st, o)

	for _, tc := range []struct{ object, reason string }{
		{"apps/Shop2.json", "must be lowercase"},
		{"apps/twin.json", `2 objects name application "twin"; all ignored`},
		{"apps/noacct.json", "account \"\": must not be empty"},
		{"apps/.json", "must not be empty"},
		{"apps/shop.json", "placement[1] \"VPS-B\": must be lowercase"},
		{"apps/shop.json", `placement[2] repeats node "vps-a"`},
		{"apps/tito-go.json", "node-delegated health check used instead"},
		{"domains/Upper.example.json", "must be lowercase"},
		{"domains/dup.example.json", `2 claim objects name host "dup.example"; the host is held by no application`},
		{"domains/10.0.0.1.json", "IP literal"},
		{"nodes/vps-c.json", "not an IP address"},
		{"nodes/vps-d.json", "apiPort 0"},
		{"nodes/Vps-E.json", "must be lowercase"},
		{"nodes/vps-a.json", `instance "broken": port 70000`},
		{"platform.domains", `"Apps.Example.NET": must be lowercase`},
		{"platform.domains", `"localhost": must have at least two labels`},
	} {
		requireSkipped(t, sk, tc.object, tc.reason)
	}
	// Everything valid is still routed.
	for _, h := range []string{"shop.apps.example.com", "ti.to", "go.tito.io", "*.shop.example.org"} {
		if routeFor(t, d, h) == nil {
			t.Errorf("%s withdrawn by someone else's malformed object", h)
		}
	}
	if r := routeFor(t, d, "shop.apps.example.com"); !slices.Equal(nodesOf(r.Upstreams), []string{"vps-a", "vps-b"}) {
		t.Errorf("shop upstreams = %v", nodesOf(r.Upstreams))
	}
	if r := routeFor(t, d, "go.tito.io"); r.HealthPath != "" {
		t.Errorf("invalid health path published: %q", r.HealthPath)
	}
	if !slices.Equal(d.API.Hosts, []string{"apps.example.com"}) {
		t.Errorf("api.hosts = %v, want the valid platform domain once", d.API.Hosts)
	}
	if routeFor(t, d, "twin.apps.example.com") != nil {
		t.Error("a duplicated application was routed")
	}
	if r := routeFor(t, d, "dup.example"); r == nil || r.Application != routing.UnownedApplication || len(r.Upstreams) != 0 {
		t.Errorf("dup.example = %+v: a duplicated claim must fail closed, held by nobody", r)
	}
	if _, err := routing.Decode(mustMarshal(t, d)); err != nil {
		t.Fatalf("derived document does not decode: %v", err)
	}
	if !slices.IsSortedFunc(sk, func(a, b Skipped) int {
		return strings.Compare(a.Object+"\x00"+a.Reason, b.Object+"\x00"+b.Reason)
	}) {
		t.Fatal("skipped not sorted")
	}
}

func TestEmptyStateDerivesAnEmptyButSealedDocument(t *testing.T) {
	d, sk := Derive(State{}, opts())
	if got := string(mustMarshal(t, d)); got != `{"v":1,"revision":"`+d.Revision+`","routes":[]}` {
		t.Fatalf("empty state = %s", got)
	}
	if sk == nil || len(sk) != 0 {
		t.Fatalf("skipped = %#v, want an empty non-nil list", sk)
	}
}

func TestPlatformOwner(t *testing.T) {
	domains := []string{"apps.example.com", "example.net"}
	for _, tc := range []struct {
		host  string
		owner string
	}{
		{"shop.apps.example.com", "apps.example.com"},
		{"a.b.apps.example.com", "apps.example.com"},
		{"*.apps.example.com", "apps.example.com"},
		{"x.example.net", "example.net"},
		{"apps.example.com", ""},
		{"example.net", ""},
		{"xapps.example.com", ""},
		{"apps.example.com.evil.org", ""},
		{"ti.to", ""},
	} {
		got, ok := PlatformOwner(tc.host, domains)
		if got != tc.owner || ok != (tc.owner != "") {
			t.Errorf("PlatformOwner(%q) = %q, %v; want %q", tc.host, got, ok, tc.owner)
		}
	}
}

func TestGeneratedStateDerivesCleanly(t *testing.T) {
	st := GenerateState(1000, 10000)
	d, sk := Derive(st, GenerateOptions())
	if len(sk) != 0 {
		t.Fatalf("generated state skips %d objects, first %+v", len(sk), sk[0])
	}
	if n := len(d.Routes); n != 1000+100+20+1 {
		t.Fatalf("%d routes, want 1121", n)
	}
	if r := routeFor(t, d, "ti.to"); r == nil || len(r.Paths) != 10000 {
		t.Fatalf("ti.to carries %d prefixes, want 10000", len(r.Paths))
	}
	if d.API == nil || len(d.API.Upstreams) != 3 {
		t.Fatalf("api = %+v", d.API)
	}
}
