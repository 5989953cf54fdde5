package front

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/scafo/ingress/node/front/quic"
)

// The QUIC tests' parts, all on loopback in the test's process: a real quic-go
// application hosting two names that answers each stream with the server name and ALPN
// it received (quicUpstream, which counts every datagram its socket reads), the relay
// (startRelay, whose events the tests wait on), and raw Initials crafted around any
// ClientHello.

// countingConn counts the datagrams read from a socket.
type countingConn struct {
	net.PacketConn
	n atomic.Int64
}

func (c *countingConn) ReadFrom(p []byte) (int, net.Addr, error) {
	n, a, err := c.PacketConn.ReadFrom(p)
	if err == nil {
		c.n.Add(1)
	}
	return n, a, err
}

type quicUpstream struct {
	pc *countingConn
	ln *quicgo.Listener
}

func (u *quicUpstream) addr() string     { return u.pc.LocalAddr().String() }
func (u *quicUpstream) datagrams() int64 { return u.pc.n.Load() }

func startQUICUpstream(t testing.TB, pki *testPKI) *quicUpstream {
	t.Helper()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &quicUpstream{pc: &countingConn{PacketConn: udp}}
	tc := &tls.Config{
		NextProtos: []string{"x-test", "h3"},
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := pki.certs[asciiLower(hi.ServerName)]; c != nil {
				return c, nil
			}
			return nil, fmt.Errorf("no certificate for %q", hi.ServerName)
		},
	}
	ln, err := quicgo.Listen(u.pc, tc, &quicgo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	u.ln = ln
	t.Cleanup(func() { ln.Close(); udp.Close() })
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				for {
					s, err := c.AcceptStream(context.Background())
					if err != nil {
						return
					}
					st := c.ConnectionState().TLS
					fmt.Fprintf(s, "%s %s\n", st.ServerName, st.NegotiatedProtocol)
					s.Close()
				}
			}()
		}
	}()
	return u
}

// eventLog records the relay's events; a test waits for a count of one kind.
type eventLog struct {
	mu     sync.Mutex
	counts map[string]int
	last   map[string]string
	wake   chan struct{}
}

func newEventLog() *eventLog {
	return &eventLog{counts: map[string]int{}, last: map[string]string{}, wake: make(chan struct{})}
}

func (e *eventLog) record(kind, detail string) {
	e.mu.Lock()
	e.counts[kind]++
	e.last[kind] = detail
	close(e.wake)
	e.wake = make(chan struct{})
	e.mu.Unlock()
}

func (e *eventLog) count(kind string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[kind]
}

// wait returns once n events of kind happened (the last one's detail), or fails the
// test after a generous bound (a hang, not a timing assumption).
func (e *eventLog) wait(t testing.TB, kind string, n int) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		e.mu.Lock()
		c, d, w := e.counts[kind], e.last[kind], e.wake
		e.mu.Unlock()
		if c >= n {
			return d
		}
		select {
		case <-w:
		case <-deadline:
			t.Fatalf("waited for %d %q events, saw %d (%v)", n, kind, c, e.snapshot())
		}
	}
}

func (e *eventLog) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string]int{}
	for k, v := range e.counts {
		m[k] = v
	}
	return m
}

// startRelay serves a UDP relay for routes on a loopback socket (serveRelay).
func startRelay(t testing.TB, cfg UDPConfig, routes []Route, clock func() time.Time) (*UDPRelay, *eventLog, string) {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r, ev := serveRelay(t, pc, cfg, routes, clock)
	return r, ev, pc.LocalAddr().String()
}

// serveRelay serves a UDP relay for routes on pc; Close at cleanup, and Serve must
// then have returned nil.
func serveRelay(t testing.TB, pc *net.UDPConn, cfg UDPConfig, routes []Route, clock func() time.Time) (*UDPRelay, *eventLog) {
	t.Helper()
	table := NewTable(routes)
	r := NewUDPRelay(cfg, func() *Table { return table }, nil)
	if clock != nil {
		r.now = clock
	}
	ev := newEventLog()
	r.event = ev.record
	served := make(chan error, 1)
	go func() { served <- r.Serve(pc) }()
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v after Close", err)
		}
	})
	return r, ev
}

// quicSession connects a quic-go client (from pc; nil: a socket of its own) through
// addr with serverName and fails the test unless the application answers for it
// (wantAnswer); the connection is closed when the test ends.
func quicSession(t testing.TB, pc net.PacketConn, addr, serverName string, pki *testPKI) *quicgo.Conn {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc := &tls.Config{ServerName: serverName, RootCAs: pki.roots, NextProtos: []string{"x-test"}}
	var c *quicgo.Conn
	if pc == nil {
		c, err = quicgo.DialAddr(ctx, addr, tc, &quicgo.Config{})
	} else {
		c, err = quicgo.Dial(ctx, pc, ua, tc, &quicgo.Config{})
	}
	if err != nil {
		t.Fatalf("%s through %s: %v", serverName, addr, err)
	}
	t.Cleanup(func() { c.CloseWithError(0, "") })
	wantAnswer(t, c, serverName)
	return c
}

// wantAnswer opens a stream on c and fails the test unless the application answers
// "<serverName> x-test": the server name and the ALPN it received.
func wantAnswer(t testing.TB, c *quicgo.Conn, serverName string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.OpenStreamSync(ctx)
	if err == nil {
		_, err = s.Write([]byte("hello\n"))
		s.Close()
	}
	var line string
	if err == nil {
		line, err = bufio.NewReader(s).ReadString('\n')
	}
	if err != nil || line != serverName+" x-test\n" {
		t.Fatalf("the application answered %q, %v; want %q", line, err, serverName+" x-test")
	}
}

func randomCID(t testing.TB) []byte {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// initials carries a ClientHello message in client Initial packets of version v, one
// per piece (hello cut at the given offsets), each padded to 1200 bytes.
func initials(t testing.TB, v uint32, dcid, hello []byte, cuts ...int) [][]byte {
	t.Helper()
	var out [][]byte
	from := 0
	for i, to := range append(cuts, len(hello)) {
		p, err := quic.SealInitial(v, dcid, []byte{0xaa, 0xbb}, nil, uint32(i), quic.CryptoFrame(uint64(from), hello[from:to]), 1200)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
		from = to
	}
	return out
}

func sendUDP(t testing.TB, c *net.UDPConn, addr string, ds ...[]byte) {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if _, err := c.WriteTo(d, ua); err != nil {
			t.Fatal(err)
		}
	}
}

func clientSocket(t testing.TB, ip string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refusedUDPAddr is a loopback UDP port held by a socket connected elsewhere: Linux
// delivers it nothing from anyone else and answers ICMP port unreachable, as a host
// whose application is down does. No one else can take the port meanwhile.
func refusedUDPAddr(t testing.TB) string {
	t.Helper()
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.LocalAddr().String()
}

// silentUDPAddr is a loopback UDP socket that reads nothing and answers nothing.
func silentUDPAddr(t testing.TB) string {
	t.Helper()
	c := clientSocket(t, "127.0.0.1")
	return c.LocalAddr().String()
}

// rawUpstream is a UDP socket that records what it receives, answering nothing.
type rawUpstream struct{ c *net.UDPConn }

func startRawUpstream(t testing.TB) *rawUpstream {
	return &rawUpstream{c: clientSocket(t, "127.0.0.1")}
}

func (u *rawUpstream) addr() string { return u.c.LocalAddr().String() }

// next reads the next datagram (failing the test if none comes within a bound).
func (u *rawUpstream) next(t testing.TB) []byte {
	t.Helper()
	b, _ := recv(t, u.c)
	return b
}

// recv reads the next datagram on c and its sender (failing the test if none comes
// within a bound).
func recv(t testing.TB, c *net.UDPConn) ([]byte, *net.UDPAddr) {
	t.Helper()
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("%s: read: %v", c.LocalAddr(), err)
	}
	return buf[:n], from
}

// nothingQueued reports that no datagram is waiting on c (reads with a deadline
// already past: only what the kernel holds now is seen).
func nothingQueued(t testing.TB, c *net.UDPConn) {
	t.Helper()
	c.SetReadDeadline(time.Now())
	buf := make([]byte, 65536)
	if n, from, err := c.ReadFrom(buf); err == nil {
		t.Fatalf("%s received %d bytes from %s", c.LocalAddr(), n, from)
	}
}

// rebindingSocket is a client's socket seen through a NAT whose mapping expires:
// rebind swaps the socket its datagrams leave from and arrive at (a new source port),
// the client none the wiser.
type rebindingSocket struct {
	net.PacketConn // the first socket: deadlines are not used by the tests' clients
	t              testing.TB
	mu             sync.Mutex
	cur            *net.UDPConn
}

func newRebindingSocket(t testing.TB) *rebindingSocket {
	c := clientSocket(t, "127.0.0.1")
	return &rebindingSocket{PacketConn: c, t: t, cur: c}
}

func (s *rebindingSocket) conn() *net.UDPConn { s.mu.Lock(); defer s.mu.Unlock(); return s.cur }

func (s *rebindingSocket) rebind() {
	next := clientSocket(s.t, "127.0.0.1")
	s.mu.Lock()
	old := s.cur
	s.cur = next
	s.mu.Unlock()
	old.Close() // ends the read in flight there, which then reads on next
}

func (s *rebindingSocket) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		c := s.conn()
		n, a, err := c.ReadFrom(p)
		if err != nil && c != s.conn() {
			continue
		}
		return n, a, err
	}
}

func (s *rebindingSocket) WriteTo(p []byte, a net.Addr) (int, error) { return s.conn().WriteTo(p, a) }
func (s *rebindingSocket) LocalAddr() net.Addr                       { return s.conn().LocalAddr() }
func (s *rebindingSocket) Close() error                              { return s.conn().Close() }

// quicAPIHello is the ClientHello Go's crypto/tls QUIC API client sends for
// serverName (QUIC transport parameters included), as a QUIC client puts it in its
// Initial packets' CRYPTO frames; its initial_source_connection_id is scid, so a QUIC
// server goes on with it.
func quicAPIHello(t testing.TB, serverName string, scid ...byte) []byte {
	t.Helper()
	q := tls.QUICClient(&tls.QUICConfig{TLSConfig: &tls.Config{ServerName: serverName, NextProtos: []string{"x-test"}, MinVersion: tls.VersionTLS13}})
	defer q.Close()
	q.SetTransportParameters(append([]byte{0x0f, byte(len(scid))}, scid...))
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var msg []byte
	for e := q.NextEvent(); e.Kind != tls.QUICNoEvent; e = q.NextEvent() {
		if e.Kind == tls.QUICWriteData && e.Level == tls.QUICEncryptionLevelInitial {
			msg = append(msg, e.Data...)
		}
	}
	if len(msg) < 4 || msg[0] != 1 {
		t.Fatalf("no ClientHello from the QUIC API client: %x", msg)
	}
	return msg
}
