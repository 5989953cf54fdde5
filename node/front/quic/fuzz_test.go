package quic

import (
	"encoding/hex"
	"testing"
)

// FuzzInitial drives the parser with raw datagrams and the frame walker and the
// reassembly with arbitrary Initial payloads (sealed, so that they decrypt): nothing
// panics, and no reader holds more than its cap or returns a longer message.
func FuzzInitial(f *testing.F) {
	v1, _ := hex.DecodeString(rfc9001ClientInitial)
	v2, _ := hex.DecodeString(rfc9369ClientInitial)
	srv, _ := hex.DecodeString(rfc9001ServerInitial)
	frame, _ := hex.DecodeString(clientCryptoFrame)
	f.Add(v1, frame, uint8(0))
	f.Add(v2, frame[:40], uint8(1))
	f.Add(srv, append(CryptoFrame(30, frame[34:]), CryptoFrame(0, frame[4:34])...), uint8(0))
	f.Add(append(v1[:600:600], v2...), []byte{0x02, 0x00, 0x00, 0x01, 0x00, 0x00, 0x06, 0x00, 0x04, 0x01, 0x00, 0x00, 0x00}, uint8(1))
	f.Add([]byte{0xc0, 0, 0, 0, 1, 8}, []byte{0x06, 0x3f, 0xff}, uint8(0))
	const maxBytes, maxFrags = 512, 8
	f.Fuzz(func(t *testing.T, datagram, frames []byte, v uint8) {
		hr := NewHelloReader(maxBytes, maxFrags)
		for i := 0; i < 2; i++ {
			hello, _ := hr.Feed(datagram)
			if len(hello) > maxBytes || hr.Buffered() > maxBytes {
				t.Fatalf("over the cap: hello %d, held %d", len(hello), hr.Buffered())
			}
		}
		version := Version1
		if v&1 == 1 {
			version = Version2
		}
		if len(frames) > 1100 {
			frames = frames[:1100]
		}
		p, err := SealInitial(version, rfcDCID, nil, nil, uint32(v), frames, 1200)
		if err != nil {
			t.Fatal(err)
		}
		hr = NewHelloReader(maxBytes, maxFrags)
		for i := 0; i < 3; i++ {
			hello, _ := hr.Feed(p)
			if len(hello) > maxBytes || hr.Buffered() > maxBytes {
				t.Fatalf("over the cap: hello %d, held %d", len(hello), hr.Buffered())
			}
		}
	})
}
