package publish

import (
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
)

// sourcedPoll is one output polled from one source.
type sourcedPoll struct {
	source, prefer string
	groups         []string
}

// TestABusierThrasherFromOneSourceRendersNoRealPoll is the limit the hostile round
// measured after issue 25 item 8 (docs/design.md): caches ranked by how often an
// output is polled let a client poll each of its selections more often than a real
// ingress polls its own. Two real ingresses (every group; ?prefer=vps-a&group=g1),
// each from its own address, poll once a long-poll wait (60 s); from round 10 an
// ingress-token holder on ONE address polls 300 selections (more than the 256 bodies
// kept) three times each between two real polls. The old sketch counted its 3 polls
// a round against the real outputs' 1 and evicted them: every real poll rendered
// again. Now an output counts its sources once per window, so the real outputs keep
// their places: no real poll renders.
func TestABusierThrasherFromOneSourceRendersNoRealPoll(t *testing.T) {
	if testing.Short() {
		t.Skip("renders thousands of selections")
	}
	_, _, _, doc := thrashFleet(40)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	legit := []sourcedPoll{{"10.1.0.1", "", nil}, {"10.1.0.2", "vps-a", []string{"g1"}}}
	thrash := thrashSelections(300)
	s := p.cur.Load()
	get := func(q sourcedPoll) {
		t.Helper()
		if _, err := p.Body(s, Request{Ingress: q.source, Prefer: q.prefer, Format: api.FormatTraefik, Groups: q.groups}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 25 {
		now = now.Add(60 * time.Second) // a long-poll's wait
		for _, q := range legit {
			before := p.Renders()
			get(q)
			if n := p.Renders() - before; round > 0 && n != 0 {
				t.Fatalf("round %d: the real poll %+v rendered its body again (%d renders): the one-address thrasher outranks it", round, q, n)
			}
		}
		if round < 10 {
			continue // the real ingresses poll before the thrasher starts
		}
		for range 3 {
			for _, q := range thrash {
				get(sourcedPoll{"10.9.0.9", q.prefer, q.groups})
			}
		}
	}
	if n := p.cache.Len(); n > maxBodies {
		t.Fatalf("%d bodies kept, the bound is %d", n, maxBodies)
	}
}

// TestAnOutputOfSeveralSourcesDisplacesAOneSourceThrasher: ties keep the incumbent,
// and more sources win. A thrasher on one address fills the caches first (300
// selections, three polls each a round); then an output two ingresses poll (a pair
// behind one load balancer, each from its own address) gains two a window against the
// thrasher's one a selection, takes a place within a few windows and is never rendered
// again; and the thrasher's outputs, each one address's, never push it out.
func TestAnOutputOfSeveralSourcesDisplacesAOneSourceThrasher(t *testing.T) {
	if testing.Short() {
		t.Skip("renders thousands of selections")
	}
	_, _, _, doc := thrashFleet(40)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	thrash := thrashSelections(300)
	s := p.cur.Load()
	get := func(q sourcedPoll) {
		t.Helper()
		if _, err := p.Body(s, Request{Ingress: q.source, Prefer: q.prefer, Format: api.FormatTraefik, Groups: q.groups}); err != nil {
			t.Fatal(err)
		}
	}
	// The pair's output: prefer vps-b (no selection of the thrasher's has it).
	pair := []sourcedPoll{{"10.1.0.1", "vps-b", []string{"g2"}}, {"fd00:1:2:3::/64", "vps-b", []string{"g2"}}}
	rendered, total := 0, 0
	for round := range 32 {
		now = now.Add(60 * time.Second)
		for range 3 {
			for _, q := range thrash {
				get(sourcedPoll{"10.9.0.9", q.prefer, q.groups})
			}
		}
		if round < 10 {
			continue
		}
		for _, q := range pair {
			before := p.Renders()
			get(q)
			if p.Renders() != before {
				total++
				if round >= 24 {
					rendered++
				}
			}
		}
	}
	t.Logf("the pair's polls rendered %d times in all (it took its place against the thrasher's)", total)
	if total == 0 {
		t.Fatal("the pair's output was never rendered after its first poll: the thrasher did not fill the cache first")
	}
	if rendered != 0 {
		t.Fatalf("the pair's output, polled from two addresses, still rendered %d times in its last 8 rounds", rendered)
	}
}

// TestAnOutputNobodyPollsFadesInBoundedTime: with one count per source and window the
// sketch's own halving (by additions) comes rarely, so the counts are also halved every
// agingWindows windows. A thrasher that held the caches for 70 windows (2 h 20 min)
// and left gives way to a new output one ingress polls within 20 windows (40 min; 8
// measured); without the aging its selections held their places for 31 windows.
func TestAnOutputNobodyPollsFadesInBoundedTime(t *testing.T) {
	if testing.Short() {
		t.Skip("30 000 polls")
	}
	_, _, _, doc := thrashFleet(40)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	s := p.cur.Load()
	get := func(q sourcedPoll) {
		t.Helper()
		if _, err := p.Body(s, Request{Ingress: q.source, Prefer: q.prefer, Format: api.FormatRoutes, Groups: q.groups}); err != nil {
			t.Fatal(err)
		}
	}
	thrash := thrashSelections(300)
	for range 70 {
		now = now.Add((2 * time.Minute))
		for _, q := range thrash {
			get(sourcedPoll{"10.9.0.9", q.prefer, q.groups})
		}
	}
	real := sourcedPoll{"10.1.0.1", "vps-c", []string{"g3"}} // no selection of the thrasher's
	for w := range 20 {
		now = now.Add((2 * time.Minute))
		before := p.Renders()
		get(real)
		get(real)
		if p.Renders() == before {
			t.Logf("the new output cached after %d windows", w)
			return
		}
	}
	t.Fatal("20 windows after the thrasher left, a new output polled every window still renders at each poll")
}
