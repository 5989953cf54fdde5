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

// TestPreferAndGroupDeltaRendersOfHostileDeltasEqualFullRender is the hostile delta
// test for the ?prefer= and ?group= outputs: every step renders the default output, two
// prefer outputs and three selections (with and without prefer) through
// Render (Prefer, Groups), the selections patched with
// routing.ForGroupsDelta from their last document as the node patches them, on deltas
// the Deriver would not make (hostileDelta: refusals, renamed chains, moved intervals,
// the deny service, partial applications), with fleet certificates coming and going.
// Every body and every error is the full render's of routing.Prefer(routing.ForGroups(
// doc, sel), prefer).
func TestPreferAndGroupDeltaRendersOfHostileDeltasEqualFullRender(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: runs beside the other long render tests
	type lineage struct {
		base, doc *routing.Document
		blocks    routing.Blocks
	}
	type out struct {
		sel    []string
		prefer string
	}
	outs := []out{{nil, ""}, {nil, "vps-b"}, {nil, "vps-d"}, {[]string{"eu"}, ""}, {[]string{"eu"}, "vps-a"}, {[]string{"default"}, "vps-c"}, {[]string{"default", "eu"}, "vps-b"}}
	total := map[string]int{}
	for _, opt := range []Options{{}, {HealthCheckInterval: "7s", PathGroupThreshold: 3}} {
		for seed := range uint64(3) {
			r := rand.New(rand.NewPCG(seed, 71))
			st, fopt := fleet.GenerateState(400, 100), fleet.GenerateOptions()
			fleet.GenerateGroup(&st, &fopt, "eu", "eu.example.com", func(i int) bool {
				return i%7 == 3 || (i%100 == 0 && i > 0) // app-00100, app-00200: ti.to's targets in eu
			})
			for i := range st.Claims {
				if c := &st.Claims[i]; c.Host == "ti.to" { // app-00000's (default): prefixes into eu
					for k := range 30 {
						c.Paths[fmt.Sprintf("eu%05d", k)] = fmt.Sprintf("app-%05d.eu.example.com", 100*(1+k%2))
					}
				}
			}
			doc, _ := fleet.Derive(st, fopt)
			if n := len(routing.ForGroups(doc, []string{"default"}).Routes) - len(routing.ForGroups(doc, []string{"default", "eu"}).Routes) + len(routing.ForGroups(doc, []string{"eu"}).Routes); n < 2 {
				t.Fatalf("selection default carries %d targets of eu: the test does not exercise path targets of another group", n)
			}
			var fc *FleetCerts
			inc, err := NewIncremental(opt)
			if err != nil {
				t.Fatal(err)
			}
			last := map[string]lineage{}
			var delta *routing.Delta
			good := doc
			patched := map[string]int{}
			for step := range 120 {
				failed := false
				for _, o := range r.Perm(len(outs)) {
					sel, prefer := outs[o].sel, outs[o].prefer
					key := strings.Join(sel, ",")
					at := fmt.Sprintf("opt %+v seed %d step %d sel %v prefer %q", opt, seed, step, sel, prefer)
					gdoc, gdelta := doc, delta
					if sel != nil {
						var blocks routing.Blocks
						if l, ok := last[key]; ok && delta != nil && l.base == delta.Base {
							gdoc, blocks, gdelta = routing.ForGroupsDelta(doc, sel, l.doc, l.blocks, delta)
						} else {
							gdoc, blocks = routing.ForGroupsBlocks(doc, sel)
							gdelta = nil
						}
						if want := routing.ForGroups(doc, sel); gdoc.Revision != want.Revision {
							t.Fatalf("%s: ForGroupsDelta's revision %s, ForGroups' %s", at, gdoc.Revision, want.Revision)
						}
						last[key] = lineage{doc, gdoc, blocks}
					}
					var body Body
					var gerr error
					if sel == nil {
						body, gerr = inc.Render(Request{Doc: gdoc, Delta: gdelta, Prefer: prefer, Output: prefer, Certs: fc})
					} else {
						body, gerr = inc.Render(Request{Doc: gdoc, Delta: gdelta, Prefer: prefer, Output: prefer + "|" + key, Groups: sel, Certs: fc})
					}
					pdoc, perr := routing.Prefer(routing.ForGroups(doc, sel), prefer)
					if sel == nil {
						pdoc, perr = routing.Prefer(doc, prefer)
					}
					if perr != nil {
						t.Fatal(perr)
					}
					var want []byte
					var werr error
					if sel == nil {
						want, werr = TraefikFleet(pdoc, opt, fc)
					} else {
						want, werr = TraefikGroups(pdoc, opt, sel, fc)
					}
					if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
						t.Fatalf("%s: errors differ: full %v, delta %v", at, werr, gerr)
					}
					failed = failed || werr != nil
					if werr == nil && string(body.Bytes()) != string(want) {
						got := body.Bytes()
						i := firstDiff(got, want)
						t.Fatalf("%s: delta render differs from the full render at byte %d\nfull:  %s\ndelta: %s", at, i, excerpt(want, i), excerpt(got, i))
					}
					if len(body) > 1 {
						patched[key+"|"+prefer]++
					}
				}
				switch r.IntN(14) {
				case 0:
					if fc == nil {
						fc = fleetCertsWith(&FleetCerts{Managed: map[string]bool{}}, "app-00020.apps.example.com", true, step)
					} else {
						fc = nil
					}
				case 1:
					fc = fleetCertsWith(fc, fmt.Sprintf("app-%05d.apps.example.com", r.IntN(40)), r.IntN(2) == 0, step)
				}
				if !failed {
					good = doc
				}
				doc, delta = hostileDelta(r, good) // the node keeps serving the last good document
			}
			t.Logf("opt %+v seed %d: patched renders per output %v", opt, seed, patched)
			for k, n := range patched {
				total[k] += n
			}
		}
	}
	for _, o := range outs {
		if n := total[strings.Join(o.sel, ",")+"|"+o.prefer]; n < 15 {
			t.Errorf("output %v %q patched %d times in all: the test does not exercise it", o.sel, o.prefer, n)
		}
	}
}

// TestAnUntouchedSelectionServesItsLastBody: a change in group eu leaves the selection
// default as it was (routing.ForGroupsDelta returns its last document itself, with no
// delta); its outputs, with and without prefer, are then the last bodies as they are,
// not a render of every application of the selection again (no render pass), and still
// the full render's bytes. A change inside the selection, new fleet certificates, or
// another prefer on the output render as before.
func TestAnUntouchedSelectionServesItsLastBody(t *testing.T) {
	st, fopt := fleet.GenerateState(300, 20), fleet.GenerateOptions()
	fleet.GenerateGroup(&st, &fopt, "eu", "eu.example.com", func(i int) bool { return i%10 == 5 })
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	sel := []string{routing.DefaultGroup}
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fopt, nil)
	gdoc, blocks := routing.ForGroupsBlocks(doc, sel)
	render := func(at string, gdoc *routing.Document, gdelta *routing.Delta, prefer string, fc *FleetCerts) Body {
		t.Helper()
		body, err := inc.Render(Request{Doc: gdoc, Delta: gdelta, Prefer: prefer, Output: prefer + "|default", Groups: sel, Certs: fc})
		if err != nil {
			t.Fatal(err)
		}
		want, err := TraefikGroups(mustPreferDoc(t, gdoc, prefer), Options{}, sel, fc)
		if err != nil {
			t.Fatal(err)
		}
		if got := body.Bytes(); string(got) != string(want) {
			i := firstDiff(got, want)
			t.Fatalf("%s: differs from the full render at byte %d\nfull:  %s\ndelta: %s", at, i, excerpt(want, i), excerpt(got, i))
		}
		return body
	}
	for _, prefer := range []string{"", "vps-b"} {
		render("first", gdoc, nil, prefer, nil)
	}
	move := func(app string) []string { // one instance of app moves
		st.Nodes = slices.Clone(st.Nodes)
		for i := range st.Nodes {
			if in, ok := st.Nodes[i].Instances[app]; ok {
				st.Nodes[i].Instances = maps.Clone(st.Nodes[i].Instances)
				in.Port++
				st.Nodes[i].Instances[app] = in
				return []string{fleet.NodeKey(st.Nodes[i].Name)}
			}
		}
		t.Fatalf("no instance of %s", app)
		return nil
	}
	for step := range 6 {
		app := fmt.Sprintf("app-%05d", 10*step+5) // group eu
		next, _, delta := x.Derive(st, fopt, move(app))
		if delta == nil {
			t.Fatalf("step %d: the change was not patched", step)
		}
		var gdelta *routing.Delta
		same := gdoc
		gdoc, blocks, gdelta = routing.ForGroupsDelta(next, sel, gdoc, blocks, delta)
		if gdoc != same || gdelta != nil {
			t.Fatalf("step %d: a change in eu moved the selection default", step)
		}
		for _, prefer := range []string{"", "vps-b"} {
			pass := inc.pass
			render(fmt.Sprintf("step %d prefer %q", step, prefer), gdoc, gdelta, prefer, nil)
			if inc.pass != pass {
				t.Fatalf("step %d prefer %q: the untouched selection was rendered again (%d render passes)", step, prefer, inc.pass-pass)
			}
		}
		doc = next
	}
	// A change inside the selection is patched; new certificates render in full.
	next, _, delta := x.Derive(st, fopt, move("app-00002"))
	gdoc2, _, gdelta := routing.ForGroupsDelta(next, sel, gdoc, blocks, delta)
	if gdelta == nil {
		t.Fatal("a change in default did not move the selection")
	}
	if body := render("inside", gdoc2, gdelta, "", nil); len(body) < 2 {
		t.Fatal("a change inside the selection was not patched")
	}
	fc := fleetCertsWith(&FleetCerts{Managed: map[string]bool{}}, "app-00002.apps.example.com", true, 1)
	pass := inc.pass
	render("certificates", gdoc2, nil, "", fc)
	if inc.pass == pass {
		t.Fatal("new fleet certificates did not render the output again")
	}
	_ = doc
}
