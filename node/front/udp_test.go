package front

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/scafo/ingress/node/front/quic"
)

func quicCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// quic-go clients reach the application through the relay with the exact names and
// their ASCII upper case; the application sees the name as sent and the ALPN. The three
// connections share one client socket (a quic-go Transport, as an HTTP/3 client shares
// its socket across hosts): each reaches its name, though quic-go switches to CIDs
// announced only in encrypted frames right after the handshake, and the flows share
// one socket to the application, which tells them apart by CID.
func TestQUICExactNameReachesTheApplication(t *testing.T) {
	pki := newTestPKI(t, nameDB, nameKV)
	up := startQUICUpstream(t, pki)
	r, _, addr := startRelay(t, UDPConfig{}, twoNames(up.addr()), nil)
	tr := &quicgo.Transport{Conn: clientSocket(t, "127.0.0.1")}
	defer tr.Close()
	ua, _ := net.ResolveUDPAddr("udp", addr)
	names := []string{nameDB, nameKV, strings.ToUpper(nameDB)}
	var conns []*quicgo.Conn
	for _, name := range names {
		c, err := tr.Dial(quicCtx(t), ua, &tls.Config{ServerName: name, RootCAs: pki.roots, NextProtos: []string{"x-test"}}, &quicgo.Config{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer c.CloseWithError(0, "")
		conns = append(conns, c)
	}
	for round := 0; round < 3; round++ {
		for i, name := range names {
			wantAnswer(t, conns[i], name)
		}
	}
	if s := r.Stats(); s.Flows != 3 || s.Links != 1 || s.FlowsOpened != 3 || s.FlowsRouted != 3 || s.FlowsRefused != 0 || s.Failovers != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// Every spelling but the exact name (ASCII case aside) reaches no upstream over QUIC:
// docs/passthrough.md's table, U+0130, U+017F, U+212A, every Unicode space around the
// name, no SNI, two names; in QUIC v1 and v2 Initials, the ClientHello split across
// two packets. The upstream socket receives not one datagram, and the client nothing.
func TestQUICNoSpellingButTheExactNameReachesTheApplication(t *testing.T) {
	up := startRawUpstream(t)
	r, ev, addr := startRelay(t, UDPConfig{NewFlowsBurst: 10000}, twoNames(up.addr()), nil)
	client := clientSocket(t, "127.0.0.1")
	type spelling struct {
		why   string
		names [][]byte
	}
	var cases []spelling
	for _, o := range oddSpellings(t) {
		cases = append(cases, spelling{o.why, [][]byte{[]byte(o.raw)}})
	}
	cases = append(cases,
		spelling{"no SNI", nil},
		spelling{"the exact name twice", [][]byte{[]byte(nameDB), []byte(nameDB)}},
		spelling{"two names", [][]byte{[]byte(nameDB), []byte(nameKV)}},
		spelling{"an empty name", [][]byte{{}}},
	)
	// Go's TLS client's ClientHello and its QUIC API client's, the server_name
	// extension rewritten: v1 carries the one, v2 the other.
	apiHello := quicAPIHello(t, "placeholder.invalid")
	refused := 0
	for i, c := range cases {
		hello := goHello(t, c.names...)
		v := quic.Version1
		if i%2 == 1 {
			v = quic.Version2
			hello = withServerNames(t, apiHello, c.names)
		}
		sendUDP(t, client, addr, initials(t, v, randomCID(t), hello, len(hello)/2)...)
		refused++
		ev.wait(t, "refused", refused)
		if ev.count("routed") != 0 {
			t.Fatalf("%s (% x) was routed", c.why, c.names)
		}
	}
	nothingQueued(t, up.c)
	nothingQueued(t, client)
	if s := r.Stats(); s.ToUpstream != 0 || s.ToClient != 0 || s.FlowsRefused != uint64(len(cases)) {
		t.Fatalf("stats %+v", s)
	}
	// The control: the exact name, crafted the same way, reaches the same socket.
	for i, name := range []string{nameDB, "Db.Example.ORG"} {
		hello := goHello(t, []byte(name))
		if i == 1 {
			hello = withServerNames(t, apiHello, [][]byte{[]byte(name)})
		}
		ps := initials(t, quic.Version2, randomCID(t), hello, len(hello)/2)
		sendUDP(t, client, addr, ps...)
		for _, p := range ps {
			if got := up.next(t); !bytes.Equal(got, p) {
				t.Fatalf("%s: the upstream got other bytes than the client sent", name)
			}
		}
	}
	if got := ev.wait(t, "routed", 2); got != nameDB {
		t.Fatalf("routed to %q", got)
	}
}

// A ClientHello whose server name spans two Initial packets that arrive in reverse
// order, with a 0-RTT packet between them, is read whole; the upstream then receives
// every datagram the client sent, byte for byte, in the order they came.
func TestQUICClientHelloSplitAcrossInitialsInReverseOrderIsRouted(t *testing.T) {
	hellos := map[string][]byte{
		"Go's QUIC API": quicAPIHello(t, nameKV),
		"Go's TLS":      goHello(t, []byte(nameKV)),
	}
	for _, v := range []uint32{quic.Version1, quic.Version2} {
		for client, hello := range hellos {
			t.Run(fmt.Sprintf("%s, version %#x", client, v), func(t *testing.T) {
				splitHelloIsRouted(t, v, hello)
			})
		}
	}
}

func splitHelloIsRouted(t *testing.T, v uint32, hello []byte) {
	up := startRawUpstream(t)
	_, ev, addr := startRelay(t, UDPConfig{}, twoNames(up.addr()), nil)
	client := clientSocket(t, "127.0.0.1")
	at := bytes.Index(hello, []byte(nameKV))
	if at < 0 {
		t.Fatal("no name in the hello")
	}
	dcid := randomCID(t)
	ps := initials(t, v, dcid, hello, at+len(nameKV)/2)
	zeroRTT := longHeader(v, 1, dcid, 40)
	sent := [][]byte{ps[1], zeroRTT, ps[0]}
	sendUDP(t, client, addr, sent...)
	if got := ev.wait(t, "routed", 1); got != nameKV {
		t.Fatalf("routed to %q", got)
	}
	for i, p := range sent {
		if got := up.next(t); !bytes.Equal(got, p) {
			t.Fatalf("datagram %d differs", i)
		}
	}
}

// longHeader is a long header packet of type typ (0 Initial, 1 0-RTT, 2 Handshake, in
// v1 numbering) with n bytes of payload.
func longHeader(v uint32, typ byte, dcid []byte, n int) []byte {
	if v == quic.Version2 {
		typ = (typ + 1) & 3
	}
	b := []byte{0xc0 | typ<<4 | 3}
	b = binary.BigEndian.AppendUint32(b, v)
	b = append(b, byte(len(dcid)))
	b = append(b, dcid...)
	b = append(b, 2, 0xaa, 0xbb)
	b = append(b, 0x40|byte(n>>8), byte(n))
	return append(b, bytes.Repeat([]byte{0x5a}, n)...)
}

// A new connection fails over in document order: a first upstream that refuses (ICMP
// port unreachable) or stays silent for the dial budget gets the held datagrams
// replayed to the next, and the connection succeeds there.
func TestQUICFailoverFollowsTheDocumentOrder(t *testing.T) {
	pki := newTestPKI(t, nameDB, nameKV)
	up := startQUICUpstream(t, pki)
	for _, tc := range []struct {
		why    string
		first  string
		budget time.Duration
	}{
		// A refusal moves on at once: a budget longer than the test's bound shows it.
		{"refused", refusedUDPAddr(t), time.Minute},
		{"silent", silentUDPAddr(t), 300 * time.Millisecond},
	} {
		t.Run(tc.why, func(t *testing.T) {
			r, ev, addr := startRelay(t, UDPConfig{DialTimeout: tc.budget}, twoNames(tc.first, up.addr()), nil)
			quicSession(t, nil, addr, nameDB, pki)
			if got := ev.wait(t, "failover", 1); got != tc.why {
				t.Fatalf("failed over because %q", got)
			}
			if s := r.Stats(); s.Failovers != 1 || s.FlowsFailed != 0 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
	t.Run("none answers", func(t *testing.T) {
		r, ev, addr := startRelay(t, UDPConfig{}, twoNames(refusedUDPAddr(t), refusedUDPAddr(t)), nil)
		client := clientSocket(t, "127.0.0.1")
		hello := goHello(t, []byte(nameDB))
		sendUDP(t, client, addr, initials(t, quic.Version1, randomCID(t), hello)...)
		ev.wait(t, "failed", 1)
		if s := r.Stats(); s.Failovers != 1 || s.FlowsFailed != 1 || s.ToClient != 0 || s.HeldBytes != 0 {
			t.Fatalf("stats %+v", s)
		}
		nothingQueued(t, client)
	})
}

// Non-passthrough QUIC goes to the fallback (Traefik's HTTP/3) only when one is set.
func TestQUICOtherNamesGoToTheFallbackWhenOneIsSet(t *testing.T) {
	pki := newTestPKI(t, nameDB, "other.example.org")
	traefik := startQUICUpstream(t, pki)
	app := startRawUpstream(t)
	r, _, addr := startRelay(t, UDPConfig{Fallback: traefik.addr()}, twoNames(app.addr()), nil)
	quicSession(t, nil, addr, "other.example.org", pki)
	nothingQueued(t, app.c)
	if s := r.Stats(); s.FlowsFallback != 1 || s.FlowsRouted != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A client whose NAT rebinds (a new source port) keeps its connection: its packets
// carry a connection ID the relay learned from the server's long headers, so the flow
// moves to the new address.
func TestQUICFlowFollowsAClientWhoseAddressChanges(t *testing.T) {
	pki := newTestPKI(t, nameDB, nameKV)
	up := startQUICUpstream(t, pki)
	r, ev, addr := startRelay(t, UDPConfig{}, twoNames(up.addr()), nil)
	pc := newRebindingSocket(t)
	c := quicSession(t, pc, addr, nameDB, pki)
	pc.rebind()
	wantAnswer(t, c, nameDB)
	ev.wait(t, "moved", 1)
	if s := r.Stats(); s.Flows != 1 || s.FlowsOpened != 1 || s.Migrations < 1 {
		t.Fatalf("stats %+v", s)
	}
}

// Datagrams under 1200 bytes open no flow, nor do packets of no flow (short headers,
// long headers other than Initial); nothing is sent back for them.
func TestQUICSmallDatagramsOpenNoFlow(t *testing.T) {
	up := startRawUpstream(t)
	r, ev, addr := startRelay(t, UDPConfig{}, twoNames(up.addr()), nil)
	client := clientSocket(t, "127.0.0.1")
	hello := goHello(t, []byte(nameDB))
	const flood = 300
	for i := 0; i < flood; i++ {
		p, err := quic.SealInitial(quic.Version1, randomCID(t), nil, nil, 0, quic.CryptoFrame(0, hello[:100]), 1199)
		if err != nil || len(p) != 1199 {
			t.Fatalf("%d bytes, %v", len(p), err)
		}
		sendUDP(t, client, addr, p, append([]byte{0x40}, bytes.Repeat([]byte{1}, 1300)...), longHeader(quic.Version1, 2, randomCID(t), 1300))
		if i%10 == 9 {
			// Paced, so that the kernel drops none of them on a busy machine.
			ev.wait(t, "small", i+1)
			ev.wait(t, "unmatched", 2*(i+1))
		}
	}
	// A last, valid Initial: once it opened its flow, every datagram before it was read.
	sendUDP(t, client, addr, initials(t, quic.Version1, randomCID(t), hello, 10)[0])
	ev.wait(t, "opened", 1)
	if s := r.Stats(); s.FlowsOpened != 1 || s.Flows != 1 || s.DroppedSmall != flood || s.DroppedUnmatched != 2*flood || s.ToUpstream != 0 {
		t.Fatalf("stats %+v", s)
	}
	nothingQueued(t, client)
	nothingQueued(t, up.c)
}

// MaxFlows, the held-bytes caps and the per-network rate hold, and unanswered flows
// expire (the relay's clock driven by the test).
func TestQUICFlowCapsHoldAndUnansweredFlowsExpire(t *testing.T) {
	up := startRawUpstream(t)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	r, ev, addr := startRelay(t, UDPConfig{MaxFlows: 3, MaxHeldPerFlow: 3000, NewFlowsBurst: 4, NewFlowsPerSecond: 0.001}, twoNames(up.addr()), clock)
	client := clientSocket(t, "127.0.0.1")
	hello := goHello(t, []byte(nameDB))
	first := func() ([]byte, []byte) {
		dcid := randomCID(t)
		return dcid, initials(t, quic.Version1, dcid, hello, 10)[0]
	}
	dcids := [][]byte{}
	for i := 0; i < 5; i++ {
		dcid, p := first()
		dcids = append(dcids, dcid)
		sendUDP(t, client, addr, p)
	}
	ev.wait(t, "flowcap", 2)
	if s := r.Stats(); s.Flows != 3 || s.FlowsOpened != 3 {
		t.Fatalf("stats %+v", s)
	}
	// One flow's 0-RTT packets: held up to 3000 bytes (its 1200-byte Initial and one
	// more), the rest dropped.
	for i := 0; i < 3; i++ {
		sendUDP(t, client, addr, longHeader(quic.Version1, 1, dcids[0], 1150))
	}
	ev.wait(t, "held", 2)
	if s := r.Stats(); s.HeldBytes > 3*3000 || s.DroppedHeld != 2 {
		t.Fatalf("stats %+v", s)
	}
	// The unanswered flows expire; the freed slots take new flows until the
	// network's burst (4) is spent.
	if n := r.sweep(now.Add(10 * time.Second)); n != 3 {
		t.Fatalf("expired %d flows", n)
	}
	if s := r.Stats(); s.Flows != 0 || s.HeldBytes != 0 {
		t.Fatalf("after expiry: %+v", s)
	}
	for i := 0; i < 2; i++ {
		_, p := first()
		sendUDP(t, client, addr, p)
	}
	ev.wait(t, "rate", 1)
	if s := r.Stats(); s.FlowsOpened != 4 || s.DroppedRate != 1 {
		t.Fatalf("stats %+v", s)
	}
	// Another /24 has its own budget.
	other := clientSocket(t, "127.0.1.1")
	_, p := first()
	sendUDP(t, other, addr, p)
	ev.wait(t, "opened", 5)
	nothingQueued(t, up.c)
	nothingQueued(t, client)
}

// An established flow outlives the unanswered timeout and expires only after
// IdleTimeout without a datagram; expiry closes its upstream socket (the relay's clock
// driven by the test).
func TestQUICEstablishedFlowsExpireOnlyWhenIdle(t *testing.T) {
	pki := newTestPKI(t, nameDB, nameKV)
	up := startQUICUpstream(t, pki)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	cfg := UDPConfig{UnansweredTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	r, ev, addr := startRelay(t, cfg, twoNames(up.addr()), clock)
	quicSession(t, nil, addr, nameDB, pki)
	ev.wait(t, "established", 1)
	if n := r.sweep(now.Add(59 * time.Second)); n != 0 {
		t.Fatalf("an established flow expired after 59 s: %d", n)
	}
	if n := r.sweep(now.Add(time.Minute)); n != 1 {
		t.Fatalf("expired %d flows after an idle minute", n)
	}
	if s := r.Stats(); s.Flows != 0 || s.Links != 0 || s.FlowsExpired != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A client that retries from its socket with zero-length CIDs (a new first DCID) while
// its first flow is still held: the upstream's long header answer goes to the new
// flow, which is then answered (no failover), though the two flows share the socket and
// the answer's empty DCID names neither.
func TestQUICARetriedConnectionOnOneSocketIsAnswered(t *testing.T) {
	up := startRawUpstream(t)
	r, ev, addr := startRelay(t, UDPConfig{DialTimeout: time.Minute}, twoNames(up.addr(), silentUDPAddr(t)), nil)
	client := clientSocket(t, "127.0.0.1")
	hello := goHello(t, []byte(nameDB))
	buf := make([]byte, 2048)
	for i := 1; i <= 2; i++ {
		p, err := quic.SealInitial(quic.Version1, randomCID(t), nil, nil, 0, quic.CryptoFrame(0, hello), 1200)
		if err != nil {
			t.Fatal(err)
		}
		sendUDP(t, client, addr, p)
		up.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, from, err := up.c.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		// The server's Initial: DCID the client's (empty) SCID.
		answer := []byte{0xc0, 0, 0, 0, 1, 0, 4, 1, 2, 3, byte(i), 0, 0x40, 20}
		answer = append(answer, make([]byte, 20)...)
		if _, err := up.c.WriteTo(answer, from); err != nil {
			t.Fatal(err)
		}
		ev.wait(t, "answered", i)
	}
	if s := r.Stats(); s.Flows != 2 || s.Links != 1 || s.Failovers != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// On a dual-stack socket (the default ":443"), an IPv4 client's address arrives
// IPv4-mapped: its flow, its network's rate bucket (a /24) and the answers sent back
// all work with the plain IPv4 address.
func TestQUICDualStackSocketServesIPv4Clients(t *testing.T) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv6unspecified})
	if err != nil {
		t.Skipf("no IPv6 socket here: %v", err)
	}
	pki := newTestPKI(t, nameDB, nameKV)
	up := startQUICUpstream(t, pki)
	r, _ := serveRelay(t, pc, UDPConfig{}, twoNames(up.addr()), nil)
	addr := fmt.Sprintf("127.0.0.1:%d", pc.LocalAddr().(*net.UDPAddr).Port)
	quicSession(t, nil, addr, nameDB, pki)
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.rate {
		if !p.Addr().Is4() || p.Bits() != 24 {
			t.Fatalf("rate bucket %s, want an IPv4 /24", p)
		}
	}
	for f := range r.flows {
		if !f.client.Addr().Is4() {
			t.Fatalf("flow client %s, want IPv4", f.client)
		}
	}
}
