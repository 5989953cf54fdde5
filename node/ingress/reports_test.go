package ingress_test

import (
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// Reports ride the routing endpoints, which the public apex never routes.
func TestReportsAreNotReachableThroughTheApex(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/v1/ingress/", "/v1/status"} {
		found := false
		for _, d := range routing.DeniedAPIPrefixes {
			found = found || strings.HasPrefix(p, d)
		}
		if !found {
			t.Errorf("%s is not under a denied apex prefix %v", p, routing.DeniedAPIPrefixes)
		}
	}
}
