//go:build linux

// Package peerownertest holds listeners of another user for tests of internal/peerowner
// and of the clients that send a token to a node on loopback through it. Root only.
package peerownertest

import (
	"errors"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ListenAs listens on addr with a socket created under fsuid uid (a socket's owner is
// its creator's filesystem uid) and accepts its connections on that one thread (an
// accepted socket is owned by its acceptor's fsuid, sock_graft; one still queued by the
// listener's), handing each to handle. The listener closes with the test. Root only:
// skipped without it, failed under CI.
func ListenAs(t *testing.T, uid int, network, addr string, handle func(net.Conn)) net.Listener {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root (a socket of another user)")
		}
		t.Skip("needs root (a socket of another user)")
	}
	lnc, errc := make(chan net.Listener, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		unix.Setfsuid(uid)
		ln, err := net.Listen(network, addr)
		if err != nil {
			errc <- err
			return
		}
		lnc <- ln
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	var ln net.Listener
	select {
	case ln = <-lnc:
	case err := <-errc:
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// Squatter listens on 127.0.0.1 as nobody (65534, a tenant's release that took the
// node's port) and returns its address. Wait fails the test unless a client connects
// within a minute and closes its first connection without writing a byte: nothing, the
// ingress token least of all, may reach a process of another user (internal/peerowner).
func Squatter(t *testing.T) (addr string, wait func()) {
	t.Helper()
	type read struct {
		n   int
		err error
	}
	got := make(chan read, 1)
	first := true
	ln := ListenAs(t, 65534, "tcp", "127.0.0.1:0", func(c net.Conn) {
		defer c.Close()
		if !first {
			return
		}
		first = false
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := c.Read(make([]byte, 1))
		got <- read{n, err}
	})
	return ln.Addr().String(), func() {
		t.Helper()
		select {
		case r := <-got:
			var ne net.Error
			switch {
			case r.n != 0:
				t.Fatal("the squatter read the client's request (its token): want the connection closed unwritten")
			case errors.As(r.err, &ne) && ne.Timeout():
				t.Fatal("the client neither wrote nor closed its connection to the squatter in 30 s: want it closed at once")
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the client never connected to the squatter's port")
		}
	}
}
