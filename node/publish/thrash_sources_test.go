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
// measured after issue 25 item 8, docs/design.md): a client reporting under ONE name
// that polls 300 selections (more than the 256 bodies kept) between two real polls, each
// selection once or three times, does not push the real outputs out. One name holds one
// fleet place (the output it polled last: what it polled before leaves the fleet's
// bodies), so a real output, tracked under its own name, renders at its first poll and
// never again, whether the real ingresses polled first (every group; a prefer with one
// group; two groups polled from an IPv6 prefix) or came after the thrasher filled the
// cache (an output two ingresses poll: a pair behind one load balancer, prefer vps-b,
// which no selection of the thrasher's has); and the cache stays bounded.
func TestABusierThrasherFromOneSourceRendersNoRealPoll(t *testing.T) {
	if testing.Short() {
		t.Skip("renders thousands of selections")
	}
	for _, tc := range []struct {
		name string
		real []sourcedPoll
		// thrashFirst: the thrasher filled the cache before the first real poll.
		thrashFirst bool
		// each: how many times the thrasher polls each selection between two real
		// rounds; polls: how many times each real output is polled in a round.
		each, polls int
	}{
		{"busier thrasher", []sourcedPoll{{"10.1.0.1", "", nil}, {"10.1.0.2", "vps-a", []string{"g1"}}}, false, 3, 1},
		{"thrasher first in each window", []sourcedPoll{{"10.1.0.1", "", nil}, {"10.1.0.2", "vps-a", []string{"g1"}}, {"fd00:1:2:3::/64", "", []string{"g2", "g5"}}}, false, 1, 2},
		{"an output of several sources after the thrasher", []sourcedPoll{{"10.1.0.1", "vps-b", []string{"g2"}}, {"fd00:1:2:3::/64", "vps-b", []string{"g2"}}}, true, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, doc := thrashFleet(10)
			p := newPublisher(render.Options{}, "")
			p.Publish(doc, time.Now())
			thrash := thrashSelections(300)
			s := p.cur.Load()
			get := func(q sourcedPoll) bool {
				t.Helper()
				before := p.Renders()
				if _, err := p.Body(s, Request{Ingress: q.source, Prefer: q.prefer, Format: api.FormatTraefik, Groups: q.groups}); err != nil {
					t.Fatal(err)
				}
				return p.Renders() != before
			}
			if !tc.thrashFirst {
				for _, q := range tc.real {
					get(q)
				}
			}
			for round := range 3 {
				for range tc.each {
					for _, q := range thrash {
						get(sourcedPoll{"10.9.0.9", q.prefer, q.groups})
					}
				}
				rendered := 0
				for range tc.polls {
					for _, q := range tc.real {
						if get(q) {
							rendered++
						}
					}
				}
				switch {
				case tc.thrashFirst && round == 0 && rendered == 0:
					t.Fatal("the real output was not rendered at its first poll: the thrasher did not fill the cache first")
				case (!tc.thrashFirst || round > 0) && rendered != 0:
					t.Fatalf("round %d: %d real polls rendered: the one-name thrasher outranks a real ingress", round, rendered)
				}
			}
			if n := p.cache.Len(); n > maxBodies {
				t.Fatalf("%d bodies kept, the bound is %d", n, maxBodies)
			}
		})
	}
}
