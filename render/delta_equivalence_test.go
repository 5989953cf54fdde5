package render

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// hostileDelta makes a document from base as a delta would describe it, but with what
// the Deriver never sends and a caller could: upstream lists of any length (none: the
// deny service; one; several: chains renamed, the automatic interval moved), upstreams
// without API port, bad health paths, middlewares changed (good and bad references),
// several applications at once (path-map targets among them), and sometimes only some
// of an application's routes named.
func hostileDelta(r *rand.Rand, base *routing.Document) (*routing.Document, *routing.Delta) {
	doc := &routing.Document{V: base.V, Routes: slices.Clone(base.Routes), API: base.API}
	apps := map[string]bool{}
	for range 1 + r.IntN(3) {
		var name string
		if r.IntN(3) == 0 { // a path-map target of ti.to, or ti.to's own application
			name = fmt.Sprintf("app-%05d", 100*r.IntN(3))
		} else {
			name = base.Routes[r.IntN(len(base.Routes))].Application
		}
		apps[name] = true
	}
	nodes := []string{"vps-a", "vps-b", "vps-c", "vps-d"}
	var changed []int
	mwChanged := false
	for app := range apps {
		var ups []routing.Upstream
		for _, j := range r.Perm(len(nodes))[:r.IntN(4)] {
			u := routing.Upstream{Node: nodes[j], Address: fmt.Sprintf("10.83.0.%d:%d", j+1, 20000+r.IntN(30)), APIPort: 7400}
			if r.IntN(40) == 0 {
				u.APIPort = 0
			}
			ups = append(ups, u)
		}
		if ups == nil {
			ups = []routing.Upstream{}
		}
		health := []string{"", "", "/healthz", "/h1", "bad"}[r.IntN(5)]
		if health == "bad" && r.IntN(4) != 0 {
			health = "/h2"
		}
		// Middlewares change in one change of four, and such a change comes without a
		// delta, as the Deriver sends it (it derives the whole state): the
		// application's own routers, and the path routers of other applications'
		// hosts that select it, carry them, so every fragment that names it must be
		// rendered again. A bad reference now and then: the error is the full
		// render's. The later deltas patch documents that carry middlewares.
		mwChange := r.IntN(4) == 0
		mw := [][]string{nil, {"auth@file"}, {"auth@file", "www-redirect@file"}, {"www-redirect@file", "auth@file"}, {"auth"}}[r.IntN(5)]
		if len(mw) == 1 && mw[0] == "auth" && r.IntN(4) != 0 {
			mw = []string{"ratelimit@docker"}
		}
		for i := range doc.Routes {
			if doc.Routes[i].Application != app || app == routing.UnownedApplication {
				continue
			}
			if r.IntN(30) == 0 {
				continue // not named: the application's routes disagree, or do not
			}
			doc.Routes[i].Upstreams, doc.Routes[i].HealthPath = ups, health
			if mwChange {
				doc.Routes[i].Middlewares = mw
				mwChanged = true
			}
			changed = append(changed, i)
		}
	}
	slices.Sort(changed)
	doc.Seal()
	if mwChanged {
		return doc, nil
	}
	return doc, &routing.Delta{Base: base, Changed: changed}
}

// TestDeltaRenderOfHostileDeltasEqualsFullRender feeds Render deltas the Deriver
// would not make (see hostileDelta), with prefer and group outputs of the same
// Incremental interleaved: every body and every error is the full render's.
func TestDeltaRenderOfHostileDeltasEqualsFullRender(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: runs beside the other long render tests
	for _, opt := range []Options{{}, {HealthCheckInterval: "7s", PathGroupThreshold: 3}} {
		for seed := range uint64(4) {
			r := rand.New(rand.NewPCG(seed, 7))
			st, fopt := fleet.GenerateState(500, 120), fleet.GenerateOptions()
			fleet.GenerateGroup(&st, &fopt, "eu", "eu.example.com", func(i int) bool { return i%7 == 3 })
			doc, _ := fleet.Derive(st, fopt)
			var fc *FleetCerts
			if seed%2 == 1 {
				fc = fleetCertsWith(&FleetCerts{Managed: map[string]bool{}}, "app-00010.apps.example.com", true, 1)
			}
			inc, err := NewIncremental(opt)
			if err != nil {
				t.Fatal(err)
			}
			var delta *routing.Delta
			good := doc
			patched := 0
			for step := range 150 {
				at := fmt.Sprintf("opt %+v seed %d step %d", opt, seed, step)
				body, gerr := inc.Render(Request{Doc: doc, Delta: delta, Certs: fc})
				want, werr := TraefikFleet(doc, opt, fc)
				if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
					t.Fatalf("%s: errors differ: full %v, delta %v", at, werr, gerr)
				}
				if werr == nil && string(body.Bytes()) != string(want) {
					got := body.Bytes()
					i := firstDiff(got, want)
					t.Fatalf("%s (changed %v): delta render differs from the full render at byte %d\nfull:  %s\ndelta: %s", at, delta.Changed, i, excerpt(want, i), excerpt(got, i))
				}
				if len(body) > 1 {
					patched++
				}
				switch r.IntN(8) {
				case 0:
					compareRenders(t, at, inc, opt, doc, nil, "vps-b", fc)
				case 1:
					compareRenders(t, at, inc, opt, doc, []string{"eu"}, "", fc)
				case 2:
					compareRenders(t, at, inc, opt, doc, []string{"default"}, "vps-a", fc)
				}
				switch r.IntN(12) {
				case 0: // fleet certificates come or go
					if fc == nil {
						fc = fleetCertsWith(&FleetCerts{Managed: map[string]bool{}}, "app-00020.apps.example.com", true, step)
					} else {
						fc = nil
					}
				case 1: // a new set: a certificate renewed, another name managed
					fc = fleetCertsWith(fc, fmt.Sprintf("app-%05d.apps.example.com", r.IntN(40)), r.IntN(2) == 0, step)
				}
				if werr == nil {
					good = doc
				}
				// The node keeps serving the last good document; the next delta builds
				// on what this output last rendered.
				doc, delta = hostileDelta(r, good)
			}
			t.Logf("opt %+v seed %d: %d of 150 renders patched", opt, seed, patched)
			if patched < 20 {
				t.Fatalf("opt %+v seed %d: only %d renders patched: the test does not exercise the delta render", opt, seed, patched)
			}
		}
	}
}

// TestConcurrentDeltaRendersEqualFullRenders renders a chain of patched documents from
// several goroutines at once, in any order (a node's long-polls wake together, and an
// evicted older snapshot renders again after a newer one), beside prefer outputs of the
// same Incremental: every body is the full render of its document.
func TestConcurrentDeltaRendersEqualFullRenders(t *testing.T) {
	st := fleet.GenerateState(400, 60)
	fopt := fleet.GenerateOptions()
	r := rand.New(rand.NewPCG(5, 5))
	var x fleet.Deriver
	type step struct {
		doc   *routing.Document
		delta *routing.Delta
		want  []byte
	}
	var chain []step
	var changed []string
	for n := range 60 {
		doc, _, delta := x.Derive(st, fopt, changed)
		want, err := TraefikFleet(doc, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, step{doc, delta, want})
		changed = deltaEdit(r, &st, n)
	}
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for g := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 80 {
				i := r.IntN(len(chain))
				if g == 0 { // mostly in order, as the publisher renders
					i = min(len(chain)-1, i/4+r.IntN(3))
				}
				s := chain[i]
				if g == 3 {
					if _, err := rendered(inc, Request{Doc: s.doc, Output: "vps-b"}); err != nil {
						done <- err
						return
					}
					continue
				}
				body, err := inc.Render(Request{Doc: s.doc, Delta: s.delta})
				if err != nil {
					done <- err
					return
				}
				if got := body.Bytes(); string(got) != string(s.want) {
					at := firstDiff(got, s.want)
					done <- fmt.Errorf("document %d: the delta render differs at byte %d\nfull:  %s\ndelta: %s", i, at, excerpt(s.want, at), excerpt(got, at))
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeltaRenderSurvivesOtherOutputsRenders: a node serves the default output (delta
// renders) beside ?group= outputs (full renders of their selections). The fragments
// of applications only the default output holds must not be swept from the cache while
// its body still holds them, or every change to such an application falls back to a
// full render of the default output that renders those fragments again from nothing
// (the cost of a cold render, at every change).
func TestDeltaRenderSurvivesOtherOutputsRenders(t *testing.T) {
	st, fopt := fleet.GenerateState(300, 0), fleet.GenerateOptions()
	fleet.GenerateGroup(&st, &fopt, "eu", "eu.example.com", func(i int) bool { return i%10 == 0 })
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var x fleet.Deriver
	var changed []string
	fallbacks := 0
	for step := range 30 {
		doc, _, delta := x.Derive(st, fopt, changed)
		at := fmt.Sprintf("step %d", step)
		for range 3 { // the group outputs' renders of this document (e.g. two prefers)
			compareRenders(t, at, inc, Options{}, doc, []string{"eu"}, "", nil)
		}
		body, err := inc.Render(Request{Doc: doc, Delta: delta})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := TraefikFleet(doc, Options{}, nil)
		if string(body.Bytes()) != string(want) {
			t.Fatalf("%s: the delta render differs from the full render", at)
		}
		if step > 0 && len(body) == 1 {
			fallbacks++
		}
		// An instance port of an application of the default group moves.
		st.Nodes = slices.Clone(st.Nodes)
		i := (step*7)%300 | 1 // odd: never in group eu
		n := &st.Nodes[i%3]   // its primary
		n.Instances = maps.Clone(n.Instances)
		app := fmt.Sprintf("app-%05d", i)
		in, ok := n.Instances[app]
		if !ok {
			t.Fatalf("%s has no instance on %s", app, n.Name)
		}
		in.Port++
		n.Instances[app] = in
		changed = []string{fleet.NodeKey(n.Name)}
	}
	if fallbacks > 0 {
		t.Fatalf("%d of 29 one-application changes fell back to a full render of the default output", fallbacks)
	}
}
