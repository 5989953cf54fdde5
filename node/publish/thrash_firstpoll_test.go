package publish

import (
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
)

// TestAThrasherPollingFirstInEachWindowRendersNoRealPoll: a thrasher reporting under
// one name polls each of its 300 selections once a round, right before the real
// ingress's two polls of the round (a long-poll's wait apart), after the real ingress
// polled first. One name holds one fleet place, so the thrasher's outputs leave the
// fleet's bodies as it moves on and never push the real output out: no real poll after
// the first renders, for the output of every group, a prefer with one group, and two
// groups polled from an IPv6 prefix.
func TestAThrasherPollingFirstInEachWindowRendersNoRealPoll(t *testing.T) {
	if testing.Short() {
		t.Skip("renders thousands of selections")
	}
	for _, real := range []sourcedPoll{{"10.1.0.1", "", nil}, {"10.1.0.2", "vps-a", []string{"g1"}}, {"fd00:1:2:3::/64", "", []string{"g2", "g5"}}} {
		t.Run(real.prefer+"/"+strings.Join(real.groups, ","), func(t *testing.T) { thrashFirstInEachWindow(t, real) })
	}
}

func thrashFirstInEachWindow(t *testing.T, real sourcedPoll) {
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
	rendered, polls := 0, 0
	get(real) // the real ingress was there first
	for range 2 {
		for _, q := range thrash {
			get(sourcedPoll{"10.9.0.9", q.prefer, q.groups})
		}
		for range 2 {
			before := p.Renders()
			get(real)
			polls++
			if p.Renders() != before {
				rendered++
			}
		}
	}
	t.Logf("%d of %d real polls rendered", rendered, polls)
	if rendered > 0 {
		t.Fatalf("%d of %d real polls rendered: a one-name thrasher polling first each round outranks a real ingress", rendered, polls)
	}
}
