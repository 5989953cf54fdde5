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
// flow holds with its own upstream socket (the kernel's socket buffers not counted).
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
		up := echoUpstream(b)
		var perFlow float64
		for i := 0; i < b.N; i++ {
			perFlow += memoryPerFlow(b, up, hello, flows)
		}
		b.ReportMetric(perFlow/float64(b.N), "bytes/flow")
	})
}

// memoryPerFlow opens flows, each from its own client socket (so each has its own
// upstream socket and reader: the worst case; flows of one client socket share them),
// and returns the heap and stack they hold, per flow. Everything is closed after.
func memoryPerFlow(b *testing.B, up string, hello []byte, flows int) float64 {
	b.StopTimer()
	table := NewTable(twoNames(up))
	r := NewUDPRelay(UDPConfig{NewFlowsBurst: 1 << 20, MaxFlows: 1 << 20}, func() *Table { return table }, nil)
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	go r.Serve(pc)
	defer r.Close()
	addr := pc.LocalAddr().String()
	clients := make([]*net.UDPConn, flows)
	for j := range clients {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[j] = c
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.StartTimer()
	for _, c := range clients {
		openFlow(b, c, addr, hello)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s := r.Stats(); s.Flows != flows || s.Links != flows {
		b.Fatalf("stats %+v", s)
	}
	return float64(after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse) / float64(flows)
}
