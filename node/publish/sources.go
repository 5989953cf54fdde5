package publish

import (
	"sync/atomic"
	"time"

	"github.com/scafo/ingress/internal/freq"
)

// PopularityWindow is how long one source's polls of one output count as one: longer
// than a long-poll's longest wait (the node's 60 s), so a real ingress, which polls
// again as soon as its long-poll returns, counts in every window.
const PopularityWindow = 2 * time.Minute

// doorPairs is how many distinct (source, output) pairs a window is sized for (the
// doorkeeper's fixed 32 KiB: about 1 % of pairs under-counted at that many).
const doorPairs = 16384

// agingWindows is how many windows pass between two halvings of the counts: with one
// addition per source and window, the sketch's own halving (every 10 × its width of
// additions) could take days, and an output nobody polls any more would keep its place
// as long. An output polled by one source every window so counts between 8 and 16; one
// no longer polled fades to nothing in about 80 minutes.
const agingWindows = 8

// admitLead is how much more than its victim a newcomer must be polled to take its
// place in a full cache (bodyCache, the group documents). Counts rise at a source's
// first poll of a window, so within a window a one-address thrasher that polls right
// after the window turns leads, by one, a real ingress that has not polled yet; with
// ties alone keeping the incumbent, that lead evicted the real output, which, tied
// again at its own poll, was never admitted back: every real poll rendered (hostile
// round five, TestAThrasherPollingFirstInEachWindowRendersNoRealPoll). One source's
// lead within a window is at most one, and halving never turns a lead into a deficit.
const admitLead = 1

// newDoor is the doorkeeper of the publisher's sketch polls: a (source, key) once per
// PopularityWindow, polls halved every agingWindows windows.
func newDoor(polls *freq.Sketch) *freq.Doorkeeper {
	d := freq.NewDoorkeeper(doorPairs, PopularityWindow)
	var windows atomic.Int64
	d.SetOnWindow(func() {
		if windows.Add(1)%agingWindows == 0 {
			polls.Halve()
		}
	})
	return d
}

// count counts a poll of key (an output or a selection) from source in the sketch the
// caches rank by: at most once per source and PopularityWindow (freq.Doorkeeper). An
// output's count is so how many sources poll it, summed over the recent windows
// (halved as the sketch halves), not how often: one address polling a selection a
// thousand times a window counts as a real ingress polling its own output once, and
// since a newcomer must be polled more than what it would displace (ties keep the
// incumbent), a thrasher from one address, however busy, never pushes out an output
// a real ingress polls every window (issue 25 item 8's busier thrasher). source "" is
// a poll from no known source (in-process callers): each one counts.
//
// What remains: a thrasher with many source addresses (the private network's, as an
// ingress polls from there) counts once per address.
func (p *Publisher) count(source, key string) {
	if source == "" {
		p.polls.Add(key)
		return
	}
	now := time.Now
	if p.clock != nil {
		now = p.clock
	}
	if p.door.FirstPair(source, key, now()) {
		p.polls.Add(key)
	}
}
