package freq

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"time"
)

// Doorkeeper says whether a key is seen for the first time in the current window of
// time, in a fixed amount of memory whatever the number of distinct keys (a Bloom
// filter cleared at each window's end). Put in front of a Sketch with keys that pair a
// source with what it asked for, it makes the sketch count each (source, thing) at
// most once per window: a thing's count is then how many sources asked for it, window
// after window, and one source asking for it a thousand times a window counts as one
// asking once.
//
// A false positive (a key taken for seen when it was not: about 1 % with 4 bits of
// every 40 set, less below) under-counts that key for the rest of the window; a key is
// never counted twice in one window.
type Doorkeeper struct {
	mu     sync.Mutex
	seed   maphash.Seed
	mask   uint64
	bits   []uint64
	window time.Duration
	start  time.Time // of the current window
	turned func()    // told each new window (SetOnWindow)
}

// doorHashes is the number of bits a key sets.
const doorHashes = 4

// NewDoorkeeper returns a doorkeeper sized for about keys distinct keys a window
// (10 bits per key, rounded up to a power of two: about 1 % false positives at that
// many, fewer below) whose windows last window.
func NewDoorkeeper(keys int, window time.Duration) *Doorkeeper {
	m := 1 << bits.Len(uint(max(keys, 64)*10-1))
	return &Doorkeeper{seed: maphash.MakeSeed(), mask: uint64(m - 1), bits: make([]uint64, m/64), window: window}
}

// First reports whether key is seen for the first time in the window that holds now,
// and marks it seen. A now at or past the window's end starts a new window (every key
// unseen again); a now before the window's start (a clock stepped back) counts in the
// current window.
func (d *Doorkeeper) First(key string, now time.Time) bool {
	return d.first(maphash.String(d.seed, key), now)
}

// FirstPair is First of the key (a, b), without building it: the pair ("ab", "c") is
// not ("a", "bc").
func (d *Doorkeeper) FirstPair(a, b string, now time.Time) bool {
	var h maphash.Hash
	h.SetSeed(d.seed)
	h.WriteString(a)
	h.WriteByte(0)
	h.WriteString(b)
	return d.first(h.Sum64(), now)
}

func (d *Doorkeeper) first(h uint64, now time.Time) bool {
	h1, h2 := h, (h>>32)|1
	d.mu.Lock()
	if d.start.IsZero() || !now.Before(d.start.Add(d.window)) {
		clear(d.bits)
		if !d.start.IsZero() && d.turned != nil {
			defer d.turned() // after the unlock (deferred calls run last in, first out)
		}
		d.start = now
	}
	defer d.mu.Unlock()
	first := false
	for i := range uint64(doorHashes) {
		b := (h1 + i*h2*0x9e3779b97f4a7c15) & d.mask
		w, m := &d.bits[b/64], uint64(1)<<(b%64)
		if *w&m == 0 {
			first = true
			*w |= m
		}
	}
	return first
}

// SetOnWindow makes f told each time a window ends and a new one starts (on the
// first sighting after it), outside the doorkeeper's lock. Set it before use.
func (d *Doorkeeper) SetOnWindow(f func()) { d.turned = f }

// Window is how long a window lasts.
func (d *Doorkeeper) Window() time.Duration { return d.window }
