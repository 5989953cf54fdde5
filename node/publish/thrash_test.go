package publish

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// TestThrasherKeepsPolledBodiesCached is issue 25 item 8 at the node: two real
// ingresses (every group, and ?prefer=vps-a&group=g1) poll every round; in rounds 1
// and 2 an ingress-token holder without a report polls 600 distinct selections, 300 a
// round, each polled twice in a row (so more than once: a cache promoting on a second hit
// would keep them). More than the 256 bodies and the 32 outputs kept come between two
// polls of a real ingress, and in the second round the room left is already full of the
// first round's. The real polls are answered from the cache (no render counted: the
// fleet's bodies are kept apart, bodyCache), and after a revision moves their renders
// still merge with their last order (no cold assembly: the Incremental keeps the fleet's
// outputs first, SetPopularity). (Their bytes are the full render's: render's
// TestIncrementalRenderEqualsFullRender.)
func TestThrasherKeepsPolledBodiesCached(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 1 200 selections")
	}
	st, fo, x, doc := thrashFleet(10)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
	type poll struct {
		prefer string
		groups []string
	}
	legit := []poll{{"", nil}, {"vps-a", []string{"g1"}}}
	thrash := thrashSelections(600)
	// The real ingresses report (tracked, each under its name); the thrasher does not.
	get := func(s *Snapshot, ingress string, q poll) *Rendered {
		t.Helper()
		r, err := p.Body(s, Request{Ingress: ingress, Prefer: q.prefer, Format: api.FormatTraefik, Groups: q.groups})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for round := range 4 {
		s := p.cur.Load()
		for i, q := range legit {
			before := p.Renders()
			get(s, fmt.Sprint("edge-", i), q)
			if n := p.Renders() - before; round > 0 && n != 0 {
				t.Fatalf("round %d: the real poll %+v rendered its body again (%d renders)", round, q, n)
			}
		}
		if round < 1 || round > 2 {
			continue // the real ingresses poll before the thrasher starts, and after it
		}
		for i := range 300 {
			q := thrash[(round-1)*300+i]
			get(s, "", poll{q.prefer, q.groups})
			get(s, "", poll{q.prefer, q.groups})
		}
	}
	if n := p.cache.Len(); n > maxBodies {
		t.Fatalf("%d bodies kept, the bound is %d", n, maxBodies)
	}

	// A revision moves (one application's port, patched by the deriver): the real
	// outputs' renders merge with the state the thrasher left them.
	st.Nodes = slices.Clone(st.Nodes)
	st.Nodes[1].Instances = maps.Clone(st.Nodes[1].Instances)
	app := st.Apps[1].Name // in group g1
	in := st.Nodes[1].Instances[app]
	in.Port++
	st.Nodes[1].Instances[app] = in
	next, _, delta := x.Derive(st, fo, []string{fleet.NodeKey(st.Nodes[1].Name)})
	if !p.PublishDelta(next, delta, time.Now()) {
		t.Fatal("the revision did not move")
	}
	s := p.cur.Load()
	for i, q := range legit {
		cold := p.frags.Cold()
		get(s, fmt.Sprint("edge-", i), q)
		if p.frags.Cold() != cold {
			t.Fatalf("after the thrash, %+v found no state of its output to build on", q)
		}
	}
}

// TestThrasherKeepsPolledSelections: the per-snapshot cache of selection documents and
// the lineage their delta renders build on hold 64 selections each. A thrasher that
// asks for 100 selections (twice each) first, and again right after each revision
// moves before the real ingress's poll, used to take every place (first come, first
// kept, and a kept selection stays while it is asked for): the real selection's
// document was then computed again on every poll, and every revision of it rendered
// whole. Now the selection polled more often gets its place, and keeps it.
func TestThrasherKeepsPolledSelections(t *testing.T) {
	st, fo, x, doc := thrashFleet(40)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
	legit := []string{"g1"}
	// The real ingress reports (tracked); the thrasher does not.
	get := func(ingress, prefer string, groups []string) {
		t.Helper()
		if _, err := p.Body(p.cur.Load(), Request{Ingress: ingress, Prefer: prefer, Format: api.FormatTraefik, Groups: groups}); err != nil {
			t.Fatal(err)
		}
	}
	thrash := thrashSelections(100) // those of g1 alone are skipped: the real one
	flood := func() {
		for _, q := range thrash {
			if !slices.Equal(q.groups, legit) {
				get("", q.prefer, q.groups)
				get("", q.prefer, q.groups)
			}
		}
	}
	flood() // the thrasher came first: every place is taken
	for range 10 {
		get("edge-a", "vps-a", legit)
	}
	for step := range 3 {
		st.Nodes = slices.Clone(st.Nodes)
		st.Nodes[1].Instances = maps.Clone(st.Nodes[1].Instances)
		app := st.Apps[1].Name // in group g1
		in := st.Nodes[1].Instances[app]
		in.Port++
		st.Nodes[1].Instances[app] = in
		next, _, delta := x.Derive(st, fo, []string{fleet.NodeKey(st.Nodes[1].Name)})
		if !p.PublishDelta(next, delta, time.Now()) {
			t.Fatal("the revision did not move")
		}
		flood()
		get("edge-a", "vps-a", legit)
		s := p.cur.Load()
		s.groups.mu.Lock()
		_, cached := s.groups.docs["g1"]
		n := len(s.groups.docs)
		s.groups.mu.Unlock()
		if !cached || n > maxGroupDocs {
			t.Fatalf("step %d: the polled selection's document cached: %v (%d cached, bound %d)", step, cached, n, maxGroupDocs)
		}
		p.lineage.mu.Lock()
		m, kept := p.lineage.last["g1"]
		p.lineage.mu.Unlock()
		if !kept || m.base != next {
			t.Fatalf("step %d: the polled selection's lineage was not kept", step)
		}
	}
}
