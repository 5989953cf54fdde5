package fleet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSortRunsEqualsSort checks the run merge buildRoutes orders routes with against a
// plain sort: random runs, each sorted, unsorted, empty or single, merged in any count.
func TestSortRunsEqualsSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		var order []hostAt
		var ends []int
		seen := map[string]bool{}
		for range rng.IntN(6) {
			n := rng.IntN(20)
			run := make([]hostAt, 0, n)
			for len(run) < n {
				h := fmt.Sprintf("h%d.example", rng.IntN(400))
				if seen[h] {
					continue
				}
				seen[h] = true
				run = append(run, hostAt{h, int32(len(order) + len(run))})
			}
			if rng.IntN(2) == 0 {
				slices.SortFunc(run, compareHostAt)
			}
			order = append(order, run...)
			ends = append(ends, len(order))
			if rng.IntN(4) == 0 {
				ends = append(ends, len(order)) // an empty run
			}
		}
		want := slices.SortedFunc(slices.Values(order), compareHostAt)
		got := sortRuns(slices.Clone(order), ends)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: runs %v of %v\n got %v\nwant %v", trial, ends, order, got, want)
		}
	}
}

// TestCompareAsKeysIsKeyOrder checks CompareAsKeys against the store key order on
// random label-alphabet names, and on names with dots and other bytes around '.' as
// well (invalid names a corrupt store may hold: the order must still be the listing's,
// or a fleet holding one is never found in order).
func TestCompareAsKeysIsKeyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	name := func(alphabet string) string {
		b := make([]byte, rng.IntN(5))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	sign := func(c int) int { return min(max(c, -1), 1) }
	for range 20000 {
		a, b := name("ab-0z"), name("ab-0z")
		if got, want := sign(CompareAsKeys(a, b)), sign(strings.Compare(AppKey(a), AppKey(b))); got != want {
			t.Fatalf("CompareAsKeys(%q, %q) = %d, key order says %d", a, b, got, want)
		}
		a, b = name("a-.,/jsonz"), name("a-.,/jsonz")
		if got, want := sign(CompareAsKeys(a, b)), sign(strings.Compare(AppKey(a), AppKey(b))); got != want {
			t.Fatalf("CompareAsKeys(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}
