package fleetcerts

import "github.com/prometheus/client_golang/prometheus"

// The fleet certificates' metrics: the state and expiry per name, and whether a held
// certificate's renewal fails (RegisterMetrics registers both).

var (
	certStateDesc = prometheus.NewDesc("scafo_certificate_state",
		"Fleet certificate state per name: 1 for the current state (pending, valid, failed, backlog, needs-delegation).",
		[]string{"name", "state"}, nil)
	certNotAfterDesc = prometheus.NewDesc("scafo_certificate_not_after_seconds",
		"Expiry (Unix seconds) of the certificate this node holds for a name.", []string{"name"}, nil)
	certRenewalFailingDesc = prometheus.NewDesc("scafo_certificate_renewal_failing",
		"1 while the last renewal of the certificate this node holds for a name failed (it is inside its renewal window; /v1/status certificates lastError says why), 0 for every other certificate held.",
		[]string{"name"}, nil)
)

// RegisterMetrics registers m's per-name state and expiry and its renewals' failing,
// read at scrape time. A node without acme.enabled has no Manager and registers none
// (no series, as a Manager holding no certificate exports none).
func (m *Manager) RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(statusCollector{m}, renewalCollector{m.Renewals})
}

// statusCollector exports, per name, the state and the certificate's expiry.
type statusCollector struct{ m *Manager }

func (c statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- certStateDesc
	ch <- certNotAfterDesc
}

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.m.Status() {
		ch <- prometheus.MustNewConstMetric(certStateDesc, prometheus.GaugeValue, 1, n.Name, n.State)
		if n.NotAfter != nil {
			ch <- prometheus.MustNewConstMetric(certNotAfterDesc, prometheus.GaugeValue, float64(n.NotAfter.Unix()), n.Name)
		}
	}
}

// renewalCollector exports, per certificate renewals lists, whether its renewal is
// failing.
type renewalCollector struct{ renewals func() []Renewal }

func (c renewalCollector) Describe(ch chan<- *prometheus.Desc) { ch <- certRenewalFailingDesc }

func (c renewalCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.renewals() {
		v := 0.0
		if r.Failing {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(certRenewalFailingDesc, prometheus.GaugeValue, v, r.Name)
	}
}
