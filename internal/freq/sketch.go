// Package freq estimates how often keys were seen recently, in a fixed amount of
// memory whatever the number of distinct keys (a count-min sketch with periodic
// halving, as TinyLFU keeps it). The render caches use it to keep the outputs real
// ingresses keep polling ahead of one-off selections: an eviction takes the entry
// whose key was seen least, so a selection asked for once or twice cannot push out
// one asked for every round.
package freq

import (
	"hash/maphash"
	"math/bits"
	"sync"
)

// depth is the number of counter rows: a key's estimate is the least of its counters,
// so a key is overestimated only when it collides with busier keys in every row.
const depth = 4

// Sketch counts keys. The zero value is not usable: use New. Safe for concurrent use.
type Sketch struct {
	mu     sync.Mutex
	seed   maphash.Seed
	mask   uint64
	rows   [depth][]uint16
	added  int // additions since the last halving
	period int // additions between halvings
}

// New returns a sketch sized for about keys busy keys: counters are halved every
// 10 × width additions, so an estimate is of the recent past (a key that stops being
// seen fades), and no counter can overflow.
func New(keys int) *Sketch {
	w := 1 << bits.Len(uint(max(keys, 16)*4-1)) // a power of two, ≥ 4 × keys
	s := &Sketch{seed: maphash.MakeSeed(), mask: uint64(w - 1), period: 10 * w}
	for i := range s.rows {
		s.rows[i] = make([]uint16, w)
	}
	return s
}

// index is the counter of key's hash h in row i (double hashing: h1 + i·h2).
func (s *Sketch) index(h uint64, i int) uint64 {
	h1, h2 := h, (h>>32)|1
	return (h1 + uint64(i)*h2*0x9e3779b97f4a7c15) & s.mask
}

// Add counts one sighting of key.
func (s *Sketch) Add(key string) {
	h := maphash.String(s.seed, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.rows {
		if c := &s.rows[i][s.index(h, i)]; *c < 0xffff {
			*c++
		}
	}
	if s.added++; s.added >= s.period {
		s.halve()
	}
}

// Halve halves every count now, as every 10 × width additions do: a caller whose
// additions are few (one per source and window: Doorkeeper) ages the counts by time
// too, so an output nobody polls any more fades in a bounded time.
func (s *Sketch) Halve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.halve()
}

func (s *Sketch) halve() {
	s.added = 0
	for i := range s.rows {
		for j := range s.rows[i] {
			s.rows[i][j] >>= 1
		}
	}
}

// Estimate is how often key was seen recently (never less than the truth since the
// last halving, halved with it).
func (s *Sketch) Estimate(key string) int {
	h := maphash.String(s.seed, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0xffff
	for i := range s.rows {
		n = min(n, int(s.rows[i][s.index(h, i)]))
	}
	return n
}
