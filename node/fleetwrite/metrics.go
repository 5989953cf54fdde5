package fleetwrite

import "github.com/prometheus/client_golang/prometheus"

// writeMetrics are the writer's series (Config.Metrics).
type writeMetrics struct {
	writes       *prometheus.CounterVec
	routeRefused *prometheus.CounterVec
}

// newWriteMetrics registers the writer's series on reg (nil: none kept).
func newWriteMetrics(reg prometheus.Registerer) *writeMetrics {
	if reg == nil {
		return nil
	}
	m := &writeMetrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_store_writes_total",
			Help: "Writes through this node's API by kind and result.",
		}, []string{"kind", "result"}),
		routeRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_routing_changes_refused_total",
			Help: "Routing changes this node refused (429) because the account's fleet-wide budget (writes.routeBurst, writes.routePerMinute) was spent, by kind of change (instance, paths, app, claim).",
		}, []string{"change"}),
	}
	reg.MustRegister(m.writes, m.routeRefused)
	return m
}

// committed counts a change that bumped the serial.
func (m *writeMetrics) committed(action string) {
	if m != nil {
		m.writes.WithLabelValues(action, "ok").Inc()
	}
}

// refused counts a routing change the account's budget refused.
func (m *writeMetrics) refused(change string) {
	if m != nil {
		m.routeRefused.WithLabelValues(change).Inc()
	}
}
