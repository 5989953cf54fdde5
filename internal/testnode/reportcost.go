package testnode

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/s3"
)

// ReportCost counts store requests on ingresses/ by method ("get", "list", "put").
type ReportCost struct {
	store.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *ReportCost) count(method, key string) {
	if strings.HasPrefix(key, ingress.Prefix) {
		c.mu.Lock()
		c.n[method]++
		c.mu.Unlock()
	}
}

func (c *ReportCost) Get(ctx context.Context, key string) (store.Object, error) {
	c.count("get", key)
	return c.Store.Get(ctx, key)
}

func (c *ReportCost) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.count("list", prefix)
	return c.Store.List(ctx, prefix)
}

func (c *ReportCost) Put(ctx context.Context, key string, v []byte, cond store.Condition) (string, error) {
	c.count("put", key)
	return c.Store.Put(ctx, key, v, cond)
}

// Counts is the calls counted so far.
func (c *ReportCost) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// PrefixRoute sends the calls on keys under Prefix to another client of the same
// store (To), so that client's counters (HTTP requests on S3) are those keys' alone.
type PrefixRoute struct {
	store.Store
	Prefix string
	To     store.Store
}

func (r PrefixRoute) on(key string) store.Store {
	if strings.HasPrefix(key, r.Prefix) {
		return r.To
	}
	return r.Store
}

func (r PrefixRoute) Get(ctx context.Context, key string) (store.Object, error) {
	return r.on(key).Get(ctx, key)
}

func (r PrefixRoute) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	return r.on(key).GetIfChanged(ctx, key, etag)
}

func (r PrefixRoute) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	return r.on(prefix).List(ctx, prefix)
}

func (r PrefixRoute) Put(ctx context.Context, key string, v []byte, cond store.Condition) (string, error) {
	return r.on(key).Put(ctx, key, v, cond)
}

func (r PrefixRoute) Delete(ctx context.Context, key, ifMatch string) error {
	return r.on(key).Delete(ctx, key, ifMatch)
}

// CountedReports is a node's store on be that counts the calls on ingresses/; those go
// through a client of their own, whose HTTP requests httpOf counts on S3 (the reports'
// alone: the reconcile ticks use the other client; zero on a directory).
func CountedReports(t *testing.T, be ReportBackend) (rc *ReportCost, httpOf func() s3.Stats) {
	reports := be.Open(t)
	rc = &ReportCost{Store: PrefixRoute{Store: be.Open(t), Prefix: ingress.Prefix, To: reports}, n: map[string]int{}}
	httpOf = func() s3.Stats { return s3.Stats{ByMethod: map[string]int64{}} }
	if s, ok := reports.(*s3.Store); ok {
		httpOf = s.Stats
	}
	return rc, httpOf
}

// CostOf runs f and returns the calls on ingresses/ and HTTP requests it cost.
func CostOf(rc *ReportCost, httpOf func() s3.Stats, f func()) (map[string]int, s3.Stats) {
	before, hb := rc.Counts(), httpOf()
	f()
	d := rc.Counts()
	for k := range d {
		if d[k] -= before[k]; d[k] == 0 {
			delete(d, k)
		}
	}
	return d, httpOf().Sub(hb)
}
