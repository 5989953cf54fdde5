//go:build linux

package scafo

import (
	"errors"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scafo/ingress/internal/fakenode"
)

// A Caddy polling its node on loopback never sends the ingress token to a process of
// another user that took the node's port (a tenant's release, the node stopped): the
// poller's own client checks the listener's owner before it writes a byte
// (internal/peerowner; docs/security.md, "The node's port"). Root only: the squatter's
// socket is created and accepted under fsuid nobody (65534), as internal/peerowner's
// tests do.
func TestThePollerSendsNothingToAPortSquatter(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root (a socket of another user)")
		}
		t.Skip("needs root (a socket of another user)")
	}
	type read struct {
		n   int
		err error
	}
	got, lnc, errc := make(chan read, 1), make(chan net.Listener, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		unix.Setfsuid(65534)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			errc <- err
			return
		}
		lnc <- ln
		c, err := ln.Accept() // on this thread: the accepted socket is nobody's too
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := c.Read(make([]byte, 1))
		got <- read{n, err}
	}()
	var ln net.Listener
	select {
	case ln = <-lnc:
	case err := <-errc:
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p, err := NewPoller(PollerConfig{Endpoints: []string{"http://" + ln.Addr().String()}, Token: fakenode.Token,
		Name: "caddy-test", Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Stop)
	select {
	case r := <-got:
		var ne net.Error
		switch {
		case r.n != 0:
			t.Fatal("the squatter read the poller's request (its ingress token): want the connection closed unwritten")
		case errors.As(r.err, &ne) && ne.Timeout():
			t.Fatal("the poller neither wrote nor closed its connection to the squatter in 30 s: want it closed at once")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the poller never connected to the squatter's port")
	}
}
