package fleet

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
