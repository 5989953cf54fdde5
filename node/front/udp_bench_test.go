package front

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/scafo/ingress/node/front/quic"
)

// echoUpstream answers every datagram with itself, to whichever socket sent it.
func echoUpstream(b *testing.B) string {
	c := clientSocket(b, "127.0.0.1")
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			c.WriteTo(buf[:n], from)
		}
	}()
	return c.LocalAddr().String()
}

// openFlow opens a flow for nameDB from client (a crafted Initial the echo upstream
// answers with itself: its SCID, 0xaabb, becomes the "server's" CID).
func openFlow(b *testing.B, client *net.UDPConn, addr string, hello []byte) {
	p := initials(b, quic.Version1, randomCID(b), hello)[0]
	sendUDP(b, client, addr, p)
	buf := make([]byte, 2048)
	client.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, _, err := client.ReadFrom(buf); err != nil {
		b.Fatalf("no answer through the relay: %v", err)
	}
}

// BenchmarkUDPRelay measures, on loopback, the datagrams a second one flow relays
// both ways (1200-byte short header packets, 64 in flight, each echoed by the upstream:
// every op is one datagram client→upstream and one back), and the memory one answered
// flow holds (its socket's buffers are the kernel's, not counted).
func BenchmarkUDPRelay(b *testing.B) {
	hello := goHello(b, []byte(nameDB))
	b.Run("datagrams", func(b *testing.B) {
		r, _, addr := startRelay(b, UDPConfig{}, twoNames(echoUpstream(b)), nil)
		client := clientSocket(b, "127.0.0.1")
		openFlow(b, client, addr, hello)
		ua, _ := net.ResolveUDPAddr("udp", addr)
		pkt := make([]byte, 1200)
		pkt[0], pkt[1], pkt[2] = 0x40, 0xaa, 0xbb // short header to CID aabb
		buf := make([]byte, 2048)
		const window = 64
		b.SetBytes(2 * 1200)
		b.ResetTimer()
		start := time.Now()
		sent, got, lost := 0, 0, 0
		for ; sent < min(window, b.N); sent++ {
			client.WriteTo(pkt, ua)
		}
		for got+lost < b.N {
			client.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, _, err := client.ReadFrom(buf); err != nil {
				// Lost on the way (a full socket buffer): refill the window.
				lost += sent - got - lost
			} else {
				got++
			}
			for ; sent < b.N && sent-got-lost < window; sent++ {
				client.WriteTo(pkt, ua)
			}
		}
		el := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(got)/el.Seconds(), "echoes/s")
		b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
		if s := r.Stats(); s.Flows != 1 {
			b.Fatalf("stats %+v", s)
		}
	})
	b.Run("memory per flow", func(b *testing.B) {
		const flows = 500
		r, _, addr := startRelay(b, UDPConfig{NewFlowsBurst: 1 << 20, MaxFlows: 1 << 20}, twoNames(echoUpstream(b)), nil)
		client := clientSocket(b, "127.0.0.1")
		var before, after runtime.MemStats
		for i := 0; i < b.N; i++ {
			runtime.GC()
			runtime.ReadMemStats(&before)
			for j := 0; j < flows; j++ {
				openFlow(b, client, addr, hello)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if s := r.Stats(); s.Flows != (i+1)*flows {
				b.Fatalf("%d flows, want %d", s.Flows, (i+1)*flows)
			}
		}
		perFlow := float64(after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse) / flows
		b.ReportMetric(perFlow, "bytes/flow")
	})
}
