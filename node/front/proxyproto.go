package front

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// proxyV2Signature opens every PROXY protocol v2 header (haproxy's proxy-protocol.txt §2.2).
var proxyV2Signature = [12]byte{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A}

const (
	proxyV2Command  = 0x21 // version 2, PROXY (a relayed connection)
	proxyV2TCP4     = 0x11 // AF_INET, STREAM
	proxyV2TCP6     = 0x21 // AF_INET6, STREAM
	proxyV2Unspec   = 0x00 // AF_UNSPEC: the receiver keeps the real endpoints
	proxyV2TCP4Len  = 12   // 4+4 addresses, 2+2 ports
	proxyV2TCP6Len  = 36   // 16+16 addresses, 2+2 ports
	proxyV2MaxBytes = 16 + proxyV2TCP6Len
)

// appendProxyV2 appends a PROXY protocol v2 header for a TCP connection from src (the
// client) to dst (the front's local address of that connection) to b: the PROXY command,
// TCP over IPv4 when both addresses are IPv4 (IPv4-mapped IPv6 included: a dual-stack
// listener sees an IPv4 client as ::ffff:a.b.c.d), TCP over IPv6 otherwise, no TLVs.
// An address that is not a TCP address (a test's pipe) gives AF_UNSPEC with no address
// block, which a receiver must accept and replace by the connection's own endpoints.
// TestProxyV2HeaderBytes holds the bytes to the spec.
func appendProxyV2(b []byte, src, dst net.Addr) []byte {
	b = append(b, proxyV2Signature[:]...)
	s, sok := addrPort(src)
	d, dok := addrPort(dst)
	if !sok || !dok {
		return append(b, proxyV2Command, proxyV2Unspec, 0, 0)
	}
	sa, da := s.Addr().Unmap(), d.Addr().Unmap()
	if sa.Is4() && da.Is4() {
		b = append(b, proxyV2Command, proxyV2TCP4)
		b = binary.BigEndian.AppendUint16(b, proxyV2TCP4Len)
		s4, d4 := sa.As4(), da.As4()
		b = append(b, s4[:]...)
		b = append(b, d4[:]...)
	} else {
		// One of them is a real IPv6 address (a mix cannot come from one socket; if it
		// did, the IPv4 one is written IPv4-mapped).
		b = append(b, proxyV2Command, proxyV2TCP6)
		b = binary.BigEndian.AppendUint16(b, proxyV2TCP6Len)
		s16, d16 := sa.As16(), da.As16()
		b = append(b, s16[:]...)
		b = append(b, d16[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, s.Port())
	return binary.BigEndian.AppendUint16(b, d.Port())
}

// addrPort reads a TCP address (a zone, which PROXY v2 cannot carry, is dropped).
func addrPort(a net.Addr) (netip.AddrPort, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok || ta == nil {
		return netip.AddrPort{}, false
	}
	ap := ta.AddrPort()
	if !ap.Addr().IsValid() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().WithZone(""), ap.Port()), true
}
