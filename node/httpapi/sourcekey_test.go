package httpapi

// Hostile review (round four): an IPv6 client holds a whole /64 (2^64 addresses), so a
// limit kept per IPv6 address is none. Each per-source limit keys an IPv6 source by
// its /64 (sourceKey): the connections per source (issue 25 item 6), the token-lookup
// budget per client (item 4) and the rejection log.

import (
	"fmt"
	"net"
	"testing"
)

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }
func (c addrConn) Close() error         { return nil }

func tcpAddr(s string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		panic(err)
	}
	return a
}

func TestSourceKeyOfAnIPv6AddressIsItsSlash64(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.9":            "203.0.113.9",
		"::ffff:203.0.113.9":     "203.0.113.9",
		"2001:db8:1:2:3:4:5:6":   "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":     "2001:db8:1:2::/64",
		"fe80::1%eth0":           "fe80::/64",
		"not-an-address":         "not-an-address",
		"2001:db8:1:3::1":        "2001:db8:1:3::/64",
		"::1":                    "::/64",
		"2001:DB8:1:2:0:0:0:abc": "2001:db8:1:2::/64",
	} {
		if got := sourceKey(in); got != want {
			t.Errorf("sourceKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestIPv6AddressesOfOneSlash64ShareAPerSourceConnectionCap: connections from many
// addresses of one /64 hold no more general slots than one address may.
func TestIPv6AddressesOfOneSlash64ShareAPerSourceConnectionCap(t *testing.T) {
	l := newConnLimiter(nil, 64, 8, 4, nil)
	general := 0
	for i := range 40 {
		lc := l.wrap(addrConn{remote: tcpAddr(fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1))})
		if !lc.reserved {
			general++
		}
	}
	if general != 4 {
		t.Errorf("40 connections from 40 addresses of one /64 took %d general slots, want 4 (limits.maxConnsPerSource)", general)
	}
	if lc := l.wrap(addrConn{remote: tcpAddr("[2001:db8:1:3::1]:4000")}); lc.reserved {
		t.Errorf("a connection from another /64 was refused a general slot")
	}
	if lc := l.wrap(addrConn{remote: tcpAddr("198.51.100.7:4000")}); lc.reserved {
		t.Errorf("a connection from an IPv4 address was refused a general slot")
	}
}
