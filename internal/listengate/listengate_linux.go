package listengate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// settle is how long Drain waits after gating for handshakes already under way (a
// SYN-ACK sent, the final ACK not yet in) to complete into the accept queue.
const settle = 20 * time.Millisecond

// tcpListen is TCP_LISTEN, the state of a listening socket (include/net/tcp_states.h).
const tcpListen = 10

// pollEvery is how often Drain looks at the accept queue.
const pollEvery = 2 * time.Millisecond

// dropSYN is the gate: a classic BPF program that drops a segment with SYN set and ACK
// clear (a new connection attempt) and passes everything else, among it the final ACK of
// a handshake under way. On a TCP socket the filter sees the segment from its TCP header
// on (tcp_v4_rcv and tcp_v6_rcv run it after pulling the IP header), for IPv4 and IPv6
// alike: byte 13 holds the flags.
var dropSYN = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 13},                  // A = flags
	{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: 0x12},               // A &= SYN|ACK
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0x02, Jt: 0, Jf: 1}, // SYN alone?
	{Code: unix.BPF_RET | unix.BPF_K, K: 0},                                 // drop
	{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},                        // pass whole
}

// rawConn is the socket of a TCP listener, or ErrUnsupported. A listener qualifies by
// handing over its socket (syscall.Conn, as *net.TCPListener does, and a wrapper that
// forwards SyscallConn): the socket itself must be plain TCP, which is checked on it,
// not read from the listener's type.
func rawConn(ln net.Listener) (syscall.RawConn, error) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("%w: %T does not hand over its socket (syscall.Conn)", ErrUnsupported, ln)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("listengate: %s: %w", ln.Addr(), err)
	}
	if rc == nil {
		return nil, fmt.Errorf("%w: %T handed over no socket", ErrUnsupported, ln)
	}
	var typ, proto, listening int
	var terr, perr, aerr error
	if err := rc.Control(func(fd uintptr) {
		typ, terr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		proto, perr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PROTOCOL)
		listening, aerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	}); err != nil {
		return nil, fmt.Errorf("listengate: %s: %w", ln.Addr(), err)
	}
	if terr != nil || perr != nil || aerr != nil {
		return nil, fmt.Errorf("listengate: %s: SO_TYPE, SO_PROTOCOL, SO_ACCEPTCONN: %w", ln.Addr(), errors.Join(terr, perr, aerr))
	}
	switch {
	case listening == 0:
		return nil, fmt.Errorf("%w: %s (%T) is not a listening socket", ErrUnsupported, ln.Addr(), ln)
	case typ == unix.SOCK_STREAM && proto == unix.IPPROTO_MPTCP:
		return nil, fmt.Errorf("%w: %s listens with multipath TCP, which takes no socket filter (listen with listengate.Listen)", ErrUnsupported, ln.Addr())
	case typ != unix.SOCK_STREAM || proto != unix.IPPROTO_TCP:
		return nil, fmt.Errorf("%w: %s (%T) is not a TCP socket", ErrUnsupported, ln.Addr(), ln)
	}
	return rc, nil
}

// Gate makes the kernel drop new connection attempts on ln (their SYN) while it
// completes the handshakes under way. It cannot be undone: gate a listener only to
// close it. A connection whose handshake completes after Gate inherits the filter; it
// drops nothing an established connection needs.
func Gate(ln net.Listener) error {
	rc, err := rawConn(ln)
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(dropSYN)), Filter: &dropSYN[0]}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog)
	}); err != nil {
		return fmt.Errorf("listengate: gating %s: %w", ln.Addr(), err)
	}
	if serr != nil {
		return fmt.Errorf("listengate: gating %s: SO_ATTACH_FILTER: %w", ln.Addr(), serr)
	}
	return nil
}

// Queued is how many connections the kernel completed into ln's accept queue that the
// process has not accepted yet (TCP_INFO of a listening socket: tcpi_unacked).
func Queued(ln net.Listener) (int, error) {
	rc, err := rawConn(ln)
	if err != nil {
		return 0, err
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return 0, fmt.Errorf("listengate: reading the accept queue of %s: %w", ln.Addr(), err)
	}
	if gerr != nil {
		return 0, fmt.Errorf("listengate: reading the accept queue of %s: TCP_INFO: %w", ln.Addr(), gerr)
	}
	if info.State != tcpListen {
		return 0, fmt.Errorf("listengate: %s is not listening (TCP state %d)", ln.Addr(), info.State)
	}
	return int(info.Unacked), nil
}

// Drain gates ln (Gate), waits a moment for the handshakes under way, then waits until
// its accept queue is empty: the caller must keep accepting meanwhile, and close ln
// after. It returns when the queue is empty, or with an error when ctx is done first
// (what still waits is then reset at close, as without Drain) or the gate failed.
func Drain(ctx context.Context, ln net.Listener) error {
	if err := Gate(ln); err != nil {
		return err
	}
	t := time.NewTimer(settle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			n, _ := Queued(ln)
			return fmt.Errorf("listengate: draining %s: %d connections still queued: %w", ln.Addr(), n, ctx.Err())
		case <-t.C:
		}
		n, err := Queued(ln)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		t.Reset(pollEvery)
	}
}
