package freq

import (
	"fmt"
	"testing"
	"time"
)

// TestDoorkeeperCountsAKeyOncePerWindow: a key is first once per window however often
// it is seen, again in the next window; distinct keys are each first (false positives
// stay rare at the sized count); a clock stepped back stays in the current window.
func TestDoorkeeperCountsAKeyOncePerWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	d := NewDoorkeeper(1000, 2*time.Minute)
	if !d.First("a", t0) {
		t.Fatal("a: not first at its first sighting")
	}
	for i := range 1000 {
		if d.First("a", t0.Add(time.Duration(i)*100*time.Millisecond)) {
			t.Fatalf("a: first again %d sightings later, in the same window", i+1)
		}
	}
	if d.First("a", t0.Add(-time.Hour)) {
		t.Fatal("a: first again at a clock stepped back")
	}
	if !d.First("a", t0.Add(2*time.Minute)) {
		t.Fatal("a: not first in the next window")
	}
	t1 := t0.Add(time.Hour)
	missed := 0
	for i := range 1000 {
		if !d.First(fmt.Sprint("k", i), t1) {
			missed++
		}
	}
	if missed > 20 {
		t.Fatalf("%d of 1 000 distinct keys taken for seen (false positives)", missed)
	}
}

// TestDoorkeeperMemoryIsFixed: a million distinct keys in one window grow nothing; the
// filter saturates (keys taken for seen: under-counted, never over-counted), and the
// next window is clean.
func TestDoorkeeperMemoryIsFixed(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	d := NewDoorkeeper(1000, time.Minute)
	n := len(d.bits)
	for i := range 1_000_000 {
		d.First(fmt.Sprint("flood", i), t0)
	}
	if len(d.bits) != n || cap(d.bits) != n {
		t.Fatalf("the filter grew from %d to %d words", n, len(d.bits))
	}
	if !d.First("fresh", t0.Add(time.Minute)) {
		t.Fatal("the next window is not clean")
	}
}

// TestDoorkeeperTellsEachNewWindow: SetOnWindow's function is told once per window
// that ends (not at the first window's start), and may use the doorkeeper.
func TestDoorkeeperTellsEachNewWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	d := NewDoorkeeper(100, time.Minute)
	turned := 0
	d.SetOnWindow(func() {
		turned++
		d.First("from the callback", t0) // no deadlock: told outside the lock
	})
	d.First("a", t0)
	d.First("a", t0.Add(30*time.Second))
	if turned != 0 {
		t.Fatalf("told %d new windows within the first", turned)
	}
	d.First("a", t0.Add(time.Minute))
	d.First("b", t0.Add(90*time.Second))
	d.First("a", t0.Add(5*time.Minute))
	if turned != 2 {
		t.Fatalf("told %d new windows, want 2", turned)
	}
}

// TestSketchHalve: Halve halves every count at once.
func TestSketchHalve(t *testing.T) {
	s := New(16)
	for range 9 {
		s.Add("k")
	}
	s.Halve()
	if n := s.Estimate("k"); n != 4 {
		t.Fatalf("9 halved: %d, want 4", n)
	}
}

// TestDoorkeeperPairs: a pair is first once per window, and its two parts are not
// run together.
func TestDoorkeeperPairs(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	d := NewDoorkeeper(100, time.Minute)
	if !d.FirstPair("10.0.0.1", "out", t0) || d.FirstPair("10.0.0.1", "out", t0) {
		t.Fatal("a pair is not first exactly once in a window")
	}
	if !d.FirstPair("10.0.0.1o", "ut", t0) || !d.FirstPair("10.0.0.2", "out", t0) || !d.FirstPair("10.0.0.1", "out2", t0) {
		t.Fatal("another pair taken for seen")
	}
}
