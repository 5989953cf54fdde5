//go:build linux

package storageclient

import (
	"context"
	"testing"

	"github.com/scafo/ingress/internal/peerowner/peerownertest"
	"github.com/scafo/ingress/internal/testnode"
)

// The storage client's own HTTP client (Options without one) never sends the ingress
// token to a process of another user that took the node's port: it checks the
// listener's owner before it writes a byte (internal/peerowner; docs/security.md, "The
// node's port").
func TestTheStorageClientSendsNothingToAPortSquatter(t *testing.T) {
	addr, wait := peerownertest.Squatter(t)
	c, err := New("http://"+addr, testnode.IngressToken, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(context.Background(), "certificates/x"); err == nil {
		t.Fatal("Load through a squatter's port succeeded")
	}
	wait()
}
