//go:build linux

package scafo

import (
	"testing"
	"time"

	"github.com/scafo/ingress/internal/fakenode"
	"github.com/scafo/ingress/internal/peerowner/peerownertest"
)

// A Caddy polling its node on loopback never sends the ingress token to a process of
// another user that took the node's port (a tenant's release, the node stopped): the
// poller's own client checks the listener's owner before it writes a byte
// (internal/peerowner; docs/security.md, "The node's port").
func TestThePollerSendsNothingToAPortSquatter(t *testing.T) {
	addr, wait := peerownertest.Squatter(t)
	p, err := NewPoller(PollerConfig{Endpoints: []string{"http://" + addr}, Token: fakenode.Token,
		Name: "caddy-test", Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Stop)
	wait()
}
