package render

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// deltaEdit applies one random edit to st as the store would: every object it changes
// is a new value (the Deriver keeps the old ones), and it returns the keys changed.
// Most edits move upstreams or health paths (what a delta render serves); the rest
// force full renders in between (claims, new applications, fleet certificates).
func deltaEdit(r *rand.Rand, st *fleet.State, n int) []string {
	st.Apps, st.Nodes, st.Claims = slices.Clone(st.Apps), slices.Clone(st.Nodes), slices.Clone(st.Claims)
	app := &st.Apps[r.IntN(len(st.Apps))]
	node := &st.Nodes[r.IntN(len(st.Nodes))]
	switch k := r.IntN(20); {
	case k < 8: // an instance's port (same length, or not), a second one in the same write
		node.Instances = maps.Clone(node.Instances)
		if in, ok := node.Instances[app.Name]; ok {
			in.Port = 1 + r.IntN(65535)
			node.Instances[app.Name] = in
		}
		if r.IntN(4) == 0 {
			b := st.Apps[r.IntN(len(st.Apps))].Name
			if in, ok := node.Instances[b]; ok {
				in.Port = 20000 + r.IntN(1000)
				node.Instances[b] = in
			}
		}
		return []string{fleet.NodeKey(node.Name)}
	case k < 10: // readiness: the upstream count moves (a full render when it renames)
		node.Instances = maps.Clone(node.Instances)
		if in, ok := node.Instances[app.Name]; ok {
			in.Ready = !in.Ready
			node.Instances[app.Name] = in
		}
		return []string{fleet.NodeKey(node.Name)}
	case k < 13: // placement order: the primary moves
		app.Placement = slices.Clone(app.Placement)
		slices.Reverse(app.Placement)
		return []string{fleet.AppKey(app.Name)}
	case k < 16: // health path
		if app.Health == nil || r.IntN(3) == 0 {
			app.Health = &fleet.Health{Path: fmt.Sprintf("/h%d", r.IntN(4))}
		} else {
			app.Health = nil
		}
		return []string{fleet.AppKey(app.Name)}
	case k < 17: // a prefix of ti.to flips target
		for i := range st.Claims {
			if c := &st.Claims[i]; c.Host == "ti.to" {
				c.Paths = maps.Clone(c.Paths)
				c.Paths[fmt.Sprintf("p%05d", r.IntN(len(c.Paths)+1))] = fmt.Sprintf("app-%05d.apps.example.com", 100*r.IntN(len(st.Apps)/100+1))
				return []string{fleet.ClaimKey(c.Host)}
			}
		}
		return []string{}
	case k < 18: // an application joins
		name := fmt.Sprintf("zz-%d", n)
		st.Apps = append(st.Apps, fleet.App{Name: name, Account: "acct-001", Placement: []string{node.Name}})
		node.Instances = maps.Clone(node.Instances)
		node.Instances[name] = fleet.Instance{Port: 31000 + n, Ready: true}
		return []string{fleet.AppKey(name), fleet.NodeKey(node.Name)}
	default: // nothing changed that the caller knows of
		return nil
	}
}

// TestDeltaRenderEqualsFullRender renders a generated fleet through fleet.Deriver and
// Render (with its delta) change after change, and holds every body to the full render's bytes,
// with automatic and fixed intervals (retries on, and off), with and without fleet
// certificates, and with a second output (a ?prefer=) and full renders of the same
// output interleaved. Most
// changes must be served by the delta render (bodies in more than one piece), or this
// would test only the fallback.
func TestDeltaRenderEqualsFullRender(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: runs beside the other long render tests
	for _, opt := range []Options{{}, {HealthCheckInterval: "7s", PathGroupThreshold: 3, RetryAttempts: 1}} {
		for seed := range uint64(4) {
			r := rand.New(rand.NewPCG(seed, 99))
			st := fleet.GenerateState(600+int(seed)*300, 300)
			fopt := fleet.GenerateOptions()
			var fc *FleetCerts
			if seed%2 == 1 {
				fc = fleetCertsWith(&FleetCerts{Managed: map[string]bool{}}, "app-00010.apps.example.com", true, 1)
			}
			inc, err := NewIncremental(opt)
			if err != nil {
				t.Fatal(err)
			}
			var x fleet.Deriver
			var changed []string
			patched, preferPatched, steps := 0, 0, 120
			for step := range steps {
				doc, _, delta := x.Derive(st, fopt, changed)
				at := fmt.Sprintf("opt %+v seed %d step %d (changed %v)", opt, seed, step, changed)
				body, err := inc.Render(Request{Doc: doc, Delta: delta, Certs: fc})
				if err != nil {
					t.Fatalf("%s: %v", at, err)
				}
				want, err := TraefikFleet(doc, opt, fc)
				if err != nil {
					t.Fatal(err)
				}
				if got := body.Bytes(); string(got) != string(want) {
					i := firstDiff(got, want)
					t.Fatalf("%s: delta render differs from the full render at byte %d\nfull:  %s\ndelta: %s", at, i, excerpt(want, i), excerpt(got, i))
				}
				if len(body) > 1 {
					patched++
				}
				// The ?prefer= output of a node, patched from its own last body.
				pbody, err := inc.Render(Request{Doc: doc, Delta: delta, Prefer: "vps-b", Output: "prefer|vps-b", Certs: fc})
				if err != nil {
					t.Fatalf("%s: prefer: %v", at, err)
				}
				pwant, err := TraefikFleet(mustPreferDoc(t, doc, "vps-b"), opt, fc)
				if err != nil {
					t.Fatal(err)
				}
				if got := pbody.Bytes(); string(got) != string(pwant) {
					i := firstDiff(got, pwant)
					t.Fatalf("%s: prefer delta render differs from the full render at byte %d\nfull:  %s\ndelta: %s", at, i, excerpt(pwant, i), excerpt(got, i))
				}
				if len(pbody) > 1 {
					preferPatched++
				}
				switch r.IntN(10) {
				case 0: // another output of the same Incremental, from a full render
					compareRenders(t, at, inc, opt, doc, nil, "vps-b", fc)
				case 1: // the same output rendered in full: the next delta starts again
					compareRenders(t, at, inc, opt, doc, nil, "", fc)
				}
				changed = deltaEdit(r, &st, step)
			}
			t.Logf("seed %d: %d of %d renders were delta renders, %d of the prefer output's", seed, patched, steps, preferPatched)
			if patched < steps/3 || preferPatched < steps/3 {
				t.Fatalf("opt %+v seed %d: %d of %d renders were delta renders, %d of the prefer output's", opt, seed, patched, steps, preferPatched)
			}
		}
	}
}

// TestDeltaRenderRefusesWhatTheFullRenderRefuses: a changed route that breaks a rule
// gets the full render's error, and the output's next render is still right.
func TestDeltaRenderRefusesWhatTheFullRenderRefuses(t *testing.T) {
	st := fleet.GenerateState(300, 50)
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fleet.GenerateOptions(), nil)
	inc, _ := NewIncremental(Options{})
	if _, err := inc.Render(Request{Doc: doc}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(r *routing.Route)
	}{
		{"an upstream without API port", func(r *routing.Route) { r.HealthPath, r.Upstreams[0].APIPort = "", 0 }},
		{"a health path without slash", func(r *routing.Route) { r.HealthPath = "healthz" }},
		{"an upstream address that is no address", func(r *routing.Route) { r.Upstreams[0].Address = "nowhere" }},
	} {
		bad := &routing.Document{V: doc.V, Routes: slices.Clone(doc.Routes), API: doc.API}
		i := slices.IndexFunc(bad.Routes, func(r routing.Route) bool { return r.Host == "app-00003.apps.example.com" })
		bad.Routes[i].Upstreams = slices.Clone(bad.Routes[i].Upstreams)
		tc.edit(&bad.Routes[i])
		bad.Seal()
		_, want := TraefikFleet(bad, Options{}, nil)
		_, got := inc.Render(Request{Doc: bad, Delta: &routing.Delta{Base: doc, Changed: []int{i}}})
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Fatalf("%s: delta render error %v, full render's %v", tc.name, got, want)
		}
	}
	body, err := inc.Render(Request{Doc: doc})
	want, _ := Traefik(doc, Options{})
	if err != nil || string(body.Bytes()) != string(want) {
		t.Fatalf("after refusals the output renders wrong: %v", err)
	}
}

func mustPreferDoc(t *testing.T, doc *routing.Document, node string) *routing.Document {
	t.Helper()
	d, err := routing.Prefer(doc, node)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestGroupDeltaRenderEqualsFullRender: ingress groups, as a node serves ?group=. The
// selection's document is patched with routing.ForGroupsDelta from the last one (held
// to routing.ForGroups byte for byte, revision included), and rendered with
// Render (Groups), with and without prefer, every body held to TraefikGroups'. A
// third of the applications are in group eu (platform domain eu.example.com); ti.to's
// prefixes point at hosts of both groups, so a selection carries another group's
// targets.
func TestGroupDeltaRenderEqualsFullRender(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: runs beside the other long render tests
	opt := Options{}
	r := rand.New(rand.NewPCG(5, 13))
	st, fopt := fleet.GenerateState(900, 300), fleet.GenerateOptions()
	fleet.GenerateGroup(&st, &fopt, "eu", "eu.example.com", func(i int) bool { return i%3 == 1 })
	for i := range st.Claims {
		if c := &st.Claims[i]; c.Host == "ti.to" {
			for k := range 40 { // targets in eu: app-00100 is group eu (100 % 3 == 1)
				c.Paths[fmt.Sprintf("p%05d", k)] = fmt.Sprintf("app-%05d.eu.example.com", 100*(1+3*(k%3)))
			}
		}
	}
	inc, err := NewIncremental(opt)
	if err != nil {
		t.Fatal(err)
	}
	type lineage struct {
		base, doc *routing.Document
		blocks    routing.Blocks
	}
	selections := [][]string{{"default"}, {"eu"}, {"default", "eu"}}
	last := map[string]lineage{}
	var x fleet.Deriver
	var changed []string
	patched := map[string]int{}
	for step := range 100 {
		doc, _, delta := x.Derive(st, fopt, changed)
		for _, sel := range selections {
			key := strings.Join(sel, ",")
			var gdoc *routing.Document
			var blocks routing.Blocks
			var gdelta *routing.Delta
			if l, ok := last[key]; ok && delta != nil && l.base == delta.Base {
				gdoc, blocks, gdelta = routing.ForGroupsDelta(doc, sel, l.doc, l.blocks, delta)
				want := routing.ForGroups(doc, sel)
				if string(mustMarshalDoc(t, gdoc)) != string(mustMarshalDoc(t, want)) || gdoc.Revision != want.Revision {
					t.Fatalf("step %d %v: ForGroupsDelta differs from ForGroups", step, sel)
				}
			} else {
				gdoc, blocks = routing.ForGroupsBlocks(doc, sel)
			}
			last[key] = lineage{doc, gdoc, blocks}
			for _, prefer := range []string{"", "vps-a"} {
				at := fmt.Sprintf("step %d %v prefer %q (changed %v)", step, sel, prefer, changed)
				body, err := inc.Render(Request{Doc: gdoc, Delta: gdelta, Prefer: prefer, Output: prefer + "|" + key, Groups: sel})
				if err != nil {
					t.Fatalf("%s: %v", at, err)
				}
				want, err := TraefikGroups(mustPreferDoc(t, gdoc, prefer), opt, sel, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := body.Bytes(); string(got) != string(want) {
					i := firstDiff(got, want)
					t.Fatalf("%s: group delta render differs from the full render at byte %d\nfull:  %s\ndelta: %s", at, i, excerpt(want, i), excerpt(got, i))
				}
				if len(body) > 1 {
					patched[key+"|"+prefer]++
				}
			}
		}
		changed = deltaEdit(r, &st, step)
	}
	for _, sel := range selections {
		for _, prefer := range []string{"", "vps-a"} {
			if n := patched[strings.Join(sel, ",")+"|"+prefer]; n < 10 {
				t.Errorf("selection %v prefer %q: %d of 100 renders were delta renders", sel, prefer, n)
			}
		}
	}
	t.Logf("delta renders per output: %v", patched)
}

func mustMarshalDoc(t *testing.T, d *routing.Document) []byte {
	t.Helper()
	b, err := routing.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
