package render

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// BenchmarkDeltaRenderBesideGroupOutputs is a node serving the default output (delta
// renders of one-application changes) and two ?group= outputs of a small group (full
// renders of each document) from one Incremental, at 10 000 applications. delta-ns is
// the default output's render alone: it stays the cost of one application's fragment
// only while the group outputs' renders leave the default output's fragments cached
// (TestDeltaRenderSurvivesOtherOutputsRenders).
func BenchmarkDeltaRenderBesideGroupOutputs(b *testing.B) {
	st, fopt, inc := twoGroupFleet(b)
	var x fleet.Deriver
	var changed []string
	var delta time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		doc, _, d := x.Derive(st, fopt, changed)
		for _, sel := range []string{"|eu", "vps-a|eu"} {
			if _, err := rendered(inc, Request{Doc: doc, Output: sel, Groups: []string{"eu"}}); err != nil {
				b.Fatal(err)
			}
		}
		t0 := time.Now()
		if _, err := inc.Render(Request{Doc: doc, Delta: d}); err != nil {
			b.Fatal(err)
		}
		delta += time.Since(t0)
		n++
		i := (n*7919)%10000 | 1 // never in group eu
		st.Nodes = slices.Clone(st.Nodes)
		node := &st.Nodes[i%3]
		node.Instances = maps.Clone(node.Instances)
		in := node.Instances[fmt.Sprintf("app-%05d", i)]
		in.Port = 1 + (in.Port+n)%60000
		node.Instances[fmt.Sprintf("app-%05d", i)] = in
		changed = []string{fleet.NodeKey(node.Name)}
	}
	b.ReportMetric(float64(delta.Nanoseconds())/float64(b.N), "delta-ns")
}

// twoGroupFleet is a generated fleet of 10 000 applications of which 100 are in group
// eu (platform domain eu.example.com), its options, and an Incremental.
func twoGroupFleet(b *testing.B) (fleet.State, fleet.Options, *Incremental) {
	st, fopt := fleet.GenerateState(10000, 0), fleet.GenerateOptions()
	fleet.GenerateGroup(&st, &fopt, "eu", "eu.example.com", func(i int) bool { return i%100 == 0 })
	inc, err := NewIncremental(Options{})
	if err != nil {
		b.Fatal(err)
	}
	return st, fopt, inc
}
