package bucket

import (
	"testing"
	"time"
)

// A bucket starts full, spends one token per Take, refuses when empty saying how long
// until the next token, and refills at its rate up to its burst.
func TestBucketSpendsRefillsAndCaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := New(2, 3) // 2 a second, at most 3
	for i := range 3 {
		if ok, _ := b.Take(t0); !ok {
			t.Fatalf("take %d of a full bucket of 3 refused", i+1)
		}
	}
	ok, retry := b.Take(t0)
	if ok || retry != 500*time.Millisecond {
		t.Fatalf("empty bucket: ok=%v retry %s, want refused with 500ms", ok, retry)
	}
	if ok, _ := b.Take(t0.Add(500 * time.Millisecond)); !ok {
		t.Fatal("one token after 1/rate refused")
	}
	// A long pause fills it to its burst, not beyond.
	later := t0.Add(time.Hour)
	for i := range 3 {
		if ok, _ := b.Take(later); !ok {
			t.Fatalf("take %d after an hour refused", i+1)
		}
	}
	if ok, _ := b.Take(later); ok {
		t.Fatal("a fourth take after an hour: the burst is 3")
	}
}
