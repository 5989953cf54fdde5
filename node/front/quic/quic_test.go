package quic

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var rfcDCID = []byte{0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08}

// RFC 9001 A.1 and RFC 9369 A.1: the client's initial secret, key and IV, and the
// header protection key (v1), from DCID 0x8394c8f03e515708.
func TestClientInitialKeysMatchRFCAppendixA1(t *testing.T) {
	for _, tc := range []struct {
		name                string
		v                   uint32
		secret, key, iv, hp string
	}{
		{"RFC 9001", Version1, "c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea", "1f369613dd76d5467730efcbe3b1a22d", "fa044b2f42a3fd3b46fb255c", "9f50449e04a0e810283a1e9933adedd2"},
		{"RFC 9369", Version2, "14ec9d6eb9fd7af83bf5a668bc17a7e283766aade7ecd0891f70f9ff7f4bf47b", "8b1a0bc121284290a29e0971b5cd045d", "91f73e2351d8fa91660e909f", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ClientInitialKeys(tc.v, rfcDCID)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what      string
				got, want []byte
			}{{"secret", k.Secret, unhex(t, tc.secret)}, {"key", k.Key, unhex(t, tc.key)}, {"iv", k.IV, unhex(t, tc.iv)}, {"hp", k.HP, unhex(t, tc.hp)}} {
				if len(c.want) > 0 && !bytes.Equal(c.got, c.want) {
					t.Errorf("%s = %x, want %x", c.what, c.got, c.want)
				}
			}
		})
	}
}

// RFC 9001 A.2 / RFC 9369 A.2: the sample's header protection mask, and the whole
// protected client Initial decrypts to the appendix's CRYPTO frame followed by padding;
// the ClientHello it carries comes out of the HelloReader whole.
func TestClientInitialOfRFCAppendixA2Decrypts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v       uint32
		packet  string
		sample  string
		mask    string // mask[0]&0x0f, mask[1:5]
		unprHdr string
	}{
		{"RFC 9001", Version1, rfc9001ClientInitial, "d1b1c98dd7689fb8ec11d242b123dc9b", "037b9aec36", "c300000001088394c8f03e5157080000449e00000002"},
		{"RFC 9369", Version2, rfc9369ClientInitial, "ffe67b6abcdb4298b485dd04de806071", "04a0c95e80", "d36b3343cf088394c8f03e5157080000449e00000002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := unhex(t, tc.packet)
			if len(p) != 1200 {
				t.Fatalf("vector is %d bytes", len(p))
			}
			h, err := ParseLongHeader(p)
			if err != nil {
				t.Fatal(err)
			}
			if h.Version != tc.v || h.Type != TypeInitial || !bytes.Equal(h.DCID, rfcDCID) || len(h.SCID) != 0 || len(h.Token) != 0 || h.Len != 1200 || h.PNOffset != 18 {
				t.Fatalf("header = %+v", h)
			}
			k, err := ClientInitialKeys(tc.v, h.DCID)
			if err != nil {
				t.Fatal(err)
			}
			if got := p[h.PNOffset+4 : h.PNOffset+20]; !bytes.Equal(got, unhex(t, tc.sample)) {
				t.Fatalf("sample = %x", got)
			}
			m := k.Mask(unhex(t, tc.sample))
			want := unhex(t, tc.mask)
			if m[0]&0x0f != want[0] || !bytes.Equal(m[1:5], want[1:5]) {
				t.Fatalf("mask = %x, want low nibble %x then %x", m[:5], want[0], want[1:])
			}
			pn, payload, err := k.Open(p, h)
			if err != nil {
				t.Fatal(err)
			}
			if pn != 2 {
				t.Fatalf("packet number %d, want 2", pn)
			}
			frame := unhex(t, clientCryptoFrame)
			if !bytes.HasPrefix(payload, frame) || len(bytes.Trim(payload[len(frame):], "\x00")) != 0 {
				t.Fatalf("payload is not the CRYPTO frame and padding: %x", payload[:64])
			}
			if len(payload) != 1200-len(unhex(t, tc.unprHdr))-16 {
				t.Fatalf("payload length %d", len(payload))
			}
			hr := NewHelloReader(0, 0)
			hello, err := hr.Feed(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(hello, frame[4:]) || hello[0] != 1 || len(hello) != 4+0xed {
				t.Fatalf("hello = %x", hello)
			}
			// Sealing the appendix's payload gives the appendix's packet back.
			again, err := SealInitial(tc.v, rfcDCID, nil, nil, 2, frame, 1200)
			if err != nil {
				t.Fatal(err)
			}
			// SealInitial writes a 4-byte packet number: the appendix's header has one too.
			if !bytes.Equal(again, p) {
				t.Fatalf("sealed packet differs from the appendix")
			}
		})
	}
}

// RFC 9001 A.3 / RFC 9369 A.3: the server Initial's long header (its SCID is what a
// front learns the server's connection ID from) parses; its payload decrypts with the
// server keys.
func TestServerInitialOfRFCAppendixA3Parses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v      uint32
		packet string
	}{{"RFC 9001", Version1, rfc9001ServerInitial}, {"RFC 9369", Version2, rfc9369ServerInitial}} {
		t.Run(tc.name, func(t *testing.T) {
			p := unhex(t, tc.packet)
			h, err := ParseLongHeader(p)
			if err != nil {
				t.Fatal(err)
			}
			if h.Type != TypeInitial || len(h.DCID) != 0 || !bytes.Equal(h.SCID, unhex(t, "f067a5502a4262b5")) || h.Len != len(p) {
				t.Fatalf("header = %+v", h)
			}
			k, err := ServerInitialKeys(tc.v, rfcDCID)
			if err != nil {
				t.Fatal(err)
			}
			_, payload, err := k.Open(p, h)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(payload, unhex(t, serverPayload)) {
				t.Fatalf("payload = %x", payload)
			}
			if err := Frames(payload, func(uint64, []byte) error { return nil }); err != nil {
				t.Fatalf("ACK and CRYPTO frames: %v", err)
			}
		})
	}
}

func TestReassemblerAcceptsOverlapsAndKeepsFirstBytes(t *testing.T) {
	// The message: header (type 1, length 10), then "0123456789" at offsets 4..13.
	var r Reassembler
	for _, s := range []struct {
		off  int
		data string
	}{{8, "4567"}, {12, "89"}, {2, "\x00\x0a01"}, {0, "\x01\x00"}} {
		if err := r.Add(uint64(s.off), []byte(s.data)); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok, err := r.ClientHello(); err != nil || ok {
		t.Fatalf("complete before offsets 6..7 arrived: %q %v", got, err)
	}
	// Overlaps 5..11: only the gap 6..7 takes its bytes.
	if err := r.Add(5, []byte("XYZWVUT")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := r.ClientHello()
	if err != nil || !ok {
		t.Fatalf("not complete: %v", err)
	}
	if want := "\x01\x00\x00\x0a01YZ456789"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestReassemblyCapsHold(t *testing.T) {
	r := Reassembler{MaxBytes: 100, MaxFragments: 3}
	if err := r.Add(90, make([]byte, 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("past the byte cap: %v", err)
	}
	if err := r.Add(1<<61, []byte{1}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("far offset: %v", err)
	}
	for i := 0; i < 3; i++ {
		if err := r.Add(uint64(10*i+10), []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Add(50, []byte{1}); !errors.Is(err, ErrFragments) {
		t.Fatalf("fourth fragment: %v", err)
	}
	r2 := Reassembler{MaxBytes: 100}
	_ = r2.Add(0, []byte{1, 0, 1, 0})
	if _, _, err := r2.ClientHello(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a hello longer than the cap: %v", err)
	}
	r3 := Reassembler{}
	_ = r3.Add(0, []byte{2, 0, 0, 0})
	if _, _, err := r3.ClientHello(); !errors.Is(err, ErrNotHello) {
		t.Fatalf("a ServerHello: %v", err)
	}
	if r.Buffered() > 100 || r2.Buffered() > 100 {
		t.Fatalf("buffers over the cap: %d %d", r.Buffered(), r2.Buffered())
	}
}

// An Initial may carry only PADDING, PING, ACK, CRYPTO and CONNECTION_CLOSE.
func TestInitialWithOtherFramesIsMalformed(t *testing.T) {
	for name, payload := range map[string][]byte{
		"STREAM":                {0x08, 0x00, 0x01, 'x'},
		"NEW_TOKEN":             {0x07, 0x01, 'x'},
		"two-byte PADDING type": {0x40, 0x00},
		"truncated CRYPTO":      {0x06, 0x00, 0x05, 'x'},
		"empty":                 {},
		"ACK range overrun":     {0x02, 0x00, 0x00, 0x3f},
	} {
		if err := Frames(payload, func(uint64, []byte) error { return nil }); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ok := []byte{0x01, 0x00, 0x02, 0x05, 0x00, 0x01, 0x00, 0x02, 0x01, 0x00, 0x1c, 0x00, 0x00, 0x01, 'r', 0x06, 0x00, 0x01, 'h'}
	var got []byte
	if err := Frames(ok, func(_ uint64, d []byte) error { got = append(got, d...); return nil }); err != nil || string(got) != "h" {
		t.Fatalf("PING, ACK with a range, CONNECTION_CLOSE, CRYPTO: %q %v", got, err)
	}
}

func TestHelloReaderRefusesWhatItCannotRead(t *testing.T) {
	p := unhex(t, rfc9001ClientInitial)
	bad := append([]byte(nil), p...)
	bad[100] ^= 1
	if _, err := NewHelloReader(0, 0).Feed(bad); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("tampered: %v", err)
	}
	other := append([]byte(nil), p...)
	other[1] = 0x0a // a greased version
	if _, err := NewHelloReader(0, 0).Feed(other); !errors.Is(err, ErrVersion) {
		t.Fatalf("unknown version: %v", err)
	}
	short, _ := SealInitial(Version1, []byte("1234567"), nil, nil, 0, CryptoFrame(0, []byte{1, 0, 0, 0}), 1200)
	if _, err := NewHelloReader(0, 0).Feed(short); !errors.Is(err, ErrConnIDLen) {
		t.Fatalf("7-byte DCID: %v", err)
	}
	// A later Initial that does not decrypt is ignored, not fatal.
	hr := NewHelloReader(0, 0)
	first, _ := SealInitial(Version1, rfcDCID, nil, nil, 0, CryptoFrame(0, []byte{1, 0, 0, 2}), 1200)
	if h, err := hr.Feed(first); err != nil || h != nil {
		t.Fatal(h, err)
	}
	if h, err := hr.Feed(bad); err != nil || h != nil {
		t.Fatalf("later garbage: %x %v", h, err)
	}
	second, _ := SealInitial(Version1, rfcDCID, nil, nil, 1, CryptoFrame(4, []byte{7, 8}), 1200)
	if h, err := hr.Feed(second); err != nil || !bytes.Equal(h, []byte{1, 0, 0, 2, 7, 8}) {
		t.Fatalf("completed: %x %v", h, err)
	}
}
