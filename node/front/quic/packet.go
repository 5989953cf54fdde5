// Package quic reads what a layer-4 front needs from QUIC v1 (RFC 9000, RFC 9001) and
// v2 (RFC 9369) packets: the long header's fields, and the TLS ClientHello a client
// carries in the CRYPTO frames of its Initial packets. Initial packets are protected
// with keys anyone can derive from the client's first Destination Connection ID
// (RFC 9001 §5.2), so reading them needs no secret. Nothing here ever builds a packet
// for a client: SealInitial exists for tests.
package quic

import (
	"encoding/binary"
	"errors"
)

// The versions whose Initial packets this package reads.
const (
	Version1 uint32 = 0x00000001 // RFC 9000
	Version2 uint32 = 0x6b3343cf // RFC 9369
)

// MaxConnIDLen is the longest connection ID QUIC v1 and v2 allow (RFC 9000 §17.2).
const MaxConnIDLen = 20

// PacketType is a long header packet's type, the same for every version (the type
// bits on the wire differ: RFC 9369 §3.2).
type PacketType uint8

// Long header packet types.
const (
	TypeInitial PacketType = iota
	TypeZeroRTT
	TypeHandshake
	TypeRetry
)

// Errors of the parser and the reassembly. A caller drops the datagram (or the flow)
// on any of them.
var (
	ErrShort       = errors.New("quic: packet truncated")
	ErrNotLong     = errors.New("quic: not a long header packet")
	ErrVersion     = errors.New("quic: unsupported version")
	ErrConnIDLen   = errors.New("quic: connection ID too long")
	ErrDecrypt     = errors.New("quic: Initial packet does not decrypt")
	ErrMalformed   = errors.New("quic: malformed Initial payload")
	ErrTooLarge    = errors.New("quic: CRYPTO stream over the reassembly cap")
	ErrFragments   = errors.New("quic: CRYPTO stream in too many fragments")
	ErrNotHello    = errors.New("quic: CRYPTO stream does not start with a ClientHello")
	ErrOtherPacket = errors.New("quic: packet of another connection")
)

// IsLongHeader reports whether a packet starts with a long header (RFC 9000 §17.2).
func IsLongHeader(b []byte) bool { return len(b) > 0 && b[0]&0x80 != 0 }

// Header is a long header, parsed without removing header protection: the first
// byte's low bits and the packet number are still protected.
type Header struct {
	Version uint32
	Type    PacketType // meaningful for Version1 and Version2 only
	DCID    []byte     // aliases the packet
	SCID    []byte     // aliases the packet
	Token   []byte     // Initial only; aliases the packet
	// PNOffset is where the (protected) packet number starts.
	PNOffset int
	// Len is the whole packet's length: PNOffset plus the Length field, or the rest
	// of the datagram for a Retry. Coalesced packets follow at Len.
	Len int
}

// ParseLongHeader parses the long header packet at the start of b. Versions other
// than 1 and 2 (version negotiation included) return their Version with ErrVersion.
func ParseLongHeader(b []byte) (Header, error) {
	var h Header
	if !IsLongHeader(b) {
		return h, ErrNotLong
	}
	if len(b) < 7 {
		return h, ErrShort
	}
	h.Version = binary.BigEndian.Uint32(b[1:5])
	if h.Version != Version1 && h.Version != Version2 {
		return h, ErrVersion
	}
	bits := (b[0] >> 4) & 3
	if h.Version == Version2 {
		// v2: Initial 0b01, 0-RTT 0b10, Handshake 0b11, Retry 0b00.
		h.Type = PacketType((bits + 3) & 3)
	} else {
		h.Type = PacketType(bits)
	}
	p := 5
	n := int(b[p])
	p++
	if n > MaxConnIDLen {
		return h, ErrConnIDLen
	}
	if len(b) < p+n+1 {
		return h, ErrShort
	}
	h.DCID = b[p : p+n]
	p += n
	n = int(b[p])
	p++
	if n > MaxConnIDLen {
		return h, ErrConnIDLen
	}
	if len(b) < p+n {
		return h, ErrShort
	}
	h.SCID = b[p : p+n]
	p += n
	if h.Type == TypeRetry {
		h.PNOffset, h.Len = len(b), len(b)
		return h, nil
	}
	if h.Type == TypeInitial {
		tl, m := varint(b[p:])
		if m == 0 {
			return h, ErrShort
		}
		p += m
		if uint64(len(b)-p) < tl {
			return h, ErrShort
		}
		h.Token = b[p : p+int(tl)]
		p += int(tl)
	}
	l, m := varint(b[p:])
	if m == 0 {
		return h, ErrShort
	}
	p += m
	if uint64(len(b)-p) < l {
		return h, ErrShort
	}
	h.PNOffset = p
	h.Len = p + int(l)
	return h, nil
}

// varint decodes a QUIC variable-length integer (RFC 9000 §16); n is 0 when b is too
// short.
func varint(b []byte) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	n = 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0
	}
	v = uint64(b[0] & 0x3f)
	for i := 1; i < n; i++ {
		v = v<<8 | uint64(b[i])
	}
	return v, n
}

// appendVarint encodes v (< 2^62) in its shortest form.
func appendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<6:
		return append(b, byte(v))
	case v < 1<<14:
		return append(b, byte(v>>8)|0x40, byte(v))
	case v < 1<<30:
		return append(b, byte(v>>24)|0x80, byte(v>>16), byte(v>>8), byte(v))
	default:
		return append(b, byte(v>>56)|0xc0, byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}
