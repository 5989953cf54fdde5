package ingress

import (
	"context"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
)

// farStore answers every request after rtt of real time, as a store a region away does.
type farStore struct {
	store.Store
	rtt time.Duration
}

func (s farStore) wait(ctx context.Context) error {
	tm := time.NewTimer(s.rtt)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s farStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix)
}

func (s farStore) Get(ctx context.Context, key string) (store.Object, error) {
	if err := s.wait(ctx); err != nil {
		return store.Object{}, err
	}
	return s.Store.Get(ctx, key)
}

// TestTheDefaultViewReadsAFarStoresReportsInTime: with the book's defaults (its read
// budget, defaultViewTimeout, and viewReadConcurrency), 120 ingress reports on a store
// 25 ms away are read whole: about 8 rounds of 16 GETs, some 200 ms, within the 2 s
// budget with room for a loaded machine. A budget cut to 100 ms (or reads one at a time:
// 3 s) fails: every view would be partial and every ?wait=applied answer 202, the
// incident the budget was sized for (hostile review 4, F10: the rewrite of the MinIO test
// that measured it left the defaults unpinned). The store's latency is real time: the
// budget is a deadline on the wall clock.
func TestTheDefaultViewReadsAFarStoresReportsInTime(t *testing.T) {
	const reports = 120
	inner := dirStore(t)
	c, m := newFleetClock(), newFleetMark(1, rev('a'))
	seedReports(t, inner, c, reports)
	a := nodeBook(farStore{Store: inner, rtt: 25 * time.Millisecond}, "vps-a", c, m)
	if a.ViewTimeout != defaultViewTimeout {
		t.Fatalf("the book's read budget %s, want its default %s", a.ViewTimeout, defaultViewTimeout)
	}
	start := time.Now()
	v := a.Fleet(t.Context(), StatusViewMaxAge)
	if v.Error != "" || len(v.Ingresses) != reports {
		t.Fatalf("a view of %d reports 25 ms away, read in %s: %d ingresses, error %q; want every report within the default budget %s",
			reports, time.Since(start).Round(time.Millisecond), len(v.Ingresses), v.Error, defaultViewTimeout)
	}
	t.Logf("%d reports 25 ms away read in %s (budget %s, %d at once)", reports, time.Since(start).Round(time.Millisecond), defaultViewTimeout, viewReadConcurrency)
}
