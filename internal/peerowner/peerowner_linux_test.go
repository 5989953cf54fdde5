package peerowner

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/peerowner/peerownertest"
)

// listenAs listens on addr as uid (peerownertest.ListenAs), accepting and holding every
// connection as a squatter would, until the test ends.
func listenAs(t *testing.T, uid int, network, addr string) net.Listener {
	t.Helper()
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	t.Cleanup(func() { // after the listener's close (cleanups run last first)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return peerownertest.ListenAs(t, uid, network, addr, func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, c)
	})
}

func dialChecked(t *testing.T, trust func(int) bool, addr string) (net.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return DialContext(trust)(ctx, "tcp", addr)
}

// TestASquattersListenerGetsNoConnection: a loopback listener of another user (nobody,
// 65534: a tenant's release) is refused before anything is written, the error naming
// the uid and the port; the same check passes a listener of a trusted user, on IPv4, on
// IPv6, and on a dual-stack socket reached over IPv4 (listed in tcp6, mapped). The
// node's own address (node.address, a public IP) reaches a wildcard listener of this
// machine as loopback does: a squatter's is refused there too (the CLI, Caddy beside a
// node, and the storage client dial it).
func TestASquattersListenerGetsNoConnection(t *testing.T) {
	rootOnly := func(uid int) bool { return uid == 0 }
	cases := []struct{ network, listen, dial string }{
		{"tcp4", "127.0.0.1:0", "127.0.0.1"},
		{"tcp6", "[::1]:0", "::1"},
		{"tcp", "[::]:0", "127.0.0.1"}, // dual stack, as systemd's ListenStream=7400
	}
	if own := ownIPv4(t); own != "" {
		cases = append(cases, struct{ network, listen, dial string }{"tcp", "[::]:0", own})
	} else {
		t.Log("no non-loopback IPv4 address on this machine: the own-address case is not run")
	}
	for _, tc := range cases {
		squat := listenAs(t, 65534, tc.network, tc.listen)
		addr := net.JoinHostPort(tc.dial, portOf(squat.Addr().String()))
		c, err := dialChecked(t, rootOnly, addr)
		var refused *Refused
		if !errors.As(err, &refused) || refused.UID != 65534 {
			if c != nil {
				c.Close()
			}
			t.Fatalf("%s: dialing a listener of uid 65534 gave %v, want a refusal naming uid 65534", addr, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "65534") || !strings.Contains(msg, "sport = :"+portOf(addr)) {
			t.Errorf("the refusal does not name the owner and the port: %s", msg)
		}
		own := listenAs(t, 0, tc.network, tc.listen)
		addr = net.JoinHostPort(tc.dial, portOf(own.Addr().String()))
		c, err = dialChecked(t, rootOnly, addr)
		if err != nil {
			t.Fatalf("%s: dialing root's listener: %v", addr, err)
		}
		c.Close()
	}
}

// ownIPv4 is a non-loopback IPv4 address of this machine, or "".
func ownIPv4(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// TestTrustedTakesRootTheServiceUserAndSelf: root, the caller's own uid and the named
// service user (when it exists) are trusted; another uid is not.
func TestTrustedTakesRootTheServiceUserAndSelf(t *testing.T) {
	trust := Trusted("nobody", 4242)
	for uid, want := range map[int]bool{0: true, 4242: true, 65534: true, 1000: false} {
		if got := trust(uid); got != want {
			t.Errorf("Trusted(nobody, 4242)(%d) = %v, want %v", uid, got, want)
		}
	}
	if Trusted("no-such-user-here", 4242)(65534) {
		t.Error("a missing service user trusted 65534")
	}
}

func TestParseAddrPort(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1CE8":                         "127.0.0.1:7400",
		"0000000000000000FFFF00000100007F:1CE8": "127.0.0.1:7400",
		"00000000000000000000000001000000:0050": "[::1]:80",
	} {
		got, err := parseAddrPort(in)
		if err != nil || got.String() != want {
			t.Errorf("parseAddrPort(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0100007F", "XYZ:1", "0100:1", "0100007F:FFFFF"} {
		if _, err := parseAddrPort(bad); err == nil {
			t.Errorf("parseAddrPort(%q) accepted", bad)
		}
	}
}
