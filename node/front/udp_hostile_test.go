package front

import (
	"crypto/rand"
	"net"
	"testing"
	"time"

	"github.com/scafo/ingress/node/front/quic"
)

// Hostile clients and hostile routing documents against the QUIC side (issue 47).

// A route naming the relay's own socket would send each flow's Initials back to the
// relay, which opens a flow for them from its own upstream socket and sends them on
// again, until the rate limit of 127.0.0.0/24 stops it. The relay refuses to send to
// itself: one flow opens, and fails.
func TestQUICARouteToTheRelayItselfIsNotSentTo(t *testing.T) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	table := NewTable(twoNames(addr))
	r := NewUDPRelay(UDPConfig{DialTimeout: 50 * time.Millisecond}, func() *Table { return table }, nil)
	ev := newEventLog()
	r.event = ev.record
	served := make(chan error, 1)
	go func() { served <- r.Serve(pc) }()
	t.Cleanup(func() { r.Close(); <-served })

	client := clientSocket(t, "127.0.0.1")
	sendUDP(t, client, addr, initials(t, quic.Version1, randomCID(t), goHello(t, []byte(nameDB)))...)
	ev.wait(t, "failed", 1)
	if s := r.Stats(); s.FlowsOpened != 1 || s.Forbidden != 1 || s.ToUpstream != 0 {
		t.Fatalf("stats %+v: want one flow, its one upstream (the relay) refused, nothing sent", s)
	}
}

// A sender of spoofed Initials (it never receives what the application answers) must
// not hold a flow past UnansweredTimeout: after the application answered, a short header
// packet to a made-up connection ID from the spoofed address used to mark the flow
// established (then it lived for IdleTimeout, 3 min, instead of 10 s: a spoofer could
// pin every flow slot for 18 times less). Established takes a short header from the
// application to the client's CID as well, which it sends only to a client that
// completed its handshake. The flow of a real client beside it is established and
// stays.
func TestQUICABlindSpooferCannotEstablishAFlow(t *testing.T) {
	up := startRawUpstream(t)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	r, ev, addr := startRelay(t, UDPConfig{UnansweredTimeout: 10 * time.Second, IdleTimeout: time.Minute}, twoNames(up.addr()), clock)
	hello := goHello(t, []byte(nameDB))
	clientCID := []byte{0xaa, 0xbb} // initials' SCID
	short := func(cid []byte) []byte {
		b := append([]byte{0x40}, cid...)
		pad := make([]byte, 40)
		if _, err := rand.Read(pad); err != nil {
			t.Fatal(err)
		}
		return append(b, pad...)
	}
	// open sends a flow's Initial and has the application answer it with a long header;
	// it returns the relay's socket for the flow.
	open := func(c *net.UDPConn, answered int) *net.UDPAddr {
		sendUDP(t, c, addr, initials(t, quic.Version1, randomCID(t), hello)...)
		buf := make([]byte, 2048)
		up.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, link, err := up.c.ReadFromUDP(buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := up.c.WriteToUDP(longHeader(quic.Version1, 2, clientCID, 100), link); err != nil {
			t.Fatal(err)
		}
		ev.wait(t, "answered", answered)
		return link
	}
	upstreamGot := func() {
		t.Helper()
		buf := make([]byte, 2048)
		up.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := up.c.ReadFromUDP(buf); err != nil {
			t.Fatal(err)
		}
	}

	spoofed := clientSocket(t, "127.0.0.1")
	open(spoofed, 1)
	sendUDP(t, spoofed, addr, short(randomCID(t)))
	upstreamGot() // relayed: the relay has decided

	real := clientSocket(t, "127.0.0.1")
	link := open(real, 2)
	if _, err := up.c.WriteToUDP(short(clientCID)[:30], link); err != nil {
		t.Fatal(err)
	}
	sendUDP(t, real, addr, short(randomCID(t)))
	ev.wait(t, "established", 1)

	if n := r.sweep(now.Add(10 * time.Second)); n != 1 {
		t.Fatalf("expired %d flows at UnansweredTimeout, want the spoofed one", n)
	}
	if s := r.Stats(); s.Flows != 1 || ev.count("established") != 1 {
		t.Fatalf("stats %+v, established %d: want the real client's flow, established", s, ev.count("established"))
	}
}

// The relay never sends a client anything of its own: datagrams that open no flow (a
// short header to no one, a version no one speaks, which a server would answer with a
// Version Negotiation packet, an Initial under 1200 bytes, a Handshake or 0-RTT packet
// to an unknown CID, an Initial that does not decrypt, a name with no route and no
// fallback) get no byte back: an amplification factor of 0.
func TestQUICTheRelaySendsNothingOfItsOwn(t *testing.T) {
	up := startRawUpstream(t)
	r, ev, addr := startRelay(t, UDPConfig{}, twoNames(up.addr()), nil)
	client := clientSocket(t, "127.0.0.1")
	garbage := func(n int) []byte {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	unknownVersion := longHeader(0x1a2a3a4a, 0, randomCID(t), 1200)
	badInitial := initials(t, quic.Version1, randomCID(t), goHello(t, []byte(nameDB)))[0]
	badInitial[len(badInitial)-1] ^= 1 // the AEAD tag no longer matches
	sent := [][]byte{
		append([]byte{0x40}, garbage(1300)...),
		unknownVersion,
		initials(t, quic.Version1, randomCID(t), goHello(t, []byte(nameDB)))[0][:1199],
		longHeader(quic.Version1, 2, randomCID(t), 1200),
		longHeader(quic.Version1, 1, randomCID(t), 1200),
		badInitial,
		initials(t, quic.Version1, randomCID(t), goHello(t, []byte("unrouted.example.org")))[0],
	}
	total := 0
	for _, d := range sent {
		sendUDP(t, client, addr, d)
		total += len(d)
	}
	ev.wait(t, "refused", 2) // the bad Initial and the unrouted name (their flows' tombstones)
	nothingQueued(t, client)
	nothingQueued(t, up.c)
	if s := r.Stats(); s.ToClient != 0 || s.ToUpstream != 0 {
		t.Fatalf("stats %+v after %d bytes of %d datagrams", s, total, len(sent))
	}
}
