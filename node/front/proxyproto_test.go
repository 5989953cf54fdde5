package front

import (
	"bytes"
	"net"
	"testing"
)

// The header, byte for byte, as haproxy's proxy-protocol.txt §2.2 lays it out: the
// 12-byte signature, 0x21 (version 2, PROXY), the family (0x11 TCP/IPv4, 0x21
// TCP/IPv6), the address block's length, source and destination addresses, source and
// destination ports, big-endian.
func TestProxyV2HeaderBytes(t *testing.T) {
	sig := []byte("\r\n\r\n\x00\r\nQUIT\n")
	tcp := func(ip string, port int) *net.TCPAddr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		why      string
		src, dst net.Addr
		want     []byte
	}{
		{"IPv4", tcp("192.0.2.7", 51234), tcp("10.83.0.1", 443),
			cat(sig, []byte{0x21, 0x11, 0, 12, 192, 0, 2, 7, 10, 83, 0, 1, 0xc8, 0x22, 0x01, 0xbb})},
		{"IPv4-mapped IPv6 (a dual-stack listener) is written as IPv4", tcp("::ffff:192.0.2.7", 51234), tcp("::ffff:10.83.0.1", 443),
			cat(sig, []byte{0x21, 0x11, 0, 12, 192, 0, 2, 7, 10, 83, 0, 1, 0xc8, 0x22, 0x01, 0xbb})},
		{"IPv6", tcp("2001:db8::7", 1), tcp("2001:db8::1", 443),
			cat(sig, []byte{0x21, 0x21, 0, 36},
				[]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7},
				[]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
				[]byte{0, 1, 0x01, 0xbb})},
		{"an IPv6 client on an IPv4-mapped local address: both IPv6", tcp("2001:db8::7", 1), tcp("::ffff:10.83.0.1", 443),
			cat(sig, []byte{0x21, 0x21, 0, 36},
				[]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7},
				[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 83, 0, 1},
				[]byte{0, 1, 0x01, 0xbb})},
		{"a zone is dropped", &net.TCPAddr{IP: net.ParseIP("fe80::7"), Port: 2, Zone: "eth0"}, tcp("fe80::1", 443),
			cat(sig, []byte{0x21, 0x21, 0, 36},
				[]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7},
				[]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
				[]byte{0, 2, 0x01, 0xbb})},
		{"not TCP addresses: AF_UNSPEC, no address block", &net.UnixAddr{Name: "@a", Net: "unix"}, tcp("10.83.0.1", 443),
			cat(sig, []byte{0x21, 0x00, 0, 0})},
	} {
		got := appendProxyV2([]byte("prefix"), tc.src, tc.dst)
		if !bytes.Equal(got, append([]byte("prefix"), tc.want...)) {
			t.Errorf("%s:\n got % x\nwant % x", tc.why, got[6:], tc.want)
		}
		if len(got)-6 > proxyV2MaxBytes {
			t.Errorf("%s: %d bytes, over proxyV2MaxBytes", tc.why, len(got)-6)
		}
		// And the tests' own parser (readProxyV2, written from the spec) reads it back.
		if tc.want[13] != 0 {
			h, err := readProxyV2(bytes.NewReader(got[6:]))
			if err != nil || h.src.Port != tc.src.(*net.TCPAddr).Port || !h.src.IP.Equal(tc.src.(*net.TCPAddr).IP) || !h.dst.IP.Equal(tc.dst.(*net.TCPAddr).IP) {
				t.Errorf("%s: parsed back %+v, %v", tc.why, h, err)
			}
		}
	}
}
