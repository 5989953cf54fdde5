package node

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/scafo/ingress/node/publish"
)

// metrics are the node's Prometheus metrics, on a private registry.
type metrics struct {
	reg           *prometheus.Registry
	storeRequests *prometheus.CounterVec // the store's requests by op (storecount.go)
}

// metricProbes read the node's state for gauges evaluated at scrape time (the
// subsystems register their own collectors: httpapi, fleetcerts, ingress, self, probe).
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

// runtimeCollectors are the Go runtime's and the process's collectors: one pair per
// process, registered with every server's registry (a collector may be registered with
// several; the Go collector locks its own reads). Its series describe the process, not
// a server, and building the Go collector matches every runtime metric against its
// rules by regexp, which a process that starts many servers (the fleet simulator)
// paid at each start.
var runtimeCollectors = sync.OnceValues(func() (prometheus.Collector, prometheus.Collector) {
	return collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
})

func newMetrics(pub *publish.Publisher, probes metricProbes) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
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
	goColl, procColl := runtimeCollectors()
	m.reg.MustRegister(revAge, storeForeign, goColl, procColl)
	m.storeRequests = probes.storeRequests
	if probes.storeRequests != nil {
		m.reg.MustRegister(probes.storeRequests)
	}
	return m
}
