package publish

import (
	"sync"

	"github.com/scafo/ingress/internal/freq"
)

// bodyCache is the cache of rendered bodies: at most size of them, by render key. What
// it keeps, when full, is decided by how often each output (format, prefer and
// selection: a render key without its revision and certificates) is polled recently,
// cached answers included, so that an ingress-token holder cycling hundreds of one-off
// selections cannot make every poll of the outputs real ingresses keep polling pay a
// render, gzip, hash and spill again (issue 25 item 8). An LRU could be: each one-off
// pushed the oldest entry out, whatever it was.
//
// When a body must go, it is, in this order: one superseded by a newer body of the same
// output (an older revision: no poll asks for it once the snapshot moved), the least
// recently used of those; else the body of the output polled least (the least recently
// used of those). A new body whose output is polled no more than that victim's is not
// kept at all (it is served, from memory, and rendered again if asked for again): a
// selection never displaces an output polled more often than it, and at equal rates
// the body kept stays.
type bodyCache struct {
	mu      sync.Mutex
	size    int
	entries map[renderKey]*bodyEntry
	latest  map[string]renderKey // each output's newest body kept
	tick    uint64
	polls   *freq.Sketch
	evicted func(*Rendered)
}

type bodyEntry struct {
	r          *Rendered
	output     string
	used       uint64 // tick of the last Get or Add
	seq        uint64 // of the snapshot it was rendered for
	superseded bool   // a body of the same output for a newer snapshot was added
}

func newBodyCache(size int, polls *freq.Sketch, evicted func(*Rendered)) *bodyCache {
	return &bodyCache{size: size, entries: map[renderKey]*bodyEntry{}, latest: map[string]renderKey{},
		polls: polls, evicted: evicted}
}

// outputOf is the key's output: what polls of it count under.
func outputOf(k renderKey) string {
	out := k.format + "\x00" + k.prefer + "\x00" + k.groups
	if k.probe != "" {
		// Each ingress's probe body is its own output: a made-up name is counted (and
		// admitted) as one.
		out += "\x00" + k.probe
	}
	return out
}

// Get returns the body of k, if kept.
func (c *bodyCache) Get(k renderKey) (*Rendered, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	c.tick++
	e.used = c.tick
	return e.r, true
}

// victim is the entry that goes for a new one (under mu; the cache is full), and how
// often its output is polled (-1: superseded).
func (c *bodyCache) victim() (renderKey, int) {
	var vk renderKey
	var ve *bodyEntry
	vn := 0
	for k, e := range c.entries {
		n := -1
		if !e.superseded {
			n = c.polls.Estimate(e.output)
		}
		if ve == nil || n < vn || (n == vn && e.used < ve.used) {
			vk, ve, vn = k, e, n
		}
	}
	return vk, vn
}

// Admits says whether a body of k would be kept now (the caller skips the spill of one
// that would not).
func (c *bodyCache) Admits(k renderKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; ok || len(c.entries) < c.size {
		return true
	}
	_, vn := c.victim()
	return vn < 0 || c.polls.Estimate(outputOf(k)) > vn+admitLead
}

// Add keeps r, rendered for the snapshot numbered seq, as the body of k, unless the cache is full and k's output is polled no
// more than the victim's (then evicted is told r, as if it came and went). It returns
// whether r was kept.
func (c *bodyCache) Add(k renderKey, r *Rendered, seq uint64) bool {
	c.mu.Lock()
	var gone []*Rendered
	defer func() {
		c.mu.Unlock()
		for _, g := range gone {
			c.evicted(g)
		}
	}()
	out := outputOf(k)
	c.tick++
	if e, ok := c.entries[k]; ok {
		if e.r != r {
			gone = append(gone, e.r)
		}
		e.r, e.used = r, c.tick
		return true
	}
	// The output's body kept until now is superseded by this one, whatever comes of it,
	// unless it is of a newer snapshot (a poll that loaded the older one, rendered late).
	older := false
	if lk, ok := c.latest[out]; ok {
		if l := c.entries[lk]; l.seq <= seq {
			l.superseded = true
			delete(c.latest, out)
		} else {
			older = true
		}
	}
	if len(c.entries) >= c.size {
		vk, vn := c.victim()
		if vn >= 0 && c.polls.Estimate(out) <= vn+admitLead {
			gone = append(gone, r)
			return false
		}
		gone = append(gone, c.entries[vk].r)
		c.remove(vk)
	}
	if !older {
		c.latest[out] = k
	}
	c.entries[k] = &bodyEntry{r: r, output: out, used: c.tick, seq: seq, superseded: older}
	return true
}

// remove drops k (under mu).
func (c *bodyCache) remove(k renderKey) {
	e := c.entries[k]
	delete(c.entries, k)
	if lk, ok := c.latest[e.output]; ok && lk == k {
		delete(c.latest, e.output)
	}
}

// Len is how many bodies are kept.
func (c *bodyCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
