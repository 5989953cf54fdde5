package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetcerts"
)

// The certificates section of /v1/status is fleetcerts.NameStatus on the wire
// (api.CertName, copied field by field in certsStatus): a field the manager adds must
// reach the wire, so a fully populated status must encode to the same JSON both ways.
func TestCertNameOnTheWireCarriesEveryManagerField(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	n := fleetcerts.NameStatus{Name: "*.shop.example.org", State: "needs-delegation", NotAfter: &now, Serial: "01",
		LastError: "e", NextAttempt: &now, Attempts: 2, ObtainedHere: true, Challenge: "dns-01", Phase: "p",
		Delegation: &fleetcerts.Delegation{CNAME: "_acme-challenge.shop.example.org", Target: "x.acme.fleet.example", InPlace: true, CheckedAt: &now}}
	// Every field set: a zero field would hide behind omitempty.
	v := reflect.ValueOf(n)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("fleetcerts.NameStatus.%s is not set in this test: set it, and copy it in certsStatus", v.Type().Field(i).Name)
		}
	}
	var got api.CertName = certNameOf(n)
	a, _ := json.Marshal(n)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Errorf("on the wire:\n got %s\nwant %s", b, a)
	}
}
