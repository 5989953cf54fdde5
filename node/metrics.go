package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/publish"
)

// metrics are the node's Prometheus metrics, on a private registry.
type metrics struct {
	reg           *prometheus.Registry
	refused       *prometheus.CounterVec // reason: one of httpapi.RefusalReasons
	longPolls     prometheus.Gauge
	polls         *prometheus.CounterVec
	storeRequests *prometheus.CounterVec // the store's requests by op (storecount.go)
}

// metricProbes read the node's state for gauges evaluated at scrape time (the
// subsystems register their own collectors: fleetcerts, ingress, self, probe).
type metricProbes struct {
	storeForeign func() bool
	// storeRequests counts store requests (see countingStore); registered when set.
	storeRequests *prometheus.CounterVec
}

func boolGauge(f func() bool) func() float64 {
	return func() float64 {
		if f != nil && f() {
			return 1
		}
		return 0
	}
}

func newMetrics(pub *publish.Publisher, probes metricProbes) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_ingress_polls_total",
			Help: "Routing polls by format and HTTP status.",
		}, []string{"format", "code"}),
	}
	revAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "scafo_revision_age_seconds",
		Help: "Seconds since the published revision first appeared (-1 before the first pass).",
	}, func() float64 {
		s := pub.Current()
		if s == nil {
			return -1
		}
		return time.Since(s.Since()).Seconds()
	})
	storeForeign := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "scafo_store_foreign",
		Help: "1 while the store is not the one this node served (or not yet checked after a restart): the last good document is served, writes are refused until an operator runs `scafo-node store adopt`.",
	}, boolGauge(probes.storeForeign))
	m.reg.MustRegister(m.polls, revAge, storeForeign,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scafo_requests_refused_total",
		Help: "Requests and connections refused by reason: write_rate (429, past writes.rate), token (401 no or bad token, 403 a token the endpoint refuses), token_lookups (429, the token-lookup budget spent), conn_reserve (503, the general connections full), conn_per_source (503, the address at limits.maxConnsPerSource), conn_limit (503 and closed, at limits.maxConns).",
	}, []string{"reason"})
	for _, r := range httpapi.RefusalReasons {
		m.refused.WithLabelValues(r) // every reason exported from the start
	}
	m.longPolls = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "scafo_longpolls_parked",
		Help: "Ingress polls (?wait= with If-None-Match) held open now, waiting for a new revision.",
	})
	m.reg.MustRegister(m.refused, m.longPolls)
	m.storeRequests = probes.storeRequests
	if probes.storeRequests != nil {
		m.reg.MustRegister(probes.storeRequests)
	}
	return m
}

// api is the series the HTTP API counts (node/httpapi).
func (m *metrics) api() httpapi.Metrics {
	return httpapi.Metrics{Registry: m.reg, Refused: m.refused, LongPolls: m.longPolls, Polls: m.polls}
}
