package front

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/scafo/ingress/node/front/quic"
)

// FuzzUDPRelayClientDatagrams feeds the relay arbitrary datagrams from a few client
// addresses (the input is a sequence of [port byte][length uint16][bytes]) with a
// silent upstream: nothing panics, nothing is ever sent to a client, and the caps hold.
func FuzzUDPRelayClientDatagrams(f *testing.F) {
	hello := quicAPIHello(f, nameDB)
	dcid := []byte("12345678")
	seed := func(port byte, ds ...[]byte) []byte {
		var in []byte
		for _, d := range ds {
			in = append(in, port)
			in = binary.BigEndian.AppendUint16(in, uint16(len(d)))
			in = append(in, d...)
		}
		return in
	}
	ps := initials(f, quic.Version1, dcid, hello, 40)
	f.Add(seed(1, ps[1], ps[0], []byte{0x40, 1, 2, 3}))
	f.Add(seed(2, initials(f, quic.Version2, dcid, hello)...))
	f.Add(seed(3, longHeader(quic.Version1, 1, dcid, 30), ps[0]))
	f.Add([]byte{1, 0, 3, 0xc0, 0, 0})
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		f.Fatal(err)
	}
	defer silent.Close()
	routes := twoNames(silent.LocalAddr().String())
	const maxFlows, maxHeld = 4, 8000
	f.Fuzz(func(t *testing.T, in []byte) {
		table := NewTable(routes)
		r := NewUDPRelay(UDPConfig{MaxFlows: maxFlows, MaxHeldTotal: maxHeld, MaxHeldPerFlow: 4000, NewFlowsBurst: 100}, func() *Table { return table }, nil)
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		r.pc = pc // fromClient is driven directly: no Serve, no sweeper
		defer func() {
			r.Close()
			pc.Close()
		}()
		for len(in) >= 3 {
			port, n := in[0], int(binary.BigEndian.Uint16(in[1:3]))
			in = in[3:]
			n = min(n, len(in))
			d := append([]byte(nil), in[:n]...)
			in = in[n:]
			r.fromClient(d, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 1}), 1000+uint16(port%4)))
			s := r.Stats()
			if s.ToClient != 0 || s.Flows > maxFlows || s.HeldBytes > maxHeld || s.HeldBytes < 0 {
				t.Fatalf("stats %+v", s)
			}
		}
	})
}
