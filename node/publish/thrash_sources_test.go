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

// TestABusierThrasherFromOneSourceRendersNoRealPoll (the limit a hostile round
// measured after issue 25 item 8, docs/design.md): a client that polls each of its
// selections more often than a real ingress polls its own does not push the real
// outputs out. Two real ingresses (every group; ?prefer=vps-a&group=g1), each tracked
// under its own name, poll once a round; after their first poll an ingress-token holder
// reporting under ONE name polls 300 selections (more than the 256 bodies kept) three
// times each between two real polls, for two rounds. One name holds one fleet place (the
// output it polled last: what it polled before leaves the fleet's bodies), so the real
// outputs keep theirs: no real poll renders, and the cache stays bounded.
func TestABusierThrasherFromOneSourceRendersNoRealPoll(t *testing.T) {
	if testing.Short() {
		t.Skip("renders thousands of selections")
	}
	_, _, _, doc := thrashFleet(10)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
	legit := []sourcedPoll{{"10.1.0.1", "", nil}, {"10.1.0.2", "vps-a", []string{"g1"}}}
	thrash := thrashSelections(300)
	s := p.cur.Load()
	get := func(q sourcedPoll) {
		t.Helper()
		if _, err := p.Body(s, Request{Ingress: q.source, Prefer: q.prefer, Format: api.FormatTraefik, Groups: q.groups}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for _, q := range legit {
			before := p.Renders()
			get(q)
			if n := p.Renders() - before; round > 0 && n != 0 {
				t.Fatalf("round %d: the real poll %+v rendered its body again (%d renders): the one-address thrasher outranks it", round, q, n)
			}
		}
		if round == 2 {
			break // the real ingresses' polls after the second thrash round
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

// TestAnOutputOfSeveralSourcesDisplacesAOneSourceThrasher: a thrasher reporting under
// one name fills the cache first (300 selections, three polls each a round); then an
// output two ingresses poll (a pair behind one load balancer, each tracked under its
// own name) takes a place at its first poll and is never rendered again, though the
// thrasher goes on polling 900 times between two of its polls: the thrasher's outputs,
// one name's, never push it out.
func TestAnOutputOfSeveralSourcesDisplacesAOneSourceThrasher(t *testing.T) {
	if testing.Short() {
		t.Skip("renders thousands of selections")
	}
	_, _, _, doc := thrashFleet(10)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
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
	for round := range 4 {
		for range 3 {
			for _, q := range thrash {
				get(sourcedPoll{"10.9.0.9", q.prefer, q.groups})
			}
		}
		if round < 1 {
			continue // the thrasher was there first
		}
		for _, q := range pair {
			before := p.Renders()
			get(q)
			if p.Renders() != before {
				total++
				if round >= 2 {
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
		t.Fatalf("the pair's output, polled from two addresses, still rendered %d times in its last 2 rounds", rendered)
	}
}

// TestAnOutputNobodyPollsFadesInBoundedTime: a thrasher reporting under one name that
// filled the cache (300 selections, twice) and left gives way to a new output one
// ingress polls: within 20 rounds of two polls each, a round renders nothing (measured:
// the second round; the bound is what the test holds).
func TestAnOutputNobodyPollsFadesInBoundedTime(t *testing.T) {
	if testing.Short() {
		t.Skip("600 polls")
	}
	_, _, _, doc := thrashFleet(10)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
	s := p.cur.Load()
	get := func(q sourcedPoll) {
		t.Helper()
		if _, err := p.Body(s, Request{Ingress: q.source, Prefer: q.prefer, Format: api.FormatRoutes, Groups: q.groups}); err != nil {
			t.Fatal(err)
		}
	}
	thrash := thrashSelections(300)
	for range 2 {
		for _, q := range thrash {
			get(sourcedPoll{"10.9.0.9", q.prefer, q.groups})
		}
	}
	real := sourcedPoll{"10.1.0.1", "vps-c", []string{"g3"}} // no selection of the thrasher's
	for w := range 20 {
		before := p.Renders()
		get(real)
		get(real)
		if p.Renders() == before {
			t.Logf("the new output cached after %d rounds", w)
			return
		}
	}
	t.Fatal("20 rounds after the thrasher left, a new output polled every round still renders at each poll")
}
