package publish

import (
	"strings"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// The render cache keeps the bodies of outputs the fleet bounds, one body per output
// (format, prefer, selection and applied probe; a newer revision replaces the older):
//
//   - the default outputs: every group, no probe, under no prefer or a live one (a node
//     with upstreams in the snapshot): two formats × (1 + the fleet's nodes);
//   - the outputs a tracked ingress polls (Request.Ingress: a poll whose report the
//     ingress book recorded, at most ingresses.maxTracked names): each name's latest
//     output, and the body its applied probe is made from.
//
// They are a plain LRU of at most maxFleetBodies. The bodies of any other output (the
// admin token's polls, a poller that sends no report, in-process callers) share a
// plain LRU of their own, of maxOtherBodies: an ingress-token holder cycling
// selections, or one tracked name cycling them, cannot push out what the fleet polls
// (TestThrasherKeepsPolledBodiesCached, TestThrashingSelectionsHoldBoundedMemory).
type bodyCache struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[string, cached]      // the fleet's outputs
	other   *simplelru.LRU[string, cached]      // any other output's
	tracked *simplelru.LRU[string, trackedPoll] // by ingress name
	// outputs and selections count the tracked names polling each (an output or
	// selection no name polls any more is not kept).
	outputs    map[string]int
	selections map[string]int
	evicted    func(*Rendered)
}

// cached is one output's body: k names what it was rendered from, seq the snapshot.
type cached struct {
	k   renderKey
	r   *Rendered
	seq uint64
}

// trackedPoll is what one tracked ingress polls: its outputs (the probe body's and the
// one it is made from; "" for none) and its selection ("" for every group).
type trackedPoll struct {
	outputs   [2]string
	selection string
}

// maxBodies bounds the bodies kept (maxFleetBodies of the fleet's outputs, the rest of
// others); maxTracked the tracked ingress names remembered (ingresses.maxTracked's
// default: beyond it, the name polled least recently loses its place here first).
const (
	maxBodies      = 256
	maxOtherBodies = 32
	maxFleetBodies = maxBodies - maxOtherBodies
	maxTracked     = 256
)

func newBodyCache(evicted func(*Rendered)) *bodyCache {
	c := &bodyCache{outputs: map[string]int{}, selections: map[string]int{}, evicted: evicted}
	c.lru, _ = simplelru.NewLRU(maxFleetBodies, func(_ string, e cached) { c.evicted(e.r) })
	c.other, _ = simplelru.NewLRU(maxOtherBodies, func(_ string, e cached) { c.evicted(e.r) })
	c.tracked, _ = simplelru.NewLRU(maxTracked, func(_ string, t trackedPoll) { c.untrack(t) })
	return c
}

// outputOf is the key's output: what the cache keeps one body of.
func outputOf(k renderKey) string {
	out := k.format + "\x00" + k.prefer + "\x00" + k.groups
	if k.probe != "" {
		out += "\x00" + k.probe
	}
	return out
}

// track records that the tracked ingress name polls outputs (and selection): what it
// polled before, if no other name polls it, is no longer kept.
func (c *bodyCache) track(name string, t trackedPoll) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if was, ok := c.tracked.Peek(name); ok {
		if was == t {
			c.tracked.Get(name)
			return
		}
		c.tracked.Remove(name) // untrack(was)
	}
	for _, o := range t.outputs {
		if o != "" {
			c.outputs[o]++
		}
	}
	if t.selection != "" {
		c.selections[t.selection]++
	}
	c.tracked.Add(name, t)
}

// untrack forgets one name's poll (under mu), dropping the bodies no one polls any more.
func (c *bodyCache) untrack(t trackedPoll) {
	for _, o := range t.outputs {
		if o == "" {
			continue
		}
		if c.outputs[o]--; c.outputs[o] <= 0 {
			delete(c.outputs, o)
			if !isDefault(o) {
				c.lru.Remove(o) // kept no longer before others'
			}
		}
	}
	if t.selection != "" {
		if c.selections[t.selection]--; c.selections[t.selection] <= 0 {
			delete(c.selections, t.selection)
		}
	}
}

// isDefault: out is a default output (every group, no probe); its prefer was resolved
// by Body to "" or a live node.
func isDefault(out string) bool {
	return strings.Count(out, "\x00") == 2 && strings.HasSuffix(out, "\x00")
}

// admits says whether k's output is one of the fleet's (kept before any other).
func (c *bodyCache) admits(k renderKey) bool {
	out := outputOf(k)
	if isDefault(out) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outputs[out] > 0
}

// polled says whether a tracked ingress polls the selection key (comma-separated groups).
func (c *bodyCache) polled(selection string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.selections[selection] > 0
}

// get returns the body of k, if kept.
func (c *bodyCache) get(k renderKey) (*Rendered, bool) {
	out := outputOf(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(out)
	if !ok {
		e, ok = c.other.Get(out)
	}
	if !ok || e.k != k {
		return nil, false
	}
	return e.r, true
}

// add keeps r, rendered for the snapshot numbered seq, as the body of k (a fresh
// render), unless a body of a newer snapshot holds its output: then evicted is told r,
// as if it came and went.
func (c *bodyCache) add(k renderKey, r *Rendered, seq uint64) {
	out := outputOf(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	to, from := c.other, c.lru
	if isDefault(out) || c.outputs[out] > 0 {
		to, from = c.lru, c.other
	}
	from.Remove(out) // its output changed sides: the older body goes
	if e, ok := to.Peek(out); ok && e.seq > seq {
		c.evicted(r)
		return
	} else if ok {
		c.evicted(e.r)
	}
	to.Add(out, cached{k: k, r: r, seq: seq})
}

// Len is how many bodies are kept.
func (c *bodyCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len() + c.other.Len()
}
