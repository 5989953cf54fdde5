package render

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// BenchmarkGroupOutputAfterAChangeElsewhere is a node serving ?group=default (9 900
// applications) of a 10 000-application fleet while the changes are in group eu: the
// selection's document is the last one itself (routing.ForGroupsDelta returns prev, no
// delta), and Render renders it again for the new revision.
// Compare with BenchmarkDeltaRenderBesideGroupOutputs' delta-ns (a change inside).
func BenchmarkGroupOutputAfterAChangeElsewhere(b *testing.B) {
	st, fopt, inc := twoGroupFleet(b)
	sel := []string{routing.DefaultGroup}
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fopt, nil)
	gdoc, blocks := routing.ForGroupsBlocks(doc, sel)
	if _, err := inc.Render(Request{Doc: gdoc, Output: "|default", Groups: sel}); err != nil {
		b.Fatal(err)
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		n++
		i := (n * 100) % 10000 // always in group eu
		st.Nodes = slices.Clone(st.Nodes)
		node := &st.Nodes[i%3]
		node.Instances = maps.Clone(node.Instances)
		name := fmt.Sprintf("app-%05d", i)
		in, ok := node.Instances[name]
		if !ok {
			node = &st.Nodes[(i+1)%3]
			node.Instances = maps.Clone(node.Instances)
			in = node.Instances[name]
		}
		in.Port = 1 + (in.Port+n)%60000
		node.Instances[name] = in
		next, _, delta := x.Derive(st, fopt, []string{fleet.NodeKey(node.Name)})
		if delta == nil {
			b.Fatal("not patched")
		}
		var gdelta *routing.Delta
		gdoc, blocks, gdelta = routing.ForGroupsDelta(next, sel, gdoc, blocks, delta)
		if gdelta != nil {
			b.Fatal("a change in eu moved the default selection")
		}
		b.StartTimer()
		if _, err := inc.Render(Request{Doc: gdoc, Delta: gdelta, Output: "|default", Groups: sel}); err != nil {
			b.Fatal(err)
		}
	}
}
