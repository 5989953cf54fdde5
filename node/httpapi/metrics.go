package httpapi

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// apiMetrics are the API's series, registered by New on the node's registry (served
// on /metrics with every other subsystem's).
type apiMetrics struct {
	refused   *prometheus.CounterVec // reason: one of RefusalReasons
	longPolls prometheus.Gauge
	polls     *prometheus.CounterVec // format, code
}

func newMetrics(reg prometheus.Registerer) (apiMetrics, error) {
	m := apiMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_requests_refused_total",
			Help: "Requests and connections refused by reason: write_rate (429, past writes.rate), token (401 no or bad token, 403 a token the endpoint refuses), token_lookups (429, the token-lookup budget spent), read_rate (429, the read-only token past its store-read budget), conn_reserve (503, the general connections full), conn_per_source (503, the address at limits.maxConnsPerSource), conn_limit (503 and closed, at limits.maxConns).",
		}, []string{"reason"}),
		longPolls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scafo_longpolls_parked",
			Help: "Ingress polls (?wait= with If-None-Match) held open now, waiting for a new revision.",
		}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_ingress_polls_total",
			Help: "Routing polls by format and HTTP status.",
		}, []string{"format", "code"}),
	}
	for _, r := range RefusalReasons {
		m.refused.WithLabelValues(r) // every reason exported from the start
	}
	for _, c := range []prometheus.Collector{m.refused, m.longPolls, m.polls} {
		if err := reg.Register(c); err != nil {
			return m, fmt.Errorf("httpapi: registering the API's series: %w", err)
		}
	}
	return m, nil
}
