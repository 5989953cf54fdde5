package self

import "testing"

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
