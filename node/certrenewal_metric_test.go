package node

import (
	"bytes"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/render"
)

// TestCertificateRenewalFailingIsExportedPerHeldName: scafo_certificate_renewal_failing
// has one series per certificate held, 1 for the one whose renewal fails and 0 for the
// others, and none at all without fleet certificates (no acme.enabled). Before, no
// metric said a renewal failed: the alert guessed from the days left.
func TestCertificateRenewalFailingIsExportedPerHeldName(t *testing.T) {
	t.Parallel()
	scrape := func(renewals func() []fleetcerts.Renewal) string {
		t.Helper()
		m := newMetrics(publish.New(render.Options{}, t.TempDir(), nil), metricProbes{certRenewals: renewals})
		mfs, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, mf := range mfs {
			if mf.GetName() == "scafo_certificate_renewal_failing" {
				expfmt.MetricFamilyToText(&b, mf)
			}
		}
		return b.String()
	}
	got := scrape(func() []fleetcerts.Renewal {
		return []fleetcerts.Renewal{{Name: "a.example.org"}, {Name: "b.example.org", Failing: true, Error: "acme: rate limited"}}
	})
	for _, want := range []string{
		`scafo_certificate_renewal_failing{name="a.example.org"} 0` + "\n",
		`scafo_certificate_renewal_failing{name="b.example.org"} 1` + "\n",
	} {
		if !bytes.Contains([]byte(got), []byte(want)) {
			t.Fatalf("exported\n%s\nwant a line %q", got, want)
		}
	}
	if got := scrape(nil); got != "" {
		t.Fatalf("without fleet certificates: %q, want nothing", got)
	}
}
