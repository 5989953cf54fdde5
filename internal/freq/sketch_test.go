package freq

import (
	"fmt"
	"testing"
)

// TestSketchEstimates: an estimate is never below the count since the last halving,
// distinct keys rarely inflate each other, and a key no longer seen fades.
func TestSketchEstimates(t *testing.T) {
	s := New(64) // width 256, halved every 2 560 additions
	for i := range 100 {
		for range i % 7 {
			s.Add(fmt.Sprint("k", i))
		}
	}
	over := 0
	for i := range 100 {
		n := s.Estimate(fmt.Sprint("k", i))
		if n < i%7 {
			t.Fatalf("k%d: estimate %d below its count %d", i, n, i%7)
		}
		if n > i%7 {
			over++
		}
	}
	if over > 5 {
		t.Fatalf("%d of 100 keys overestimated", over)
	}
	if s.Estimate("never") > 6 {
		t.Fatal("a key never added looks busy")
	}
	for range 3000 { // past one halving, by other keys
		s.Add("other")
	}
	if n := s.Estimate("k6"); n > 3 {
		t.Fatalf("k6, not seen since, still estimated %d after a halving", n)
	}
}
