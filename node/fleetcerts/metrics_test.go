package fleetcerts

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// TestCertificateRenewalFailingIsExportedPerHeldName: scafo_certificate_renewal_failing
// has one series per certificate held, 1 for the one whose renewal fails and 0 for the
// others, and none while none is held. Before, no metric said a renewal failed: the
// alert guessed from the days left.
func TestCertificateRenewalFailingIsExportedPerHeldName(t *testing.T) {
	t.Parallel()
	scrape := func(renewals []Renewal) string {
		return scrapeMetric(t, "scafo_certificate_renewal_failing", renewalCollector{func() []Renewal { return renewals }})
	}
	got := scrape([]Renewal{{Name: "a.example.org"}, {Name: "b.example.org", Failing: true, Error: "acme: rate limited"}})
	for _, want := range []string{
		`scafo_certificate_renewal_failing{name="a.example.org"} 0` + "\n",
		`scafo_certificate_renewal_failing{name="b.example.org"} 1` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("exported\n%s\nwant a line %q", got, want)
		}
	}
	if got := scrape(nil); got != "" {
		t.Fatalf("no certificate held: %q, want nothing", got)
	}
}

// scrapeMetric is the text exposition of the family name that collectors export.
func scrapeMetric(t *testing.T, name string, collectors ...prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if mf.GetName() == name {
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.String()
}
