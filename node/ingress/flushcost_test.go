package ingress

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
)

// reportCalls is a store that counts the calls on ingresses/ (put, list, get).
type reportCalls struct {
	store.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *reportCalls) note(op, key string) {
	if strings.HasPrefix(key, Prefix) {
		c.mu.Lock()
		c.n[op]++
		c.mu.Unlock()
	}
}

func (c *reportCalls) Get(ctx context.Context, key string) (store.Object, error) {
	c.note("get", key)
	return c.Store.Get(ctx, key)
}

func (c *reportCalls) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	c.note("get", key)
	return c.Store.GetIfChanged(ctx, key, etag)
}

func (c *reportCalls) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.note("list", prefix)
	return c.Store.List(ctx, prefix)
}

func (c *reportCalls) Put(ctx context.Context, key string, v []byte, cond store.Condition) (string, error) {
	c.note("put", key)
	return c.Store.Put(ctx, key, v, cond)
}

// since is the calls counted since before (zero counts left out).
func (c *reportCalls) since(before map[string]int) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := map[string]int{}
	for k, v := range c.n {
		if v-before[k] != 0 {
			d[k] = v - before[k]
		}
	}
	return d
}

func (c *reportCalls) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// TestAnIdleIngressCostsOneWritePerRefreshAndNoRead: an ingress whose long-poll is held
// (nothing changes) for longer than lostAfter is never lost, and costs one report write
// per refresh (lostAfter/4) and no read; a status asked for mid-poll costs one LIST and
// a GET of the one report new to the view; once the report has stopped changing, a
// status costs one LIST and no GET. Stepped as the node schedules it (Flush every
// MinWriteGap) on a virtual clock.
func TestAnIdleIngressCostsOneWritePerRefreshAndNoRead(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	b, inner := viewBook(t, now) // lostAfter 2s: a refresh every 500ms
	st := &reportCalls{Store: inner, n: map[string]int{}}
	b.st = st
	b.Now = func() time.Time { return now }
	ctx := t.Context()

	const held = 3 * time.Second
	p, why := b.Begin(Report{Name: "edge-1", Kind: api.KindPlugin}) // one long-poll, held throughout
	if why != "" {
		t.Fatal(why)
	}
	statusAsked := false
	for ; !now.After(t0.Add(held)); now = now.Add(MinWriteGap) {
		b.Flush(ctx, now)
		if !statusAsked && now.Sub(t0) >= 2*time.Second+500*time.Millisecond { // past lostAfter
			statusAsked = true
			before := st.counts()
			v := b.Fleet(ctx, StatusViewMaxAge)
			if len(v.Ingresses) != 1 || v.Ingresses[0].State == "lost" {
				t.Errorf("edge-1 while its long-poll is held past lostAfter: %+v", v.Ingresses)
			}
			if d := st.since(before); !maps.Equal(d, map[string]int{"list": 1, "get": 1}) {
				t.Errorf("reads of ingresses/ for one status: %v, want one LIST and one GET", d)
			}
		}
	}
	now = t0.Add(held)
	b.End(p, nil)
	for range 2 {
		now = now.Add(MinWriteGap)
		b.Flush(ctx, now)
	}
	// Written when first seen and at every refresh while held: 0, 0.5s, … 3s.
	refreshes := int(held / (2 * time.Second / 4))
	if c := st.counts(); c["put"] != refreshes+1 {
		t.Errorf("%d report writes in %s, want one per refresh (%d) plus the first", c["put"], held, refreshes)
	}

	// Once the views read above have aged: the first status reads the report as last
	// written, the next costs one LIST and no GET.
	statusCost := func() map[string]int {
		now = now.Add(StatusViewMaxAge + 100*time.Millisecond)
		before := st.counts()
		if v := b.Fleet(ctx, StatusViewMaxAge); len(v.Ingresses) != 1 || v.Ingresses[0].Applied == nil {
			t.Fatalf("edge-1 %+v, want listed", v.Ingresses)
		}
		return st.since(before)
	}
	statusCost()
	if d := statusCost(); !maps.Equal(d, map[string]int{"list": 1}) {
		t.Errorf("a status with no report changed since the last: store calls on ingresses/ %v, want one LIST", d)
	}
}
