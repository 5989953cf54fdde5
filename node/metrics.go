package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the node's Prometheus metrics, on a private registry.
type metrics struct {
	reg             *prometheus.Registry
	polls           *prometheus.CounterVec
	reconcileDur    prometheus.Histogram
	reconcileErrors prometheus.Counter
	skipped         prometheus.Gauge
	storeWrites     *prometheus.CounterVec
}

func newMetrics(pub *publisher) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_ingress_polls_total",
			Help: "Routing polls by format and HTTP status.",
		}, []string{"format", "code"}),
		reconcileDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "scafo_reconcile_duration_seconds",
			Help:    "Duration of reconcile passes.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
		reconcileErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scafo_reconcile_errors_total",
			Help: "Reconcile passes that failed (the last good document stays published).",
		}),
		skipped: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scafo_skipped_objects",
			Help: "Store objects or entries skipped by the last pass, with reasons in /v1/status.",
		}),
		storeWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_store_writes_total",
			Help: "Writes through this node's API by kind and result.",
		}, []string{"kind", "result"}),
	}
	revAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "scafo_revision_age_seconds",
		Help: "Seconds since the published revision first appeared (-1 before the first pass).",
	}, func() float64 {
		s := pub.cur.Load()
		if s == nil {
			return -1
		}
		return time.Since(s.since).Seconds()
	})
	m.reg.MustRegister(m.polls, m.reconcileDur, m.reconcileErrors, m.skipped, m.storeWrites, revAge,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observePass records one pass. skipped is -1 when the pass derived nothing (the
// store had not changed), which leaves the gauge at the last derivation's count.
func (m *metrics) observePass(d time.Duration, err error, skipped int) {
	m.reconcileDur.Observe(d.Seconds())
	if err != nil {
		m.reconcileErrors.Inc()
		return
	}
	if skipped >= 0 {
		m.skipped.Set(float64(skipped))
	}
}
