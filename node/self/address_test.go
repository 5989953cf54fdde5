package self

import (
	"slices"
	"testing"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// TestAddressComparisons: node.address values are compared as IPs (a mapped IPv4
// address is its IPv4 address), and loopback and unspecified addresses are local.
func TestAddressComparisons(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"10.0.0.1", "10.0.0.1", true},
		{"10.0.0.1", "10.0.0.2", false},
		{"::ffff:10.0.0.1", "10.0.0.1", true},
		{"fd00::1", "fd00:0:0::1", true},
		{"fd00::1", "fd00::2", false},
		{"not-an-ip", "not-an-ip", true},
		{"not-an-ip", "10.0.0.1", false},
	} {
		if got := sameAddress(c.a, c.b); got != c.same {
			t.Errorf("sameAddress(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
	for _, c := range []struct {
		a     string
		local bool
	}{
		{"127.0.0.1", true}, {"127.3.2.1", true}, {"::1", true}, {"::ffff:127.0.0.1", true},
		{"0.0.0.0", true}, {"::", true},
		{"10.0.0.1", false}, {"fd00::1", false}, {"not-an-ip", false},
	} {
		if got := localAddress(c.a); got != c.local {
			t.Errorf("localAddress(%q) = %v, want %v", c.a, got, c.local)
		}
	}
}

// TestATwinOfThisNodeIDOnItsAddressIsReported: a node of another name on this node's
// address that carries this node's id (a cloned machine image with its state dir) is
// reported while running once its record is written after this process started; this
// installation's record under an earlier name, last written before, is not.
func TestATwinOfThisNodeIDOnItsAddressIsReported(t *testing.T) {
	r := New(options(nil, "vps-a", "10.83.0.1", "n1"))
	now := r.started.Add(5 * time.Second)
	self := fleet.NodeRecord{Name: "vps-a", Address: "10.83.0.1", Seen: now, Boot: r.boot()}
	earlier := fleet.NodeRecord{Name: "old-name", Address: "10.83.0.1", Seen: r.started.Add(-10 * time.Second), Boot: &fleet.Boot{Node: "n1", ID: "prev"}}
	r.ObserveFleet([]fleet.NodeRecord{self, earlier}, now)
	if a := r.AddressReport(); a != nil && len(a.SharedWith) > 0 {
		t.Fatalf("this installation's record under an earlier name is reported as sharing the address: %+v", a)
	}
	twin := fleet.NodeRecord{Name: "vps-c", Address: "::ffff:10.83.0.1", Seen: now, Boot: &fleet.Boot{Node: "n1", ID: "clone"}}
	r.ObserveFleet([]fleet.NodeRecord{self, earlier, twin}, now)
	a := r.AddressReport()
	if a == nil || !slices.Equal(a.SharedWith, []string{"vps-c"}) {
		t.Fatalf("a live twin of this node id on its address: report %+v, want SharedWith [vps-c]", a)
	}
}
