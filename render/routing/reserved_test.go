package routing

import (
	"strings"
	"testing"
)

// No custom-domain claim, and so no route, may name a host under .invalid (RFC 6761):
// the Traefik plugin's applied probe routes scafo-applied.invalid to noop@internal and
// takes its 418 as "this configuration serves". A tenant's route for that host, whose
// backend answers 418, would make every ?wait=applied answer before the write serves.
func TestClaimsCannotNameTheAppliedProbeHost(t *testing.T) {
	for _, h := range []string{"scafo-applied.invalid", "x.scafo-applied.invalid", "*.scafo-applied.invalid", "a.b.invalid"} {
		err := ValidateCustomHost("host", h)
		if err == nil || !strings.Contains(err.Error(), "invalid") {
			t.Errorf("ValidateCustomHost(%q) = %v, want a refusal naming .invalid", h, err)
		}
	}
	for _, h := range []string{"invalid.example.org", "shop.invalidx", "*.invalid.example.org"} {
		if err := ValidateCustomHost("host", h); err != nil {
			t.Errorf("ValidateCustomHost(%q) = %v, want nil", h, err)
		}
	}
}
