// Package listengate closes a TCP listening socket without resetting the connections
// waiting in its accept queue.
//
// Closing a listening socket resets every connection the kernel completed into its
// accept queue that the process never accepted. A proxy that connected already wrote its
// request on such a connection, so it must not send it again (Traefik's retry stops once
// headers are written): an in-place restart loses those requests. A refused connection,
// on the other hand, is safe to retry.
//
// Drain closes that window: it gates the socket (Gate: the kernel drops every new
// connection attempt, a bare SYN, while handshakes already under way complete), then
// waits until the process accepted everything queued. The caller keeps accepting during
// Drain, then closes the listener. A client whose SYN was dropped sends it again about a
// second later: by then the next release listens, or the port refuses and the proxy
// retries. A stop that loses nothing:
//
//  1. lame duck: keep serving, answers carry Connection: close;
//  2. Drain (Gate, then wait for an empty accept queue while still accepting);
//  3. close the listener;
//  4. finish the requests in flight (http.Server.Shutdown).
//
// Never gate a socket another process holds for the next release (systemd socket
// activation): the filter stays on the socket, and its queue is meant for that release.
//
// Linux only (a classic BPF socket filter, SO_ATTACH_FILTER, and TCP_INFO); elsewhere,
// and for anything but a plain TCP socket, Gate, Queued and Drain return
// ErrUnsupported. A listener that wraps one (counting or limiting connections) is gated
// when it forwards SyscallConn (syscall.Conn) to the socket below. Listen the socket
// with Listen: Go may listen with multipath TCP by default, and an MPTCP socket takes no
// socket filter.
package listengate

import (
	"context"
	"errors"
	"net"
)

// ErrUnsupported is returned for a listener the gate cannot work on: one that does not
// hand over its socket (syscall.Conn), a socket other than TCP, a multipath TCP socket,
// or any listener on an OS other than Linux.
var ErrUnsupported = errors.New("listengate: unsupported listener")

// Listen listens on a plain TCP socket, never multipath TCP (which Go may choose by
// default, and which takes no socket filter), so that Gate works on it.
func Listen(network, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	return lc.Listen(context.Background(), network, addr)
}
