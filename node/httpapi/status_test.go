package httpapi_test

import (
	"strings"
	"testing"
)

// TestStatusSaysNoIngressPollsAFleetWithoutOne: a node that no ingress has polled says
// so among /v1/status's warnings (statusWarnings has every case); the list is there,
// never null, for the page to read.
func TestStatusSaysNoIngressPollsAFleetWithoutOne(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	st := n.statusMap()
	ws, ok := st["warnings"].([]any)
	if !ok || len(ws) != 1 || !strings.HasPrefix(ws[0].(string), "no ingress polls this fleet") {
		t.Fatalf("warnings %#v, want [no ingress polls this fleet…]", st["warnings"])
	}
}
