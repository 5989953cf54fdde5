package front

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"
)

// readHello runs readClientHello on what a client writes.
func readHello(t *testing.T, sent []byte, maxBytes int) (helloRead, error) {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		_, _ = c.Write(sent)
		c.Close()
	}()
	return readClientHello(s, time.Now().Add(5*time.Second), maxBytes)
}

// Every length of the message is read whole, in one record or several: the 3-byte
// length is read as a number, whatever its low bits (4 + 0x5e0 is 0x5e4, not 4|0x5e0).
func TestClientHelloIsReassembledByItsLength(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 0x5e0, 0x5e3, 0x1000, 0x3ffb, 0x4000, 0x4001, 0x7ff0} {
		msg := append([]byte{1, byte(n >> 16), byte(n >> 8), byte(n)}, bytes.Repeat([]byte{0xa5}, n)...)
		for _, cut := range [][]int{nil, {1}, {4}, {2, 1, 1}, {max(n/2, 1)}} {
			sent := append(records(msg, cut...), 23, 3, 3, 0, 1, 0) // and what follows, unread
			want := records(msg, cut...)
			h, err := readHello(t, sent, 1<<16)
			if err != nil || !bytes.Equal(h.msg, msg) || !bytes.Equal(h.raw, want) {
				t.Errorf("length %#x in records %v: %v; msg %d bytes, raw %d bytes (want %d, %d)", n, cut, err, len(h.msg), len(h.raw), len(msg), len(want))
			}
		}
	}
}

func TestClientHelloEndsWhereTheClientDoes(t *testing.T) {
	msg := append([]byte{1, 0, 0, 10}, make([]byte, 10)...)
	full := records(msg)
	for _, tc := range []struct {
		why  string
		sent []byte
		want error
	}{
		{"nothing", nil, errClientClosed},
		{"half a record header", full[:3], errClientClosed},
		{"half the message", full[:10], errClientClosed},
		{"HTTP", []byte("GET / HTTP/1.1\r\n"), errNotClientHello},
		{"over the bound", records(append([]byte{1, 0, 1, 0}, make([]byte, 256)...)), errHelloTooLarge},
	} {
		h, err := readHello(t, tc.sent, 200)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.why, err, tc.want)
		}
		if errors.Is(err, errNotClientHello) && !bytes.Equal(h.raw, tc.sent[:recordHeaderLen]) {
			t.Errorf("%s: raw %q, want the %d bytes read", tc.why, h.raw, recordHeaderLen)
		}
	}
}

// bytesConn is a net.Conn reading from r (deadlines accepted, never reached), then
// returning end (nil: io.EOF).
type bytesConn struct {
	net.Conn
	r   *bytes.Reader
	end error
}

func (c bytesConn) Read(p []byte) (int, error) {
	if c.r.Len() == 0 && c.end != nil {
		return 0, c.end
	}
	return c.r.Read(p)
}

func (c bytesConn) SetReadDeadline(time.Time) error { return nil }

// FuzzReadClientHello: whatever a client sends, readClientHello never reads past its
// bound, what it returns as read is a prefix of what was sent, and a ClientHello it
// accepts is one whole handshake message of type 1.
func FuzzReadClientHello(f *testing.F) {
	msg := append([]byte{1, 0, 0, 6}, 3, 3, 1, 2, 3, 4)
	f.Add(records(msg))
	f.Add(records(msg, 1, 2))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, sent []byte) {
		const bound = minMaxHello
		h, err := readClientHello(bytesConn{r: bytes.NewReader(sent)}, time.Now().Add(time.Minute), bound)
		if len(h.raw) > bound || !bytes.HasPrefix(sent, h.raw) {
			t.Fatalf("read %d bytes (bound %d), prefix of what was sent: %v", len(h.raw), bound, bytes.HasPrefix(sent, h.raw))
		}
		if err == nil {
			n := int(h.msg[1])<<16 | int(h.msg[2])<<8 | int(h.msg[3])
			if h.msg[0] != 1 || len(h.msg) != 4+n {
				t.Fatalf("accepted a message of type %d, %d bytes for a declared %d", h.msg[0], len(h.msg), n)
			}
		} else if !errors.Is(err, errNotClientHello) && !errors.Is(err, errHelloTooLarge) && !errors.Is(err, errClientClosed) {
			t.Fatalf("unexpected error %v", err)
		}
	})
}
