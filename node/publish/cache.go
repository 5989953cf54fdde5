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
// They are a plain LRU of at most maxBodies. The bodies of any other output (the admin
// token's polls, a poller that sends no report, in-process callers, what a tracked name
// polled before) take the room the fleet's leave, and give it back to them first (the
// last come goes first); one of those takes another's place only when that one was
// rendered for an older snapshot (the least recently used of those), else it is served
// and not kept. So an
// ingress-token holder cycling selections, or one tracked name cycling them, never
// pushes out what the fleet polls, and what it fills the room with stays until the
// revision moves (TestThrasherKeepsPolledBodiesCached,
// TestThrashingSelectionsHoldBoundedMemory).
type bodyCache struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[string, cached]      // the fleet's outputs
	other   *simplelru.LRU[string, cached]      // any other output's, in the room left
	tracked *simplelru.LRU[string, trackedPoll] // by ingress name
	// outputs and selections count the tracked names polling each.
	outputs    map[string]int
	selections map[string]int
	evicted    func(*Rendered)
	moving     *Rendered // leaving lru for other: not evicted
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

// maxBodies bounds the bodies kept; maxTracked the tracked ingress names remembered
// (ingresses.maxTracked's default: beyond it, the name polled least recently loses its
// place here first).
const (
	maxBodies  = 256
	maxTracked = 256
)

func newBodyCache(evicted func(*Rendered)) *bodyCache {
	c := &bodyCache{outputs: map[string]int{}, selections: map[string]int{}, evicted: evicted}
	gone := func(_ string, e cached) {
		if e.r != c.moving {
			c.evicted(e.r)
		}
	}
	c.lru, _ = simplelru.NewLRU(maxBodies, gone)
	c.other, _ = simplelru.NewLRU(maxBodies, gone)
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
// polled before, if no other name polls it, becomes any other output's body.
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
			if c.outputs[o]++; c.outputs[o] == 1 {
				c.promote(o)
			}
		}
	}
	if t.selection != "" {
		c.selections[t.selection]++
	}
	c.tracked.Add(name, t)
}

// untrack forgets one name's poll (under mu).
func (c *bodyCache) untrack(t trackedPoll) {
	for _, o := range t.outputs {
		if o == "" {
			continue
		}
		if c.outputs[o]--; c.outputs[o] <= 0 {
			delete(c.outputs, o)
			if !isDefault(o) {
				c.demote(o)
			}
		}
	}
	if t.selection != "" {
		if c.selections[t.selection]--; c.selections[t.selection] <= 0 {
			delete(c.selections, t.selection)
		}
	}
}

// promote moves out's body, if kept among the others, to the fleet's (under mu).
func (c *bodyCache) promote(out string) {
	if e, ok := c.other.Peek(out); ok {
		c.moving = e.r
		c.other.Remove(out)
		c.moving = nil
		c.keepFleet(out, e)
	}
}

// demote moves out's body, if kept, from the fleet's to the others' (under mu).
func (c *bodyCache) demote(out string) {
	if e, ok := c.lru.Peek(out); ok {
		c.moving = e.r
		c.lru.Remove(out)
		c.moving = nil
		c.keepOther(out, e)
	}
}

// keepFleet keeps e as the body of the fleet's output out (under mu). When the cache
// is full another output's body gives it room: the least recently used of an older
// snapshot, else the most recently used (the last come: what filled the room first
// stays, so a client cycling more selections than the room holds still finds most of
// them kept).
func (c *bodyCache) keepFleet(out string, e cached) {
	if c.lru.Len()+c.other.Len() >= maxBodies && !c.lru.Contains(out) && c.other.Len() > 0 {
		victim := c.staleOther(e.seq)
		if victim == "" {
			keys := c.other.Keys()
			victim = keys[len(keys)-1]
		}
		c.other.Remove(victim)
	}
	c.lru.Add(out, e)
}

// staleOther is the least recently used other body rendered for a snapshot older than
// seq ("": none; under mu).
func (c *bodyCache) staleOther(seq uint64) string {
	for _, k := range c.other.Keys() { // oldest first
		if o, _ := c.other.Peek(k); o.seq < seq {
			return k
		}
	}
	return ""
}

// keepOther keeps e as the body of out, not the fleet's (under mu), in the room the
// fleet's bodies leave, or in the place of the least recently used other body of an
// older snapshot; else evicted is told it.
func (c *bodyCache) keepOther(out string, e cached) {
	if c.lru.Len()+c.other.Len() >= maxBodies && !c.other.Contains(out) {
		stale := c.staleOther(e.seq)
		if stale == "" {
			c.evicted(e.r)
			return
		}
		c.other.Remove(stale)
	}
	c.other.Add(out, e)
}

// isDefault: out is a default output (every group, no probe); its prefer was resolved
// by Body to "" or a live node.
func isDefault(out string) bool {
	return strings.Count(out, "\x00") == 2 && strings.HasSuffix(out, "\x00")
}

// fleet says whether out is one of the fleet's outputs (under mu).
func (c *bodyCache) fleet(out string) bool { return isDefault(out) || c.outputs[out] > 0 }

// admits says whether k's output is one of the fleet's (its body is spilled; the
// Incremental keeps its state first).
func (c *bodyCache) admits(k renderKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fleet(outputOf(k))
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
// render), unless a body of a newer snapshot holds its output or there is no room for
// it (then evicted is told r, as if it came and went).
func (c *bodyCache) add(k renderKey, r *Rendered, seq uint64) {
	out := outputOf(k)
	e := cached{k: k, r: r, seq: seq}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range []*simplelru.LRU[string, cached]{c.lru, c.other} {
		if was, ok := l.Peek(out); ok {
			if was.seq > seq {
				c.evicted(r)
				return
			}
			l.Remove(out) // tells evicted: r replaces it
		}
	}
	if c.fleet(out) {
		c.keepFleet(out, e)
	} else {
		c.keepOther(out, e)
	}
}

// Len is how many bodies are kept.
func (c *bodyCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len() + c.other.Len()
}
