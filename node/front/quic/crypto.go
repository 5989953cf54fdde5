package quic

import "bytes"

// Reassembly caps. A ClientHello with a post-quantum key share is about 1.9 KB; the
// cap leaves room for large session tickets and ECH, and bounds what one pending flow
// holds.
const (
	DefaultMaxCryptoBytes = 16 << 10
	DefaultMaxFragments   = 64
)

// Frames walks the frames of a decrypted Initial payload and calls crypto for each
// CRYPTO frame's data (which aliases payload). An Initial may carry only PADDING,
// PING, ACK, CRYPTO and CONNECTION_CLOSE (RFC 9000 §12.4, RFC 9000 §17.2.2); any other frame, a
// frame type in a longer encoding than needed, or a truncated frame is ErrMalformed.
func Frames(payload []byte, crypto func(offset uint64, data []byte) error) error {
	if len(payload) == 0 {
		return ErrMalformed
	}
	b := payload
	for len(b) > 0 {
		t := b[0]
		b = b[1:]
		switch t {
		case 0x00, 0x01: // PADDING, PING
		case 0x02, 0x03: // ACK
			var ok bool
			var count uint64
			if b, ok = skipVarints(b, 2); !ok {
				return ErrMalformed
			}
			if count, b, ok = readVarint(b); !ok || count > uint64(len(b)) {
				return ErrMalformed
			}
			if b, ok = skipVarints(b, 1); !ok {
				return ErrMalformed
			}
			for i := uint64(0); i < count; i++ {
				if b, ok = skipVarints(b, 2); !ok {
					return ErrMalformed
				}
			}
			if t == 0x03 {
				if b, ok = skipVarints(b, 3); !ok {
					return ErrMalformed
				}
			}
		case 0x06: // CRYPTO
			off, rest, ok := readVarint(b)
			if !ok {
				return ErrMalformed
			}
			n, rest, ok := readVarint(rest)
			if !ok || n > uint64(len(rest)) || off+n >= 1<<62 {
				return ErrMalformed
			}
			if err := crypto(off, rest[:n]); err != nil {
				return err
			}
			b = rest[n:]
		case 0x1c: // CONNECTION_CLOSE (transport)
			var ok bool
			var n uint64
			if b, ok = skipVarints(b, 2); !ok {
				return ErrMalformed
			}
			if n, b, ok = readVarint(b); !ok || n > uint64(len(b)) {
				return ErrMalformed
			}
			b = b[n:]
		default:
			return ErrMalformed
		}
	}
	return nil
}

func readVarint(b []byte) (uint64, []byte, bool) {
	v, n := varint(b)
	if n == 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

func skipVarints(b []byte, k int) ([]byte, bool) {
	for i := 0; i < k; i++ {
		_, n := varint(b)
		if n == 0 {
			return b, false
		}
		b = b[n:]
	}
	return b, true
}

// Reassembler puts the CRYPTO stream of the Initial packet number space back together
// from frames that arrive in any order, overlapping or not, across packets. It holds at
// most MaxBytes of stream (every byte at an offset past it is ErrTooLarge) and accepts at
// most MaxFragments non-empty frames. Not safe for concurrent use.
type Reassembler struct {
	MaxBytes     int // 0: DefaultMaxCryptoBytes
	MaxFragments int // 0: DefaultMaxFragments

	buf   []byte
	spans []span // covered [start, end), sorted, disjoint, not adjacent
	frags int
}

type span struct{ start, end int }

func (r *Reassembler) maxBytes() int {
	if r.MaxBytes > 0 {
		return r.MaxBytes
	}
	return DefaultMaxCryptoBytes
}

// Add places data at offset in the stream. Bytes already received keep their first value.
func (r *Reassembler) Add(offset uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	limit := r.maxBytes()
	if offset > uint64(limit) || uint64(len(data)) > uint64(limit)-offset {
		return ErrTooLarge
	}
	r.frags++
	maxFrags := r.MaxFragments
	if maxFrags <= 0 {
		maxFrags = DefaultMaxFragments
	}
	if r.frags > maxFrags {
		return ErrFragments
	}
	start, end := int(offset), int(offset)+len(data)
	if end > len(r.buf) {
		n := max(end, min(2*len(r.buf), limit))
		nb := make([]byte, end, n)
		copy(nb, r.buf)
		r.buf = nb
	}
	// Copy only into the gaps, so bytes received first keep their value.
	pos := start
	for _, s := range r.spans {
		if s.end <= pos {
			continue
		}
		if s.start >= end {
			break
		}
		if s.start > pos {
			copy(r.buf[pos:s.start], data[pos-start:])
		}
		pos = max(pos, s.end)
		if pos >= end {
			break
		}
	}
	if pos < end {
		copy(r.buf[pos:end], data[pos-start:])
	}
	r.merge(span{start, end})
	return nil
}

func (r *Reassembler) merge(n span) {
	out := r.spans[:0:0]
	placed := false
	for _, s := range r.spans {
		switch {
		case s.end < n.start:
			out = append(out, s)
		case n.end < s.start:
			if !placed {
				out = append(out, n)
				placed = true
			}
			out = append(out, s)
		default:
			n.start, n.end = min(n.start, s.start), max(n.end, s.end)
		}
	}
	if !placed {
		out = append(out, n)
	}
	r.spans = out
}

// Buffered is the number of bytes the reassembler holds.
func (r *Reassembler) Buffered() int { return cap(r.buf) }

// ClientHello returns the whole first handshake message once its 4-byte header and
// every byte its length names have arrived (ok false until then). A first message that
// is not a ClientHello, or whose length passes MaxBytes, is an error.
func (r *Reassembler) ClientHello() (msg []byte, ok bool, err error) {
	if len(r.spans) == 0 || r.spans[0].start != 0 || r.spans[0].end < 1 {
		return nil, false, nil
	}
	if r.buf[0] != 1 {
		return nil, false, ErrNotHello
	}
	if r.spans[0].end < 4 {
		return nil, false, nil
	}
	n := 4 + (int(r.buf[1])<<16 | int(r.buf[2])<<8 | int(r.buf[3]))
	if n > r.maxBytes() {
		return nil, false, ErrTooLarge
	}
	if r.spans[0].end < n {
		return nil, false, nil
	}
	return r.buf[:n], true, nil
}

// HelloReader collects the ClientHello of one client connection from the datagrams
// that carry its Initial packets. The first Initial fixes the version and the
// Destination Connection ID the keys derive from; later Initials of the same
// connection (same version and DCID) add to the CRYPTO stream; 0-RTT packets and
// packets of other connections in the datagram are skipped. Not safe for concurrent use.
type HelloReader struct {
	Version uint32
	DCID    []byte
	keys    *Keys
	reasm   Reassembler
}

// NewHelloReader returns a reader whose caps are maxBytes and maxFragments (0: the defaults).
func NewHelloReader(maxBytes, maxFragments int) *HelloReader {
	return &HelloReader{reasm: Reassembler{MaxBytes: maxBytes, MaxFragments: maxFragments}}
}

// Buffered is the number of bytes of CRYPTO stream held.
func (hr *HelloReader) Buffered() int { return hr.reasm.Buffered() }

// Feed reads one datagram. It returns the ClientHello once complete. An error on the
// first datagram (or from the frames or caps of any decrypted packet) means the
// connection cannot be read: the caller drops it. A later Initial that does not
// decrypt is ignored (anyone can send one with the client's address), as are coalesced
// packets that are not Initials.
func (hr *HelloReader) Feed(datagram []byte) (hello []byte, err error) {
	first := hr.keys == nil
	b := datagram
	read := 0
	for len(b) > 0 && IsLongHeader(b) {
		h, err := ParseLongHeader(b)
		if err != nil {
			if first && read == 0 {
				return nil, err
			}
			break
		}
		pkt := b[:h.Len]
		b = b[h.Len:]
		if h.Type != TypeInitial {
			if h.Type == TypeRetry {
				break
			}
			continue
		}
		if hr.keys == nil {
			if len(h.DCID) < 8 {
				return nil, ErrConnIDLen
			}
			k, err := ClientInitialKeys(h.Version, h.DCID)
			if err != nil {
				return nil, err
			}
			hr.keys, hr.Version, hr.DCID = k, h.Version, bytes.Clone(h.DCID)
		} else if h.Version != hr.Version || !bytes.Equal(h.DCID, hr.DCID) {
			continue
		}
		_, payload, err := hr.keys.Open(pkt, h)
		if err != nil {
			if first && read == 0 {
				hr.keys = nil
				return nil, err
			}
			continue
		}
		read++
		if err := Frames(payload, hr.reasm.Add); err != nil {
			return nil, err
		}
	}
	if read == 0 && first {
		return nil, ErrOtherPacket
	}
	hello, ok, err := hr.reasm.ClientHello()
	if err != nil || !ok {
		return nil, err
	}
	return hello, nil
}
