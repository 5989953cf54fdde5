package httpapi_test

import (
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
)

// TestPreviousTokensAreAcceptedDuringARotation: with the new token configured and the
// old one under *.previous, clients on either work, so a rotation has no window in
// which a Traefik or an operator holds a refused token.
func TestPreviousTokensAreAcceptedDuringARotation(t *testing.T) {
	t.Parallel()
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Ingress.Previous = []string{"old-ingress-token-0001"}
	cfg.Admin.Previous = []string{"old-admin-token-00001"}
	cfg.Readonly.Previous = []string{"old-readonly-token-01"}
	n := testnode.Start(t, cfg)
	n.WaitReady()
	for _, tok := range []string{testnode.IngressToken, "old-ingress-token-0001", testnode.AdminToken, "old-admin-token-00001",
		testnode.ReadOnlyToken, "old-readonly-token-01"} {
		if resp, _ := n.Get("/v1/ingress/routes", tok); resp.StatusCode != 200 {
			t.Errorf("poll with %.9s…: %d", tok, resp.StatusCode)
		}
	}
	n.Must(201, "PUT", "/v1/apps/shop", "old-admin-token-00001", `{"account":"acme"}`)
	n.Must(403, "PUT", "/v1/apps/blog", "old-ingress-token-0001", `{"account":"acme"}`) // an ingress token never writes
	n.Must(200, "GET", "/v1/audit", "old-readonly-token-01", "")                        // the read-only token reads it
	n.Must(403, "PUT", "/v1/apps/blog", "old-readonly-token-01", `{"account":"acme"}`)  // and never writes
	if resp, _ := n.Get("/v1/ingress/routes", "not-a-token-at-all-000"); resp.StatusCode != 401 {
		t.Errorf("an unknown token: %d, want 401", resp.StatusCode)
	}
	bad := testnode.Config(t, "vps-a", t.TempDir())
	bad.Ingress.Previous = []string{""}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "ingress.previous[0]") {
		t.Fatalf("an empty previous token: %v, want an error naming ingress.previous[0]", err)
	}
}
