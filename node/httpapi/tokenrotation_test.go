package httpapi_test

import (
	"strings"
	"testing"

	"github.com/scafo/ingress/node"
)

// The previous tokens of a rotation act as the current ones on every route:
// TestEveryRouteAnswersEachCredentialAsItsRoleAllows (its *-previous credentials).

// TestAnEmptyPreviousTokenIsRefusedNamingTheSetting: an empty entry in *.previous
// would be a token nobody holds; the configuration names it.
func TestAnEmptyPreviousTokenIsRefusedNamingTheSetting(t *testing.T) {
	t.Parallel()
	cfg := node.NewConfig()
	cfg.Ingress.Previous = []string{""}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "ingress.previous[0]") {
		t.Fatalf("an empty previous token: %v, want an error naming ingress.previous[0]", err)
	}
}
