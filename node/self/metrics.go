package self

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterMetrics registers the record's gauges, read at scrape time: the name
// conflict (name.go) and the address warnings (address.go).
func (s *Record) RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "scafo_node_name_conflict",
			Help: "1 while another live node writes this node's record (two nodes with one node.name; /v1/status duplicateName names it).",
		}, gauge(func() bool { return s.Conflict(time.Now()) != nil })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "scafo_node_address_conflict",
			Help: "1 while another live node publishes this node's node.address (/v1/status addressWarning names it).",
		}, gauge(func() bool { a := s.AddressReport(); return a != nil && len(a.SharedWith) > 0 })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "scafo_node_address_loopback",
			Help: "1 while this node's node.address is a loopback or unspecified address in a fleet of more than one live node (/v1/status addressWarning).",
		}, gauge(func() bool { a := s.AddressReport(); return a != nil && a.Local })))
}

// gauge reads f as 0 or 1.
func gauge(f func() bool) func() float64 {
	return func() float64 {
		if f() {
			return 1
		}
		return 0
	}
}
