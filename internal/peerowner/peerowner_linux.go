package peerowner

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Owner is the uid that owns the socket at the far end of c, a TCP connection between
// two addresses of this machine: the accepted socket's entry in /proc/net/tcp or tcp6
// (an IPv4 connection accepted by a dual-stack socket is listed in tcp6, mapped). The
// entry is looked for by c's four-tuple, reversed; its uid is the listening socket's
// creator's (an accepted socket inherits it). It appears once the server's side of the
// handshake completed, which on loopback is at most a moment after the dial returns:
// Owner looks again until ctx ends, 2 s at most.
func Owner(ctx context.Context, c net.Conn) (int, error) {
	la, lok := c.LocalAddr().(*net.TCPAddr)
	ra, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("peerowner: %T is not a TCP connection", c)
	}
	// The far end's entry: its local address is our remote one, and the other way round.
	want := fourTuple{
		local:  netip.AddrPortFrom(ra.AddrPort().Addr().Unmap(), ra.AddrPort().Port()),
		remote: netip.AddrPortFrom(la.AddrPort().Addr().Unmap(), la.AddrPort().Port()),
	}
	deadline := time.Now().Add(2 * time.Second)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} { // self: readable under ProcSubset=pid, where /proc/net is not
			uid, found, err := find(f, want)
			if err != nil {
				return 0, err
			}
			if found {
				return uid, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("peerowner: no socket of this machine is the far end of %s → %s", want.remote, want.local)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

type fourTuple struct{ local, remote netip.AddrPort }

// find reads one /proc/net/tcp* table for the entry whose local and remote addresses
// are want's (IPv4-mapped addresses compared as IPv4) and returns its uid.
func find(path string, want fourTuple) (uid int, found bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, fmt.Errorf("peerowner: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid …
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 {
			continue
		}
		local, err1 := parseAddrPort(fs[1])
		remote, err2 := parseAddrPort(fs[2])
		if err1 != nil || err2 != nil || local != want.local || remote != want.remote {
			continue
		}
		id, err := strconv.Atoi(fs[7])
		if err != nil {
			return 0, false, fmt.Errorf("peerowner: %s: uid %q: %w", path, fs[7], err)
		}
		return id, true, nil
	}
	return 0, false, sc.Err()
}

// parseAddrPort reads the kernel's "0100007F:1CE8": the address as 32-bit words in
// host byte order, in hex, then the port in hex.
func parseAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no port in %q", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", a)
	}
	for i := 0; i < len(raw); i += 4 { // each word from host order to network order
		binary.BigEndian.PutUint32(raw[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q", p)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
