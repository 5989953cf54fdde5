package ingress_test

// The ingress book behind the node's HTTP API, in process (node/internal/apitest): every
// serial bump is taken at once by a pass of this node, so a write is published as soon
// as it is announced. What needs a listener, a node or a ticker is tested with the books
// alone (sharedreports_test.go, await_test.go).

import (
	"testing"

	"github.com/scafo/ingress/node/internal/apitest"
)

const (
	ipIngress = apitest.Ingress
	ipAdmin   = apitest.Admin
)

// inProcess is the API of node vps-a under test.
type inProcess struct{ *apitest.API }

// newInProcess builds the API of node vps-a, answering to the names hosts too.
func newInProcess(t testing.TB, hosts ...string) *inProcess {
	t.Helper()
	return newInProcessWith(t, apitest.Options{Hosts: hosts})
}

func newInProcessWith(t testing.TB, o apitest.Options) *inProcess {
	t.Helper()
	o.PassOnBump = true
	return &inProcess{apitest.New(t, o)}
}
