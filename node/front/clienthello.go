package front

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"
)

// A ClientHello is read off a new TCP connection before anything is dialed: TLS records
// of content type 22 (handshake), as many as the message needs (a client may split it
// over several records, and the network over any number of segments), reassembled until
// the handshake message of type 1 is whole. The bytes read are kept, exactly, to be
// replayed to whoever gets the connection, who then sees the client's own handshake.
//
// Two bounds, so a client cannot hold the front's memory or a goroutine for free:
//
//   - Bytes (TCPConfig.MaxHello, default 16 KiB of records, headers included). A
//     ClientHello is a few hundred bytes to about 2 KB today (a browser's with a
//     post-quantum key share, X25519MLKEM768, and ECH GREASE is ~1.8–2 KB); 16 KiB is
//     one full TLS record (2^14) and leaves room for the key shares and PSK identities
//     clients may add, while a connection waiting for its ClientHello costs the front at
//     most that. A ClientHello announcing or sending more is cut: the connection is
//     closed (errHelloTooLarge), never passed on.
//   - Time (TCPConfig.HelloTimeout, default 3 s for the whole ClientHello, not per read):
//     a client trickling a byte a second is closed at the deadline (errHelloTimeout),
//     whatever it has sent.
//
// Anything that is not a ClientHello (plain HTTP on 443, an SSLv2 hello, a handshake
// message of another type, a record of another content type before the hello is whole,
// an empty or over-long record) is not ours to judge: readClientHello reports
// errNotClientHello with the bytes read so far, and the proxy replays them to the
// fallback (Traefik's entry point), which answers as it does without the front (an
// HTTP 400 for plain HTTP, a TLS alert otherwise). Only the two bounds close a
// connection outright. TestNotAClientHelloGoesToTheFallback,
// TestSlowClientHelloIsCutAtTheDeadline, TestOversizeClientHelloIsCut.

var (
	errNotClientHello = errors.New("not a TLS ClientHello")
	errHelloTooLarge  = errors.New("ClientHello over the size bound")
	errHelloTimeout   = errors.New("ClientHello not whole before the deadline")
)

const (
	recordHeaderLen      = 5
	recordTypeHandshake  = 22
	handshakeClientHello = 1
	maxRecordPlaintext   = 1 << 14 // RFC 8446 §5.1: a record's length MUST NOT exceed 2^14
)

// helloRead is what readClientHello read: raw, the bytes exactly as they came (to
// replay), and msg, the handshake message (type 1, 3-byte length, body) for ServerName.
// msg is nil unless the read succeeded.
type helloRead struct {
	raw []byte
	msg []byte
}

// readClientHello reads one ClientHello from c within deadline and maxBytes of records
// (headers included). It never reads past the last record of the message, so c can be
// handed on as it is (a bare *net.TCPConn keeps its splice path). It clears the read
// deadline it set before returning successfully. On errNotClientHello the returned raw
// bytes are everything read (to replay); on the other errors the caller closes c.
func readClientHello(c net.Conn, deadline time.Time, maxBytes int) (helloRead, error) {
	if err := c.SetReadDeadline(deadline); err != nil {
		return helloRead{}, fmt.Errorf("setting the ClientHello deadline: %w", err)
	}
	var h helloRead
	var hs []byte // the handshake message as reassembled so far
	want := -1    // its whole length (4 + declared body length), once known
	for want < 0 || len(hs) < want {
		if len(h.raw)+recordHeaderLen > maxBytes {
			return h, errHelloTooLarge
		}
		hdr, err := readMore(c, &h, recordHeaderLen)
		if err != nil {
			return h, err
		}
		n := int(binary.BigEndian.Uint16(hdr[3:5]))
		if hdr[0] != recordTypeHandshake || n == 0 || n > maxRecordPlaintext {
			// Not TLS (HTTP reads "GET /", an SSLv2 hello starts with a length byte), or
			// a record TLS forbids here: the fallback answers it.
			return h, errNotClientHello
		}
		if len(h.raw)+n > maxBytes {
			return h, errHelloTooLarge
		}
		body, err := readMore(c, &h, n)
		if err != nil {
			return h, err
		}
		hs = append(hs, body...)
		if want < 0 && len(hs) >= 4 {
			if hs[0] != handshakeClientHello {
				return h, errNotClientHello
			}
			want = 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
			// Records carry at least 1 byte of message each, with a 5-byte header: a
			// message that cannot fit in maxBytes of records is refused now, before its
			// bytes are waited for.
			if want+recordHeaderLen > maxBytes {
				return h, errHelloTooLarge
			}
		}
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return h, fmt.Errorf("clearing the ClientHello deadline: %w", err)
	}
	// Bytes after the message in its last record (a client pipelining another handshake
	// message) stay in raw and are replayed; msg is the ClientHello alone.
	h.msg = hs[:want]
	return h, nil
}

// helloChunk is the most readMore reads at once: h.raw grows with the bytes that came,
// never by what a record header announces (5 bytes announcing 2^14 would otherwise hold
// 16 KiB of the front's until the deadline). TestAnAnnouncedRecordIsNotAllocatedBeforeItsBytesCome.
const helloChunk = 1 << 10

// readMore reads exactly n more bytes of c onto h.raw and returns them. A timeout is
// errHelloTimeout; an EOF before they came is errClientClosed.
func readMore(c net.Conn, h *helloRead, n int) ([]byte, error) {
	start := len(h.raw)
	var err error
	for len(h.raw)-start < n && err == nil {
		k := min(n-(len(h.raw)-start), helloChunk)
		h.raw = slices.Grow(h.raw, k)
		var got int
		got, err = c.Read(h.raw[len(h.raw) : len(h.raw)+k])
		h.raw = h.raw[:len(h.raw)+got]
	}
	if len(h.raw)-start == n {
		err = nil
	} else if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	switch {
	case err == nil:
		return h.raw[start:], nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, errHelloTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("%w: the client closed after %d bytes", errClientClosed, len(h.raw))
	default:
		return nil, fmt.Errorf("reading the ClientHello: %w", err)
	}
}

// errClientClosed: the client closed its side before its ClientHello was whole. There is
// nothing to route; the connection is closed.
var errClientClosed = errors.New("client closed before its ClientHello was whole")
