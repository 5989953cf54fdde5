package ingress

import (
	"testing"

	"github.com/scafo/ingress/node/api"
)

// TestTheFrontReportsWhatItAppliedAsThePluginDoes: the layer-4 front (kind "front")
// is held at the serial and revision it says it applied (capped at this node's own
// serial, as the plugin's). (An unknown kind, and an HTTP provider claiming what it
// applied, are refused naming the header: httpapi's TestParsePollReadsEveryInputOnce.)
func TestTheFrontReportsWhatItAppliedAsThePluginDoes(t *testing.T) {
	b := probeBook()
	rep, err := ParseReport(ReportHeaders{Name: "front-a", Kind: api.KindFront, AppliedSerial: "250", AppliedRevision: rev('d')})
	if err != nil {
		t.Fatal(err)
	}
	p, why := b.Begin(rep)
	if why != "" {
		t.Fatal(why)
	}
	b.End(p, nil)
	if r := held(b, "front-a"); r.Kind != api.KindFront || r.Serial != 100 || r.Revision != rev('d') {
		t.Fatalf("held %+v, want kind front at serial 100 (capped) and its revision", r)
	}
}
