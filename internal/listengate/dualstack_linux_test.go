package listengate

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"
)

// The node's default listen address, ":7400", is one dual-stack IPv6 socket that IPv4
// clients reach too (as v4-mapped addresses): the gate and the drain work on it for both
// families.
func TestDrainOnADualStackSocket(t *testing.T) {
	ln, err := Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	hosts := []string{"127.0.0.1"}
	if probe, err := net.Listen("tcp", "[::1]:0"); err == nil {
		probe.Close()
		hosts = append(hosts, "::1")
	}
	var conns []net.Conn
	for i, h := range hosts {
		for j := range 4 {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(h, port), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "request %d\n", i*4+j)
			conns = append(conns, c)
		}
	}
	waitQueued(t, ln, len(conns))
	drained := drainAsync(ln)
	served := serve(ln)
	if err := <-drained; err != nil {
		t.Fatalf("Drain: %v", err)
	}
	for _, h := range hosts {
		if err := dialDropped(net.JoinHostPort(h, port)); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	closeAndCheckAnswered(t, ln, served, conns)
}
