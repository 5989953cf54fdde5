package reconcile

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// passMetrics are the reconcile loop's series (Options.Metrics).
type passMetrics struct {
	dur     prometheus.Histogram
	errors  prometheus.Counter
	skipped prometheus.Gauge
}

// newPassMetrics registers the pass series on reg (nil: none kept).
func newPassMetrics(reg prometheus.Registerer) *passMetrics {
	if reg == nil {
		return nil
	}
	m := &passMetrics{
		dur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "scafo_reconcile_duration_seconds",
			Help:    "Duration of reconcile passes.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scafo_reconcile_errors_total",
			Help: "Reconcile passes that failed (the last good document stays published).",
		}),
		skipped: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scafo_skipped_objects",
			Help: "Store objects or entries skipped by the last pass, with reasons in /v1/status.",
		}),
	}
	reg.MustRegister(m.dur, m.errors, m.skipped)
	return m
}

// observe records one pass. skipped is -1 when the pass derived nothing (the store had
// not changed), which leaves the gauge at the last derivation's count.
func (m *passMetrics) observe(d time.Duration, err error, skipped int) {
	if m == nil {
		return
	}
	m.dur.Observe(d.Seconds())
	if err != nil {
		m.errors.Inc()
		return
	}
	if skipped >= 0 {
		m.skipped.Set(float64(skipped))
	}
}
