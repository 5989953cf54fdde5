package fleet

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/scafo/ingress/render/routing"
)

// randomFleet is a small fleet where every kind of rule fires now and then: two
// platform domains in two groups, claims with path maps (some across accounts),
// wildcards, stale nodes, unready and foreign instances.
func randomFleet(rnd *rand.Rand) (State, Options) {
	opt := Options{PlatformDomains: []string{"apps.example.com", "eu.example.com"}, APIPublic: true,
		NodeTTL: time.Minute, Now: generatedAt, DomainGroups: map[string]string{"eu.example.com": "eu"}}
	var st State
	nodes := []string{"vps-a", "vps-b", "vps-c", "vps-d"}
	for i, n := range nodes {
		st.Nodes = append(st.Nodes, NodeRecord{Name: n, Address: fmt.Sprintf("10.0.0.%d", i+1), APIPort: 7400,
			Seen: generatedAt, Instances: map[string]Instance{}})
	}
	for i := range 40 {
		a := App{Name: fmt.Sprintf("app-%02d", i), Account: fmt.Sprintf("acct-%d", i%3), ID: "id1"}
		for _, j := range rnd.Perm(len(nodes))[:1+rnd.IntN(3)] {
			a.Placement = append(a.Placement, nodes[j])
			st.Nodes[j].Instances[a.Name] = Instance{Port: 20000 + rnd.IntN(100), Ready: rnd.IntN(10) > 0, AppID: "id1"}
		}
		if rnd.IntN(3) == 0 {
			a.Health = &Health{Path: "/healthz"}
		}
		if rnd.IntN(5) == 0 {
			a.Ingress = &Ingress{Group: "eu"}
		}
		st.Apps = append(st.Apps, a)
	}
	for i := range 12 {
		app := st.Apps[rnd.IntN(len(st.Apps))]
		c := Claim{Host: fmt.Sprintf("c%d.example.org", i), Account: app.Account, App: app.Name}
		if rnd.IntN(4) == 0 {
			c.Host = fmt.Sprintf("*.w%d.example.org", i%3)
		}
		if rnd.IntN(2) == 0 {
			c.Paths = map[string]string{}
			for k := range 1 + rnd.IntN(4) {
				t := st.Apps[rnd.IntN(len(st.Apps))]
				c.Paths[fmt.Sprintf("p%d", k)] = t.Name + ".apps.example.com"
			}
		}
		st.Claims = append(st.Claims, c)
	}
	return st, opt
}

// change applies one random edit to st (a copy: changed objects are new values) and
// returns the keys it changed, as the node's one-step read names them.
func change(rnd *rand.Rand, st State, opt *Options) (State, []string) {
	st.Apps, st.Nodes, st.Claims = slices.Clone(st.Apps), slices.Clone(st.Nodes), slices.Clone(st.Claims)
	node := func() (*NodeRecord, string) {
		n := &st.Nodes[rnd.IntN(len(st.Nodes))]
		n.Instances = maps.Clone(n.Instances)
		return n, NodeKey(n.Name)
	}
	app := func() (*App, string) {
		a := &st.Apps[rnd.IntN(len(st.Apps))]
		return a, AppKey(a.Name)
	}
	switch k := rnd.IntN(100); {
	case k < 30: // an instance's port, readiness, incarnation; added or removed
		n, key := node()
		a := st.Apps[rnd.IntN(len(st.Apps))].Name
		in := n.Instances[a]
		switch rnd.IntN(6) {
		case 0:
			delete(n.Instances, a)
		case 1:
			in.Ready = !in.Ready
			n.Instances[a] = in
		case 2:
			in.AppID = "id2"
			n.Instances[a] = in
		case 3:
			in.Port = 70000 // invalid: reported
			n.Instances[a] = in
		default:
			in.Port, in.Ready, in.AppID = 20000+rnd.IntN(100), true, "id1"
			n.Instances[a] = in
		}
		if rnd.IntN(5) == 0 { // a second instance in the same write
			b := st.Apps[rnd.IntN(len(st.Apps))].Name
			n.Instances[b] = Instance{Port: 30000 + rnd.IntN(100), Ready: true, AppID: "id1"}
		}
		return st, []string{key}
	case k < 50: // an application's placement, health path or middlewares
		a, key := app()
		switch rnd.IntN(6) {
		case 0:
			a.Placement = slices.Clone(a.Placement)
			slices.Reverse(a.Placement)
		case 1:
			a.Placement = append(slices.Clone(a.Placement), st.Nodes[rnd.IntN(len(st.Nodes))].Name)
		case 2:
			a.Health = &Health{Path: fmt.Sprintf("/h%d", rnd.IntN(3))}
		case 3:
			a.Health = &Health{Path: "no-slash"} // invalid: reported
		case 4: // the path routers of other applications that select it move too
			a.Middlewares = [][]string{nil, {"auth@file"}, {"auth@file", "www@file"}, {"www@file", "auth@file"}, {"auth"}}[rnd.IntN(5)]
		default:
			a.ID = "id2"
		}
		return st, []string{key}
	case k < 55: // account or group
		a, key := app()
		if rnd.IntN(2) == 0 {
			a.Account = "acct-9"
		} else {
			a.Ingress = &Ingress{Group: "eu"}
		}
		return st, []string{key}
	case k < 62: // a claim
		c := &st.Claims[rnd.IntN(len(st.Claims))]
		c.App = st.Apps[rnd.IntN(len(st.Apps))].Name
		return st, []string{ClaimKey(c.Host)}
	case k < 65: // a node's address
		n, key := node()
		n.Address = fmt.Sprintf("10.0.1.%d", rnd.IntN(200))
		return st, []string{key}
	case k < 72: // time passes; heartbeats
		opt.Now = opt.Now.Add(time.Duration(rnd.IntN(40)) * time.Second)
		for i := range st.Nodes {
			if rnd.IntN(3) == 0 {
				st.Nodes[i].Seen = opt.Now
			}
		}
		return st, []string{}
	case k < 75: // an application added or removed
		if rnd.IntN(2) == 0 {
			i := rnd.IntN(len(st.Apps))
			key := AppKey(st.Apps[i].Name)
			st.Apps = slices.Delete(st.Apps, i, i+1)
			return st, []string{key}
		}
		a := App{Name: fmt.Sprintf("app-%02dx", rnd.IntN(40)), Account: "acct-1", Placement: []string{"vps-a"}}
		if _, found := slices.BinarySearchFunc(st.Apps, a.Name, func(x App, n string) int { return CompareAsKeys(x.Name, n) }); found {
			return st, []string{}
		}
		st.Apps = append(st.Apps, a)
		slices.SortFunc(st.Apps, func(x, y App) int { return CompareAsKeys(x.Name, y.Name) })
		return st, []string{AppKey(a.Name)}
	case k < 78: // nothing known
		return st, nil
	default: // several applications' instances and records at once
		n, nkey := node()
		a, akey := app()
		n.Instances[a.Name] = Instance{Port: 20000 + rnd.IntN(100), Ready: true, AppID: a.ID}
		a.Placement = append(slices.Clone(a.Placement), n.Name)
		return st, []string{nkey, akey}
	}
}

// TestDeriverEqualsDeriveAfterRandomChanges: after every random change, the Deriver's
// document and report are Derive's, byte for byte, and a delta says exactly what moved.
// The patch must serve a good share of the changes (about one in five moves routes by a
// patch; most others are kinds it leaves to a full derivation), or this test would prove
// nothing about it.
func TestDeriverEqualsDeriveAfterRandomChanges(t *testing.T) {
	deriveAlongside(t, 60, 13, randomFleet, change, 6)
}

// deriveAlongside runs seeds fleets of 80 changes each (made by fleet and next) through
// a Deriver and Derive side by side: documents, revisions and reports must be equal
// after every change, and each delta must name exactly the routes that moved. At least
// one change in share must be patched, or the patch is not what was tested.
func deriveAlongside(t *testing.T, seeds, stream uint64, fleet func(*rand.Rand) (State, Options),
	next func(*rand.Rand, State, *Options) (State, []string), share int) {
	t.Helper()
	patched, steps := 0, 0
	for seed := range seeds {
		rnd := rand.New(rand.NewPCG(seed, stream))
		st, opt := fleet(rnd)
		var x Deriver
		var changed []string
		for step := range 80 {
			steps++
			doc, sk, delta := x.Derive(st, opt, changed)
			want, wantSk := Derive(st, opt)
			if !bytes.Equal(mustMarshal(t, doc), mustMarshal(t, want)) || doc.Revision != want.Revision {
				t.Fatalf("seed %d step %d (changed %v): the Deriver's document differs from Derive's:\n%s\n%s",
					seed, step, changed, mustMarshal(t, doc), mustMarshal(t, want))
			}
			if !reflect.DeepEqual(sk, wantSk) {
				t.Fatalf("seed %d step %d (changed %v): report %v, Derive's %v", seed, step, changed, sk, wantSk)
			}
			if delta != nil {
				patched++
				checkDelta(t, doc, delta)
			}
			st, changed = next(rnd, st, &opt)
		}
	}
	if patched < steps/share {
		t.Fatalf("the patch served %d of %d changes: the test does not exercise it", patched, steps)
	}
	t.Logf("%d of %d changes patched", patched, steps)
}

// checkDelta verifies that doc is delta.Base but for the upstreams and health paths of
// the routes delta names, each of which moved.
func checkDelta(t *testing.T, doc *routing.Document, delta *routing.Delta) {
	t.Helper()
	base := delta.Base
	if len(doc.Routes) != len(base.Routes) || !reflect.DeepEqual(doc.API, base.API) || len(delta.Changed) == 0 ||
		!slices.IsSorted(delta.Changed) {
		t.Fatalf("delta %v: the frame moved", delta.Changed)
	}
	for i := range doc.Routes {
		r, b := doc.Routes[i], base.Routes[i]
		if _, named := slices.BinarySearch(delta.Changed, i); !named {
			if !reflect.DeepEqual(r, b) {
				t.Fatalf("route %d (%s) moved but the delta does not name it", i, r.Host)
			}
			continue
		}
		if r.Host != b.Host || r.Application != b.Application || r.Group != b.Group || !maps.Equal(r.Paths, b.Paths) {
			t.Fatalf("route %d: more than upstreams and health path moved: %+v → %+v", i, b, r)
		}
		if r.HealthPath == b.HealthPath && slices.Equal(r.Upstreams, b.Upstreams) {
			t.Fatalf("route %d (%s) is named but did not move", i, r.Host)
		}
	}
}

// TestDeriverKeepsItsDocumentWhenAFullReadFindsNothingNew: a whole derivation of the
// same content returns the last document itself, which the caller published and
// rendered, so the next change is still patched from it (and renders from its body).
func TestDeriverKeepsItsDocumentWhenAFullReadFindsNothingNew(t *testing.T) {
	st, opt := GenerateState(50, 10), GenerateOptions()
	var x Deriver
	first, _, _ := x.Derive(st, opt, nil)
	again, _, delta := x.Derive(st, opt, nil) // a full read: nothing known
	if again != first || delta != nil {
		t.Fatalf("a full derivation of the same state made a new document (%p, was %p)", again, first)
	}
	st.Nodes = slices.Clone(st.Nodes)
	st.Nodes[1].Instances = maps.Clone(st.Nodes[1].Instances)
	st.Nodes[1].Instances[st.Apps[4].Name] = Instance{Port: 40404, Ready: true}
	next, _, delta := x.Derive(st, opt, []string{NodeKey(st.Nodes[1].Name)})
	if delta == nil || delta.Base != first || next == first {
		t.Fatalf("the next change was not patched from the published document: delta %v", delta)
	}
}
