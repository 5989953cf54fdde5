//go:build linux

package front

import (
	"testing"

	"github.com/scafo/ingress/internal/peerowner/peerownertest"
)

// The front's own client (New given none) never sends the ingress token to a process of
// another user that took the node's port: it checks the listener's owner before it
// writes a byte (internal/peerowner; docs/security.md, "The node's port").
func TestTheFrontSendsNothingToAPortSquatter(t *testing.T) {
	addr, wait := peerownertest.Squatter(t)
	serveFront(t, frontConfig("http://"+addr), nil)
	wait()
}
