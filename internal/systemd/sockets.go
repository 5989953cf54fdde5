package systemd

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// Sockets are the sockets of a unit with several Listen lines (the layer-4 front's:
// ListenStream= and ListenDatagram= on one port).
type Sockets struct {
	Stream   []*Listener
	Datagram []*net.UDPConn
}

// maxSockets bounds LISTEN_FDS: a unit of ours declares a few.
const maxSockets = 16

// InheritedSockets returns every socket systemd handed over (nil when none, as
// Inherited), each a listening TCP stream socket or a bound UDP socket; anything else
// is an error naming the descriptor. It unsets the variables as Inherited does.
func InheritedSockets() (*Sockets, error) {
	return inheritedSockets(os.Getenv, os.Getpid())
}

func inheritedSockets(getenv func(string) string, pid int) (*Sockets, error) {
	n, err := handedOver(getenv, pid)
	switch {
	case err != nil:
		return nil, err
	case n == 0:
		return nil, nil
	case n > maxSockets:
		return nil, fmt.Errorf("LISTEN_FDS=%d from the service manager: want a count of at most %d", n, maxSockets)
	}
	s := &Sockets{}
	for fd := listenFdsStart; fd < listenFdsStart+n; fd++ {
		name := "LISTEN_FD_" + strconv.Itoa(fd)
		f := os.NewFile(uintptr(fd), name)
		if f == nil {
			return nil, fmt.Errorf("LISTEN_FDS=%d but descriptor %d is not open", n, fd)
		}
		stream, err := socketKind(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		if stream {
			ln, err := net.FileListener(f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("descriptor %d from the service manager: %w", fd, err)
			}
			s.Stream = append(s.Stream, &Listener{Listener: ln})
			continue
		}
		pc, err := net.FilePacketConn(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("descriptor %d from the service manager: %w", fd, err)
		}
		u, ok := pc.(*net.UDPConn)
		if !ok {
			pc.Close()
			return nil, fmt.Errorf("descriptor %d from the service manager is a %T, not a UDP socket", fd, pc)
		}
		s.Datagram = append(s.Datagram, u)
	}
	return s, nil
}
