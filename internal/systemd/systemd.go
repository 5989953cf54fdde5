// Package systemd is the two parts of the service manager's protocol the node speaks:
// socket activation (the listening socket systemd holds across restarts, handed over
// as file descriptor 3 with LISTEN_FDS and LISTEN_PID, sd_listen_fds(3)) and readiness
// notification (READY=1 and STOPPING=1 on NOTIFY_SOCKET, sd_notify(3)).
//
// Why the node takes its socket from systemd: a port a process binds itself is free
// from the moment it exits until the next run binds it, and any local process can take
// it then (docs/security.md, "The node's port"). A socket the service manager holds is
// never free: connections made during a restart wait in its accept queue for the next
// run, and nobody else can bind the port.
package systemd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// listenFdsStart is SD_LISTEN_FDS_START: the first handed-over descriptor.
const listenFdsStart = 3

// Listener is a listening socket the service manager handed over. Held reports that
// another process (systemd) keeps the same socket open: closing it here leaves the
// socket listening, and what its queue holds is for the next run. Never gate it
// (internal/listengate).
type Listener struct {
	net.Listener
}

// Held is true: the service manager holds the socket.
func (Listener) Held() bool { return true }

// SyscallConn hands over the socket (syscall.Conn), as *net.TCPListener does.
func (l Listener) SyscallConn() (syscall.RawConn, error) {
	sc, ok := l.Listener.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("%T holds no socket", l.Listener)
	}
	return sc.SyscallConn()
}

// Inherited returns the listening TCP socket systemd handed over, or nil when there is
// none (LISTEN_PID is not this process, or LISTEN_FDS is unset: a start without socket
// activation). It unsets LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES, so that no child
// process takes them for its own. More than one socket, or one that is not a listening
// TCP stream socket, is an error naming what was handed over.
func Inherited() (*Listener, error) {
	return inherited(os.Getenv, os.Getpid())
}

// handedOver is how many descriptors, from listenFdsStart, the service manager handed
// this process (0 when none, or when LISTEN_PID names another process: the variables
// leaked from our parent). It unsets the variables, so that no child process takes them
// for its own.
func handedOver(getenv func(string) string, pid int) (int, error) {
	pidStr, fdsStr := getenv("LISTEN_PID"), getenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	if fdsStr == "" {
		return 0, nil
	}
	if p, err := strconv.Atoi(pidStr); err != nil || p != pid {
		return 0, nil // meant for another process (our parent's)
	}
	n, err := strconv.Atoi(fdsStr)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("LISTEN_FDS=%q from the service manager: not a count", fdsStr)
	}
	return n, nil
}

func inherited(getenv func(string) string, pid int) (*Listener, error) {
	n, err := handedOver(getenv, pid)
	switch {
	case err != nil:
		return nil, err
	case n == 0:
		return nil, nil
	case n > 1:
		return nil, fmt.Errorf("the service manager handed over %d sockets (LISTEN_FDS=%d): the node takes one, its API's (a socket unit with one ListenStream=)", n, n)
	}
	f := os.NewFile(listenFdsStart, "LISTEN_FD_3")
	if f == nil {
		return nil, errors.New("LISTEN_FDS=1 but descriptor 3 is not open")
	}
	defer f.Close() // FileListener dups it
	if err := checkListeningTCP(f); err != nil {
		return nil, err
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("the socket the service manager handed over: %w", err)
	}
	return &Listener{Listener: ln}, nil
}

// Notify sends state (e.g. "READY=1") to the service manager when it asked for
// notifications (NOTIFY_SOCKET, a Type=notify unit), and does nothing otherwise.
func Notify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if strings.HasPrefix(addr, "@") { // an abstract socket
		addr = "\x00" + addr[1:]
	} else if !strings.HasPrefix(addr, "/") {
		return fmt.Errorf("NOTIFY_SOCKET=%q: neither a path nor an abstract socket", addr)
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notifying the service manager: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("notifying the service manager: %w", err)
	}
	return nil
}
