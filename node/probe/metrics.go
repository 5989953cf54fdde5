package probe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/render/fleet"
)

// probeMetrics are the prober's Prometheus metrics.
type probeMetrics struct {
	results     *prometheus.CounterVec // kind, result
	transitions *prometheus.CounterVec // to
	skipped     prometheus.Counter
	holdDowns   prometheus.Counter
	duration    *prometheus.HistogramVec // kind
}

func newProbeMetrics(reg prometheus.Registerer, down func() float64) *probeMetrics {
	m := &probeMetrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_instance_probe_results_total",
			Help: "Probes of this node's instances by kind (tcp, http) and result (up, down).",
		}, []string{"kind", "result"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_instance_probe_transitions_total",
			Help: "Instances whose probe verdict changed, by the state entered (up, down).",
		}, []string{"to"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scafo_instance_probe_skipped_total",
			Help: "Probes not started because the instance's previous probe was still in flight (slow or hanging instances, or more instances than probe.concurrency can probe in one interval).",
		}),
		holdDowns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scafo_instance_probe_hold_downs_total",
			Help: "Recoveries of a flapping instance held down (not published up) by flap damping: a hold-down begun or extended.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scafo_instance_probe_duration_seconds",
			Help:    "Duration of instance probes by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, []string{"kind"}),
	}
	downGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "scafo_instance_probe_down",
		Help: "This node's instances its probes hold down (left out of its record whatever their declared readiness).",
	}, down)
	reg.MustRegister(m.results, m.transitions, m.skipped, m.holdDowns, m.duration, downGauge)
	return m
}

// down counts instances held down by their probes or refused a probe (the
// scafo_instance_probe_down gauge).
func (p *Prober) down() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for app, st := range p.states {
		if !st.up || p.refusal(app, fleet.Instance{Port: st.target.port}, p.shared) != "" {
			n++
		}
	}
	return float64(n)
}
