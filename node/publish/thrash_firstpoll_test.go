package publish

import (
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
)

// TestAThrasherPollingFirstInEachWindowRendersNoRealPoll (hostile round five): a
// one-address thrasher that polls each of its 300 selections ONCE a window, right
// after the window turns (it polls constantly, so the turn is its poll), and before
// the real ingress's first poll of the window. With equal counts (one source each,
// one count a window), its outputs lead the real one by one for the part of the
// window before the real poll: enough to evict it, and then the real output, tied,
// is never admitted back, so every real poll of the window renders (the output of
// every group; the two selections held before the fix too, and are kept as cover).
func TestAThrasherPollingFirstInEachWindowRendersNoRealPoll(t *testing.T) {
	if testing.Short() {
		t.Skip("renders thousands of selections")
	}
	for _, real := range []sourcedPoll{{"10.1.0.1", "", nil}, {"10.1.0.2", "vps-a", []string{"g1"}}, {"fd00:1:2:3::/64", "", []string{"g2", "g5"}}} {
		t.Run(real.prefer+"/"+strings.Join(real.groups, ","), func(t *testing.T) { thrashFirstInEachWindow(t, real) })
	}
}

func thrashFirstInEachWindow(t *testing.T, real sourcedPoll) {
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
	rendered, polls := 0, 0
	start := now
	for w := range 24 {
		now = start.Add(time.Duration(w) * (2 * time.Minute)) // the window turns at the thrasher's poll
		if w == 0 {                                           // the real ingress was there first
			get(real)
		}
		for _, q := range thrash {
			get(sourcedPoll{"10.9.0.9", q.prefer, q.groups})
		}
		for range 2 { // a long-poll's wait apart, inside the window
			now = now.Add(59 * time.Second)
			before := p.Renders()
			get(real)
			if w >= 8 {
				polls++
				if p.Renders() != before {
					rendered++
				}
			}
		}
	}
	t.Logf("%d of %d real polls rendered", rendered, polls)
	if rendered > 0 {
		t.Fatalf("%d of %d real polls rendered: a one-address thrasher polling once a window, first, outranks a real ingress", rendered, polls)
	}
}
