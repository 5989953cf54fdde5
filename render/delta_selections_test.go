package render

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// TestAnUntouchedSelectionServesItsLastBody: a change in group eu leaves the selection
// default as it was (routing.ForGroupsDelta returns its last document itself, with no
// delta); its outputs, with and without prefer, are then the last bodies as they are,
// not a render of every application of the selection again (no render pass). (A
// change inside the selection, and new fleet certificates, render as before:
// TestIncrementalRenderEqualsFullRender's delta renders of ?group= outputs and its
// certificate changes.)
func TestAnUntouchedSelectionServesItsLastBody(t *testing.T) {
	st, fopt := fleet.GenerateState(300, 20), fleet.GenerateOptions()
	fleet.GenerateGroup(&st, &fopt, "eu", "eu.example.com", func(i int) bool { return i%10 == 5 })
	inc := mustIncremental(t, Options{})
	sel := []string{routing.DefaultGroup}
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fopt, nil)
	gdoc, blocks := routing.ForGroupsBlocks(doc, sel)
	// Its bytes are the full render's: TestIncrementalRenderEqualsFullRender.
	render := func(at string, gdoc *routing.Document, gdelta *routing.Delta, prefer string, fc *FleetCerts) Body {
		t.Helper()
		body, err := inc.Render(Request{Doc: gdoc, Delta: gdelta, Prefer: prefer, Output: prefer + "|default", Groups: sel, Certs: fc})
		if err != nil {
			t.Fatalf("%s: %v", at, err)
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
	}
}

// TestDeltaRenderSurvivesOtherOutputsRenders: a node serves the default output (delta
// renders) beside ?group= outputs (full renders of their selections). The fragments
// of applications only the default output holds must not be swept from the cache while
// its body still holds them, or every change to such an application falls back to a
// full render of the default output that renders those fragments again from nothing
// (the cost of a cold render, at every change). The bytes of every render are the full
// render's: TestIncrementalRenderEqualsFullRender.
func TestDeltaRenderSurvivesOtherOutputsRenders(t *testing.T) {
	st, fopt := fleet.GenerateState(300, 0), fleet.GenerateOptions()
	fleet.GenerateGroup(&st, &fopt, "eu", "eu.example.com", func(i int) bool { return i%10 == 0 })
	inc := mustIncremental(t, Options{})
	var x fleet.Deriver
	var changed []string
	fallbacks := 0
	for step := range 30 {
		doc, _, delta := x.Derive(st, fopt, changed)
		at := fmt.Sprintf("step %d", step)
		for range 3 { // the group outputs' renders of this document (e.g. two prefers)
			if _, err := inc.Render(Request{Doc: routing.ForGroups(doc, []string{"eu"}), Output: "|eu", Groups: []string{"eu"}}); err != nil {
				t.Fatalf("%s: %v", at, err)
			}
		}
		body, err := inc.Render(Request{Doc: doc, Delta: delta})
		if err != nil {
			t.Fatal(err)
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
