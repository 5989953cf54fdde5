package listengate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scafo/ingress/internal/proc"
)

// loopbacks runs f on 127.0.0.1 and on ::1 (skipped where the machine has no IPv6
// loopback).
func loopbacks(t *testing.T, f func(t *testing.T, host string)) {
	for _, host := range []string{"127.0.0.1", "::1"} {
		t.Run(host, func(t *testing.T) {
			if host == "::1" {
				ln, err := net.Listen("tcp", "[::1]:0")
				if err != nil {
					t.Skipf("no IPv6 loopback: %v", err)
				}
				ln.Close()
			}
			f(t, host)
		})
	}
}

func listen(t *testing.T, host string) net.Listener {
	t.Helper()
	ln, err := Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// queue connects n clients to ln, each writing a one-line request, and waits until the
// kernel holds all n in ln's accept queue (nothing accepts them).
func queue(t *testing.T, ln net.Listener, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for i := range n {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err != nil {
			t.Fatalf("connecting %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := fmt.Fprintf(c, "request %d\n", i); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	waitQueued(t, ln, n)
	return conns
}

// waitQueued waits (up to 10 s) until ln's accept queue holds n connections.
func waitQueued(t *testing.T, ln net.Listener, n int) {
	t.Helper()
	var got int
	if err := proc.Poll(10*time.Second, time.Millisecond, func() error {
		var err error
		if got, err = Queued(ln); err == nil && got != n {
			return errors.New("not yet")
		}
		return err
	}); err != nil {
		t.Fatalf("accept queue: %d (%v), want %d", got, err, n)
	}
}

// answer reads the one-line answer on c.
func answer(c net.Conn) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	return bufio.NewReader(c).ReadString('\n')
}

// The problem: closing a listening socket resets the connections waiting in its accept
// queue, on which clients already wrote their requests.
func TestCloseResetsTheConnectionsInTheAcceptQueue(t *testing.T) {
	loopbacks(t, func(t *testing.T, host string) {
		ln := listen(t, host)
		conns := queue(t, ln, 8)
		ln.Close()
		for i, c := range conns {
			if got, err := answer(c); !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("connection %d after a plain close: %q, %v, want ECONNRESET", i, got, err)
			}
		}
	})
}

// serve accepts on ln until it closes, answering each connection's request line, and
// reports how many it accepted once every answer went out.
func serve(ln net.Listener) <-chan int {
	done := make(chan int, 1)
	go func() {
		var wg sync.WaitGroup
		n := 0
		for {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			n++
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				req, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					fmt.Fprintf(c, "answer to %s", req)
				}
			})
		}
		wg.Wait()
		done <- n
	}()
	return done
}

// closeAndCheckAnswered closes ln, whose accept loop is served, and checks that it
// accepted every one of conns and answered each.
func closeAndCheckAnswered(t *testing.T, ln net.Listener, served <-chan int, conns []net.Conn) {
	t.Helper()
	ln.Close()
	if n := <-served; n != len(conns) {
		t.Errorf("accepted %d connections, want the %d queued", n, len(conns))
	}
	for i, c := range conns {
		if got, err := answer(c); err != nil || got != fmt.Sprintf("answer to request %d\n", i) {
			t.Errorf("connection %d: %q, %v, want its answer", i, got, err)
		}
	}
}

// dialDropped dials a gated socket at addr and says what is wrong unless the dial timed
// out: however slow the machine, a dropped SYN is never answered.
func dialDropped(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err == nil {
		c.Close()
		return errors.New("connected through the gate, want the SYN dropped")
	}
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		return fmt.Errorf("dialing the gated socket: %w, want a timeout (SYN dropped)", err)
	}
	return nil
}

// The fix: Drain while accepting, then close: every connection queued at the stop is
// accepted and answered, none is reset. So through a listener wrapped around the socket
// that forwards SyscallConn (the test harness's connection counter, handed to a node as
// its listener, is such a wrapper; the node gates what it is handed, and wraps its own
// connection limiter around it after).
func TestDrainAnswersEveryQueuedConnection(t *testing.T) {
	loopbacks(t, func(t *testing.T, host string) {
		for _, wrap := range []bool{false, true} {
			var ln net.Listener = listen(t, host)
			if wrap {
				ln = wrapped{Listener: ln, forward: true}
			}
			conns := queue(t, ln, 8)
			drained := drainAsync(ln)
			served := serve(ln)
			if err := <-drained; err != nil {
				t.Fatalf("Drain (wrapped %v): %v", wrap, err)
			}
			if n, err := Queued(ln); err != nil || n != 0 {
				t.Fatalf("after Drain (wrapped %v): %d queued (%v), want 0", wrap, n, err)
			}
			closeAndCheckAnswered(t, ln, served, conns)
		}
	})
}

// Drain waits for the queue, bounded by its context: nobody accepting, it returns the
// context's error and leaves the queue as it was.
func TestDrainIsBoundedByItsContext(t *testing.T) {
	ln := listen(t, "127.0.0.1")
	queue(t, ln, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := Drain(ctx, ln); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "3 connections still queued") {
		t.Fatalf("Drain with nobody accepting: %v, want the deadline with 3 connections still queued", err)
	}
	waitQueued(t, ln, 3)
}

// A connection attempt on a gated socket is never reset: its SYN is dropped (the
// client would send it again later), so it times out; once the socket closes, it is
// refused. Both are safe for a proxy to retry.
func TestAGatedSocketDropsNewConnectionsWithoutResetting(t *testing.T) {
	loopbacks(t, func(t *testing.T, host string) {
		ln := listen(t, host)
		if err := Gate(ln); err != nil {
			t.Fatal(err)
		}
		if err := dialDropped(ln.Addr().String()); err != nil {
			t.Fatal(err)
		}
		if n, err := Queued(ln); err != nil || n != 0 {
			t.Fatalf("gated: %d queued (%v), want 0", n, err)
		}
		ln.Close()
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("dialing the closed socket: %v, want ECONNREFUSED", err)
		}
	})
}

// A handshake under way when the gate goes up completes, and the connection's data
// passes, on IPv4 and IPv6: the gate reads the TCP flags and drops only a new
// connection's SYN. TCP_DEFER_ACCEPT holds the handshake open across the gate: the
// listener completes it on the client's first data segment instead of its final ACK,
// so that segment crosses the gated listener, and the next ones the connection's socket,
// which inherits the filter.
func TestAGatedSocketCompletesTheHandshakesUnderWay(t *testing.T) {
	loopbacks(t, func(t *testing.T, host string) {
		ln := listen(t, host)
		rc, err := ln.(*net.TCPListener).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 30)
		}); err != nil || serr != nil {
			t.Fatalf("TCP_DEFER_ACCEPT: %v %v", err, serr)
		}
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if n, err := Queued(ln); err != nil || n != 0 {
			t.Fatalf("a deferred handshake: %d queued (%v), want 0 until data comes", n, err)
		}
		if err := Gate(ln); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(c, "first\n"); err != nil {
			t.Fatal(err)
		}
		waitQueued(t, ln, 1)
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		r := bufio.NewReader(s)
		_ = s.SetReadDeadline(time.Now().Add(30 * time.Second))
		if got, err := r.ReadString('\n'); err != nil || got != "first\n" {
			t.Fatalf("read %q, %v, want the line that completed the handshake", got, err)
		}
		if _, err := fmt.Fprintf(c, "second\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := r.ReadString('\n'); err != nil || got != "second\n" {
			t.Fatalf("read %q, %v, want the next line", got, err)
		}
	})
}

// protocol is the socket protocol of ln (IPPROTO_TCP or IPPROTO_MPTCP).
func protocol(t *testing.T, ln net.Listener) int {
	t.Helper()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var p int
	var perr error
	if err := rc.Control(func(fd uintptr) { p, perr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PROTOCOL) }); err != nil || perr != nil {
		t.Fatalf("SO_PROTOCOL: %v %v", err, perr)
	}
	return p
}

// Listen never listens with multipath TCP; Gate refuses a multipath TCP listener
// (SO_ATTACH_FILTER fails on one), a unix socket listener, a wrapper that hides its
// socket, hands over none (nil, nil: it crashed Drain) or a connected socket rather than
// a listening one (SO_ACCEPTCONN 0: it passed Gate) with ErrUnsupported; a wrapper whose
// SyscallConn fails, with its error.
func TestGateRefusesWhatItCannotGate(t *testing.T) {
	if p := protocol(t, listen(t, "127.0.0.1")); p != unix.IPPROTO_TCP {
		t.Errorf("Listen: protocol %d, want IPPROTO_TCP", p)
	}

	var lc net.ListenConfig
	lc.SetMultipathTCP(true)
	mp, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close()
	ul, err := net.Listen("unix", filepath.Join(t.TempDir(), "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	ln := listen(t, "127.0.0.1")
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, queued := Queued(ul)
	type refusal struct {
		what        string
		err         error
		unsupported bool   // errors.Is(err, ErrUnsupported)
		says        string // in the error
	}
	refusals := []refusal{
		{"Gate on a unix socket", Gate(ul), true, ""},
		{"Queued on a unix socket", queued, true, ""},
		{"Drain on a unix socket", Drain(ctx, ul), true, ""},
		{"Gate on a wrapper hiding its socket", Gate(struct{ net.Listener }{ln}), true, "syscall.Conn"},
		{"Gate on a wrapper whose SyscallConn fails (its error)", Gate(wrapped{Listener: ln}), false, "not forwarded"},
		{"Drain through a wrapper handing over no socket", Drain(ctx, handsOver{Listener: ln}), true, ""},
		{"Gate on a connected socket", Gate(handsOver{Listener: ln, rc: rc}), true, "not a listening socket"},
	}
	if protocol(t, mp) != unix.IPPROTO_MPTCP {
		t.Log("no multipath TCP on this machine: its case is untested")
	} else {
		refusals = append(refusals, refusal{"Gate on a multipath TCP listener", Gate(mp), true, "multipath"},
			refusal{"Drain on a multipath TCP listener", Drain(ctx, mp), true, ""})
	}
	for _, r := range refusals {
		if r.err == nil || errors.Is(r.err, ErrUnsupported) != r.unsupported || !strings.Contains(r.err.Error(), r.says) {
			t.Errorf("%s: %v, want an error (ErrUnsupported: %v) saying %q", r.what, r.err, r.unsupported, r.says)
		}
	}
}

// wrapped is a listener in front of another (one that counts or limits connections):
// it hands over the socket below when forward is set.
type wrapped struct {
	net.Listener
	forward bool
}

func (w wrapped) SyscallConn() (syscall.RawConn, error) {
	if !w.forward {
		return nil, errors.New("not forwarded")
	}
	return w.Listener.(syscall.Conn).SyscallConn()
}

// handsOver is a listener whose SyscallConn hands over rc (nil, or a connection's).
type handsOver struct {
	net.Listener
	rc syscall.RawConn
}

func (h handsOver) SyscallConn() (syscall.RawConn, error) { return h.rc, nil }

// drainAsync runs Drain on ln (30 s at most) while the test serves it; its error arrives
// on the channel.
func drainAsync(ln net.Listener) <-chan error {
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		drained <- Drain(ctx, ln)
	}()
	return drained
}
