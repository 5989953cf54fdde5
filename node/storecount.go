package node

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/store"
)

// requestCounter counts every request this node makes to the store, by operation
// (scafo_store_requests_total{op}), so an operator (and the cost-model test) sees what
// the fleet costs. A List counts once, whatever the number of pages it takes on S3
// (one per 1 000 keys).
type requestCounter struct {
	store.Store
	get, getIfChanged, list, put, del prometheus.Counter
}

func newStoreRequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scafo_store_requests_total",
		Help: "Requests this node made to the store, by operation (get, get_if_changed, list, put, delete).",
	}, []string{"op"})
}

func newRequestCounter(st store.Store, v *prometheus.CounterVec) *requestCounter {
	return &requestCounter{
		Store:        st,
		get:          v.WithLabelValues("get"),
		getIfChanged: v.WithLabelValues("get_if_changed"),
		list:         v.WithLabelValues("list"),
		put:          v.WithLabelValues("put"),
		del:          v.WithLabelValues("delete"),
	}
}

func (c *requestCounter) Get(ctx context.Context, key string) (store.Object, error) {
	c.get.Inc()
	return c.Store.Get(ctx, key)
}

func (c *requestCounter) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	c.getIfChanged.Inc()
	return c.Store.GetIfChanged(ctx, key, etag)
}

func (c *requestCounter) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	c.list.Inc()
	return c.Store.List(ctx, prefix)
}

func (c *requestCounter) Put(ctx context.Context, key string, value []byte, cond store.Condition) (string, error) {
	c.put.Inc()
	return c.Store.Put(ctx, key, value, cond)
}

func (c *requestCounter) Delete(ctx context.Context, key, ifMatch string) error {
	c.del.Inc()
	return c.Store.Delete(ctx, key, ifMatch)
}
