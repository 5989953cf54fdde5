//go:build linux

// Package peerownertest is a port squatter for tests of the clients that send a token
// to a node on loopback: a listener of another user (nobody, 65534), whose first
// connection reports whether the client wrote to it. Root only.
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

// Squatter listens on 127.0.0.1 with a socket created, and its first connection
// accepted, under fsuid 65534 (a socket's owner is its creator's filesystem uid; an
// accepted one its acceptor's), and returns its address. The test fails unless a client
// connects within a minute and closes the connection without writing a byte: nothing,
// the ingress token least of all, may reach a process of another user that took the
// node's port (internal/peerowner). Wait blocks until that is decided.
func Squatter(t *testing.T) (addr string, wait func()) {
	t.Helper()
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
