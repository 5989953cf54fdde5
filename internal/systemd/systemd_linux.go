package systemd

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// checkListeningTCP refuses a handed-over descriptor that is not a listening TCP
// stream socket (a unit with ListenDatagram=, ListenFIFO= or Accept=yes). Multipath
// TCP is taken too: a held socket is never gated (listengate), which MPTCP would refuse.
func checkListeningTCP(f *os.File) error {
	fd := int(f.Fd())
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("descriptor 3 from the service manager is not a socket: %w", err)
	}
	proto, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	acc, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if typ != unix.SOCK_STREAM || (proto != unix.IPPROTO_TCP && proto != unix.IPPROTO_MPTCP) || acc == 0 {
		return fmt.Errorf("descriptor 3 from the service manager is not a listening TCP socket (SO_TYPE %d, SO_PROTOCOL %d, listening %v): the socket unit needs one ListenStream= and Accept=no", typ, proto, acc != 0)
	}
	return nil
}

// socketKind says whether a handed-over descriptor is a listening TCP socket (true)
// or a UDP socket (false); anything else is an error naming it.
func socketKind(f *os.File) (stream bool, err error) {
	fd := int(f.Fd())
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return false, fmt.Errorf("descriptor %d from the service manager is not a socket: %w", fd, err)
	}
	proto, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	switch {
	case typ == unix.SOCK_DGRAM && proto == unix.IPPROTO_UDP:
		return false, nil
	case typ == unix.SOCK_STREAM && (proto == unix.IPPROTO_TCP || proto == unix.IPPROTO_MPTCP):
		if acc, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); acc != 0 {
			return true, nil
		}
	}
	return false, fmt.Errorf("descriptor %d from the service manager is neither a listening TCP socket nor a UDP socket (SO_TYPE %d, SO_PROTOCOL %d): the socket unit needs ListenStream=/ListenDatagram= and Accept=no", fd, typ, proto)
}
