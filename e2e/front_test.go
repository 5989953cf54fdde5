package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/node/front/quic"
)

// The layer-4 front (`scafo-node front`, node/front; docs/passthrough.md, "The layer-4
// front") in front of a real Traefik: TLS and QUIC routed by the exact server name to a
// passthrough application's own TLS, everything else to Traefik's TLS entry point
// behind a PROXY v2 header. The front runs as the unit runs it: its sockets are held by
// this test, as systemd holds scafo-front.socket's, and handed over as descriptors 3
// and 4 (LISTEN_FDS), so a restart refuses nothing.

// frontArgs: routers on websecure, and the render leaves passthrough names to the front.
var frontArgs = append(append([]string(nil), passthroughArgs...), "--traefik.front=true")

// countingPC counts the datagrams a QUIC application's socket reads, and the long
// header packets by Destination Connection ID.
type countingPC struct {
	net.PacketConn
	n     atomic.Int64
	mu    sync.Mutex
	dcids map[string]int
}

func (c *countingPC) ReadFrom(p []byte) (int, net.Addr, error) {
	n, a, err := c.PacketConn.ReadFrom(p)
	if err == nil {
		c.n.Add(1)
		if h, herr := quic.ParseLongHeader(p[:n]); herr == nil {
			c.mu.Lock()
			if c.dcids == nil {
				c.dcids = map[string]int{}
			}
			c.dcids[string(h.DCID)]++
			c.mu.Unlock()
		}
	}
	return n, a, err
}

func (c *countingPC) withDCID(dcid []byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dcids[string(dcid)]
}

// quicApp is a passthrough application's QUIC side (quic-go): exact names only (ASCII
// case folded), one line per stream, the tlsReply of its connection.
type quicApp struct {
	name string
	pc   *countingPC
	ln   *quicgo.Listener
}

func startQUICApp(t *testing.T, name, addr string, certs map[string]*tls.Certificate) *quicApp {
	t.Helper()
	var udp net.PacketConn
	if err := poll(5*time.Second, 50*time.Millisecond, func() error {
		var err error
		udp, err = net.ListenPacket("udp", addr)
		return err
	}); err != nil {
		t.Fatalf("quic app %s: %v", name, err)
	}
	a := &quicApp{name: name, pc: &countingPC{PacketConn: udp}}
	tc := &tls.Config{
		NextProtos: []string{"x-scafo", "h3"},
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := certs[asciiLower(h.ServerName)]; c != nil {
				return c, nil
			}
			return nil, fmt.Errorf("no certificate for %q (exact names only, no default)", h.ServerName)
		},
	}
	ln, err := quicgo.Listen(a.pc, tc, &quicgo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a.ln = ln
	t.Cleanup(a.stop)
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
					b, _ := json.Marshal(tlsReply{Name: a.name, SNI: st.ServerName, ALPN: st.NegotiatedProtocol})
					s.Write(append(b, '\n'))
					s.Close()
				}
			}()
		}
	}()
	return a
}

func (a *quicApp) stop() { a.ln.Close(); a.pc.Close() }

// dialQUIC opens a QUIC connection (quic-go's client) with sni and returns the
// application's reply.
func dialQUIC(addr, sni string, roots *x509.CertPool) (tlsReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := quicgo.DialAddr(ctx, addr, &tls.Config{ServerName: sni, RootCAs: roots, NextProtos: []string{"x-scafo"}},
		&quicgo.Config{HandshakeIdleTimeout: 3 * time.Second})
	if err != nil {
		return tlsReply{}, err
	}
	defer c.CloseWithError(0, "")
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		return tlsReply{}, err
	}
	s.Write([]byte("hello\n"))
	s.Close()
	line, err := bufio.NewReader(s).ReadBytes('\n')
	if err != nil {
		return tlsReply{}, fmt.Errorf("reading the reply: %w", err)
	}
	var rep tlsReply
	if err := json.Unmarshal(line, &rep); err != nil {
		return tlsReply{}, err
	}
	return rep, nil
}

// frontProc is a `scafo-node front` whose sockets this test holds.
type frontProc struct {
	p        *proc.Proc
	tcp, udp string
}

func startFront(t *testing.T, n *node, fallback string) *frontProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tf, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	uf, err := uc.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); uc.Close(); tf.Close(); uf.Close() })
	fp := &frontProc{tcp: ln.Addr().String(), udp: uc.LocalAddr().String()}
	// LISTEN_PID must be the front's pid: the shell's, which exec keeps.
	fp.p = newProc(t, "front", "/bin/sh", []string{"-c", `export LISTEN_PID=$$ LISTEN_FDS=2; exec "$0" "$@"`, bins.node, "front",
		"--nodes=http://" + hostPort(n.ip, n.port), "--token=" + testIngressToken, "--name=front-e2e",
		"--listen.tcp=" + fp.tcp, "--listen.udp=" + fp.udp, "--fallback.tls=" + fallback,
		"--stateFile=" + filepath.Join(t.TempDir(), "routes.json"), "--shutdownGrace=3s",
		"--udp.newFlowsPerSecond=10000", "--udp.dialTimeout=300ms", "--tcp.dialTimeout=300ms"}, nil)
	fp.p.ExtraFiles = []*os.File{tf, uf}
	fp.p.Grace = 5 * time.Second
	fp.p.MustStart(t)
	return fp
}

// frontFleet: two nodes; acme's HTTP application web on n1 holding *.example.org;
// acme's passthrough application db on [n1, n2] holding db.example.org, kv.example.org
// and ci.example.org, each instance a TLS server and a QUIC server on one port number;
// a Traefik whose websecure entry point takes PROXY v2 from loopback; the front before
// it, following n1.
type frontFleet struct {
	*passthroughFleet
	quic  map[string]*quicApp
	tr    *traefik
	front *frontProc
}

var frontDBNames = []string{"db.apps.localhost", "db.example.org", "kv.example.org", "ci.example.org"}

func startFrontFleet(t *testing.T) *frontFleet {
	t.Helper()
	f := startFleet(t, 2, nodeOptions{args: frontArgs})
	n1, n2 := f.nodes[0], f.nodes[1]
	p := &passthroughFleet{f: f, ca: newTestCA(t), db: map[string]*tlsApp{}, dbCert: map[string]*tls.Certificate{}, log: &helloLog{}}
	ff := &frontFleet{passthroughFleet: p, quic: map[string]*quicApp{}}
	p.web = f.deploy(t, "web", "acme", []*node{n1}, "/healthz")
	n1.claim(t, "web", "*.example.org")
	for _, n := range frontDBNames {
		c := p.ca.leaf(t, n)
		p.dbCert[n] = &c
	}
	n1.call(t, http.MethodPut, "/v1/apps/db", map[string]any{"account": "acme", "placement": []string{"n1", "n2"}, "passthrough": true}, nil)
	for _, h := range frontDBNames[1:] {
		n1.claim(t, "db", h)
	}
	for _, n := range []*node{n1, n2} {
		port := n.allocatePort(t, "db")
		p.db[n.name] = startTLSApp(t, "db@"+n.name, hostPort(n.ip, port), p.dbCert, false, p.log)
		ff.quic[n.name] = startQUICApp(t, "db@"+n.name, hostPort(n.ip, port), p.dbCert)
		n.setInstance(t, "db", port, true)
	}
	for _, n := range f.nodes {
		waitFor(t, n.name+" routes db on both nodes", routeTimeout, func() error { return n.hasUpstreams("db", 2) })
	}
	ff.tr = startTraefik(t, "traefik-behind-front", traefikOptions{node: p.f.nodes[0], edit: func(rendered []byte) ([]byte, error) {
		return withEntryPoint(rendered, func(ws map[string]any) {
			h, _ := ws["http"].(map[string]any)
			h["tls"] = map[string]any{}
			ws["proxyProtocol"] = map[string]any{"trustedIPs": []string{"127.0.0.1/32"}}
		})
	}})
	ff.front = startFront(t, n1, ff.tr.secureAddr())
	waitFor(t, "db through the front, TCP and QUIC", routeTimeout, func() error {
		if rep, c, err := dialTLS(ff.front.tcp, "db.example.org", nil, p.ca.pool); err != nil {
			return err
		} else if c.Close(); rep.Name != "db@n1" {
			return fmt.Errorf("TCP answered by %s", rep.Name)
		}
		rep, err := dialQUIC(ff.front.udp, "db.example.org", p.ca.pool)
		if err != nil {
			return fmt.Errorf("QUIC: %w", err)
		}
		if rep.Name != "db@n1" {
			return fmt.Errorf("QUIC answered by %s", rep.Name)
		}
		return nil
	})
	return ff
}

// withDCID counts the long header packets of connection ID dcid the instances read.
func (ff *frontFleet) withDCID(dcid []byte) int {
	n := 0
	for _, a := range ff.quic {
		n += a.pc.withDCID(dcid)
	}
	return n
}

// clientHelloFor is the ClientHello message Go's TLS client sends, with its server name
// replaced by raw exactly (same length as a placeholder; "" sends none).
func clientHelloFor(t *testing.T, raw string) []byte {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"x-scafo"}, MinVersion: tls.VersionTLS13}
	ph := strings.Repeat("q", len(raw))
	if raw != "" {
		cfg.ServerName = ph
	}
	c, s := net.Pipe()
	defer s.Close()
	go func() { _ = tls.Client(c, cfg).Handshake(); c.Close() }()
	var rec []byte
	buf := make([]byte, 1<<16)
	for len(rec) < 5 || len(rec) < 5+(int(rec[3])<<8|int(rec[4])) {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatalf("capturing a ClientHello: %v", err)
		}
		rec = append(rec, buf[:n]...)
	}
	msg := append([]byte(nil), rec[5:5+(int(rec[3])<<8|int(rec[4]))]...)
	if raw != "" {
		i := strings.Index(string(msg), ph)
		if i < 0 {
			t.Fatal("placeholder not in the ClientHello")
		}
		copy(msg[i:], raw)
	}
	return msg
}

// sendQUICInitials sends hello in two client Initial packets (QUIC v1), the second
// half first, from a fresh socket, and returns their Destination Connection ID.
func sendQUICInitials(t *testing.T, addr string, hello []byte) []byte {
	t.Helper()
	dcid := make([]byte, 8)
	rand.Read(dcid)
	cut := len(hello) / 2
	var ds [][]byte
	for i, part := range [][2]int{{0, cut}, {cut, len(hello)}} {
		d, err := quic.SealInitial(1, dcid, []byte{0xaa, 0xbb}, nil, uint32(i), quic.CryptoFrame(uint64(part[0]), hello[part[0]:part[1]]), 1200)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, d := range []([]byte){ds[1], ds[0]} {
		if _, err := c.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	return dcid
}

// unicodeSpaces are the characters strings.TrimSpace removes (unicode.White_Space).
var unicodeSpaces = []rune{'\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
	0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000}

// TestTheFrontRoutesOnlyExactNamesOverTCPAndQUIC: through the front, each exact name
// (ASCII case aside) reaches the passthrough application's own TLS, over TCP and over
// QUIC; every other spelling (docs/passthrough.md's table, the ones Traefik folds onto
// the name: surrounding Unicode spaces, U+212A, U+0130, U+017F) reaches no instance,
// over TCP (it goes to Traefik, which answers with its own certificate) and over QUIC
// (dropped); HTTPS for the HTTP application goes through the front to Traefik, which
// reads the PROXY header; the render holds no TCP router; the front is an ingress of
// its own kind in the node's reports.
func TestTheFrontRoutesOnlyExactNamesOverTCPAndQUIC(t *testing.T) {
	ff := startFrontFleet(t)
	addr, uaddr := ff.front.tcp, ff.front.udp
	for _, sni := range append(frontDBNames, "DB.Example.ORG", "Ci.EXAMPLE.org") {
		rep, c, err := dialTLS(addr, sni, []string{"x-scafo", "h2"}, ff.ca.pool)
		if err != nil {
			t.Fatalf("TCP %s: %v", sni, err)
		}
		c.Close()
		if rep.Name != "db@n1" || rep.SNI != sni || rep.ALPN != "x-scafo" {
			t.Fatalf("TCP %s: reply %+v, want db@n1 with the name and ALPN as sent", sni, rep)
		}
		qrep, err := dialQUIC(uaddr, sni, ff.ca.pool)
		if err != nil {
			t.Fatalf("QUIC %s: %v", sni, err)
		}
		if qrep.Name != "db@n1" || qrep.SNI != sni || qrep.ALPN != "x-scafo" {
			t.Fatalf("QUIC %s: reply %+v", sni, qrep)
		}
	}

	odd := []string{"db.apps.localhost.", "db.apps.localhost:443", "db.\u00e4pps.localhost", "db.\u0430pps.localhost",
		"127.0.0.1", "::1", "", "*.example.org", "*.apps.localhost", "nope.apps.localhost", "a.db.example.org",
		"other.example.org", "web.apps.localhost", "DB.example.org.", "db%2Eexample.org", "db.example.org..",
		".db.example.org", "db.example.org\x00", "db\x00.example.org", "xn--db-8ka.example.org",
		"\u0130db.example.org", "c\u0130.example.org", "\u212av.example.org", "db.app\u017f.localhost"}
	for _, sp := range unicodeSpaces {
		odd = append(odd, string(sp)+"db.example.org", "kv.example.org"+string(sp))
	}
	control := clientHelloFor(t, "db.example.org")
	for _, raw := range odd {
		// TCP: the connection goes to Traefik; no ClientHello reaches an instance and
		// no session is made with an application's certificate.
		before := len(ff.hellos())
		out := dialRawSNI(addr, raw, []string{"x-scafo"})
		if hellos := ff.hellos(); len(hellos) != before {
			t.Errorf("TCP %q reached a passthrough instance (%q)", raw, hellos[before:])
		}
		if out.handshake && out.issuer == ff.ca.cert.Subject.CommonName {
			t.Errorf("TCP %q: a session with an application's certificate: %+v", raw, out)
		}
		// QUIC: the odd Initials, then the exact name's as a control. The front reads
		// one socket in order: once the control's datagrams reached an instance, the odd
		// ones were dealt with, and none of their connection's may have reached one.
		oddID := sendQUICInitials(t, uaddr, clientHelloFor(t, raw))
		ctlID := sendQUICInitials(t, uaddr, control)
		waitFor(t, fmt.Sprintf("the control after QUIC %q", raw), 10*time.Second, func() error {
			if got := ff.withDCID(ctlID); got < 2 {
				return fmt.Errorf("%d of the control's packets", got)
			}
			return nil
		})
		if got := ff.withDCID(oddID); got != 0 {
			t.Errorf("QUIC %q: %d of its packets reached an instance", raw, got)
		}
	}
	t.Logf("%d odd spellings: none reached an instance over TCP or QUIC", len(odd))

	// A ClientHello in two TCP segments still reaches (the front reads records across
	// segments).
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(&splitConn{Conn: c}, &tls.Config{ServerName: "kv.example.org", RootCAs: ff.ca.pool})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("a ClientHello in two segments: %v", err)
	}
	tc.Close()

	// HTTPS for the HTTP application: through the front to Traefik (PROXY v2 read on
	// websecure), served by web.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "a.example.org"}}}
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/", nil)
	req.Host = "a.example.org"
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("HTTPS through the front: %v", err)
	}
	r, _ := readResponse(resp)
	resp.Body.Close()
	if r.from() != "web@n1" {
		t.Fatalf("HTTPS a.example.org through the front: served by %s", r.from())
	}

	// No TCP router in Traefik: the render leaves passthrough names to the front.
	ff.tr.requireProviderClean(t, "http")
	var tcpRouters []map[string]any
	if err := ff.tr.api("/api/tcp/routers", &tcpRouters); err != nil || len(tcpRouters) != 0 {
		t.Fatalf("Traefik's TCP routers with traefik.front on: %v %v, want none", tcpRouters, err)
	}
	// The front reports what it applied, as an ingress of kind front.
	n1 := ff.f.nodes[0]
	waitFor(t, "the front in n1's ingress reports", routeTimeout, func() error {
		st, b := n1.do(t, http.MethodGet, "/v1/status", nil, testAdminToken)
		if st != http.StatusOK {
			return fmt.Errorf("%d", st)
		}
		if !strings.Contains(string(b), `"name":"front-e2e"`) || !strings.Contains(string(b), `"kind":"front"`) {
			return errors.New("not listed yet")
		}
		return nil
	})
}

// splitConn writes its first write in two TCP segments.
type splitConn struct {
	net.Conn
	done bool
}

func (c *splitConn) Write(p []byte) (int, error) {
	if c.done || len(p) < 20 {
		return c.Conn.Write(p)
	}
	c.done = true
	if _, err := c.Conn.Write(p[:11]); err != nil {
		return 0, err
	}
	time.Sleep(50 * time.Millisecond) // a separate segment, not a wait for a condition
	n, err := c.Conn.Write(p[11:])
	return n + 11, err
}

// dialLoad is a load of new connections (startDialLoad, startConnLoad): who answered
// each, or the error.
type dialLoad struct {
	shotLog
	stop func()
}

// startDialLoad starts dial every interval, each in a goroutine of its own (a slow one
// does not hold the next back).
func startDialLoad(every time.Duration, dial func() (from string, err error)) *dialLoad {
	l := &dialLoad{}
	var wg sync.WaitGroup
	halt := repeat(nil, every, func() {
		wg.Add(1)
		go func(at time.Time) {
			defer wg.Done()
			s := connShot{at: at}
			from, err := dial()
			s.took, s.from = time.Since(at), from
			if err != nil {
				s.err = err.Error()
			}
			l.add(s)
		}(time.Now())
	})
	l.stop = func() { halt(); wg.Wait() }
	return l
}

// startQUICLoad opens a verified QUIC connection (quic-go) every interval.
func startQUICLoad(addr, host string, roots *x509.CertPool, every time.Duration) *dialLoad {
	return startDialLoad(every, func() (string, error) {
		rep, err := dialQUIC(addr, host, roots)
		return rep.Name, err
	})
}

func failures(shots []connShot) (n int, first string) {
	for _, s := range shots {
		if s.err != "" {
			if n == 0 {
				first = s.err
			}
			n++
		}
	}
	return n, first
}

// TestTheFrontLosesNoConnectionAcrossDeploysDeathsAndItsRestart: db on [n1, n2], the
// front preferring n1, a new verified TCP connection every 20 ms and a new QUIC
// connection every 50 ms. A deploy across n1's port pair with ?wait=applied (which
// waits for the front too) fails none, TCP or QUIC, and sends every connection opened
// after the answer to the new release, while a connection open on the old release
// lasts until it exits; the primary's death with db@n2 ready fails none (the front
// dials the next upstream at once on a refusal, and replays a QUIC flow's first
// datagrams to it); a restart of the front refuses no TCP connection (the sockets are
// held across it).
func TestTheFrontLosesNoConnectionAcrossDeploysDeathsAndItsRestart(t *testing.T) {
	ff := startFrontFleet(t)
	n1 := ff.f.nodes[0]
	addr, uaddr := ff.front.tcp, ff.front.udp
	load := startConnLoad(addr, "db.example.org", ff.ca.pool, 20*time.Millisecond)
	defer load.stop()
	qload := startQUICLoad(uaddr, "kv.example.org", ff.ca.pool, 50*time.Millisecond)
	defer qload.stop()
	time.Sleep(500 * time.Millisecond)

	// A deploy across n1's pair.
	_, old, err := dialTLS(addr, "db.example.org", nil, ff.ca.pool)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	port, pair := n1.instancePair(t, "db")
	next := pair[0]
	if port == pair[0] {
		next = pair[1]
	}
	r2 := startTLSApp(t, "db@n1-r2", hostPort(n1.ip, next), ff.dbCert, false, ff.log)
	q2 := startQUICApp(t, "db@n1-r2", hostPort(n1.ip, next), ff.dbCert)
	t0 := time.Now()
	took := n1.moveAndWait(t, "db", next)
	applied := time.Now()
	time.Sleep(time.Second)
	_ = old.SetDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(old)
	if _, err := old.Write([]byte("still here\n")); err != nil {
		t.Fatalf("the connection open on the old release failed after the deploy: %v", err)
	}
	if line, err := rd.ReadString('\n'); err != nil || line != "still here\n" {
		t.Fatalf("the old release's open connection: %q %v", line, err)
	}
	ff.db["n1"].stop()
	ff.quic["n1"].stop()
	if _, err := rd.ReadString('\n'); err == nil {
		t.Fatal("the old release exited and its connection stayed open")
	}
	end := time.Now()
	for name, shots := range map[string][]connShot{"TCP": load.between(t0.Add(-500*time.Millisecond), end), "QUIC": qload.between(t0.Add(-500*time.Millisecond), end)} {
		failed, first := failures(shots)
		late := 0
		for _, s := range shots {
			if s.from == "db@n1" && s.at.After(applied) {
				late++
			}
		}
		if failed > 0 || late > 0 {
			t.Errorf("deploy, %s: %d of %d new connections failed (first: %s), %d opened after wait=applied reached the old release", name, failed, len(shots), first, late)
		}
		t.Logf("deploy, %s: wait=applied in %s; %d new connections, %d failed, %d late on the old release", name, ms(took), len(shots), failed, late)
	}

	// The primary dies; db@n2 is ready.
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	r2.stop()
	q2.stop()
	waitFor(t, "new TCP and QUIC connections reach db@n2", routeTimeout, func() error {
		var tcp, udp bool
		for _, s := range load.between(killed, time.Now()) {
			tcp = tcp || s.from == "db@n2"
		}
		for _, s := range qload.between(killed, time.Now()) {
			udp = udp || s.from == "db@n2"
		}
		if !tcp || !udp {
			return errors.New("not yet")
		}
		return nil
	})
	time.Sleep(time.Second)
	for name, shots := range map[string][]connShot{"TCP": load.between(killed, time.Now()), "QUIC": qload.between(killed, time.Now())} {
		failed, first := failures(shots)
		if failed > 0 {
			t.Errorf("death, %s: %d of %d new connections failed (first: %s)", name, failed, len(shots), first)
		}
		t.Logf("death, %s: %d new connections, %d failed", name, len(shots), failed)
	}

	// The front restarts; its sockets stay held. A connection made meanwhile waits in
	// the held socket's queue until the next run accepts it: on a loaded machine the stop
	// (open connections finish) and the start (exec, configuration, the state file) take
	// seconds, so these clients give a connection 20 s, and any failure (a refusal, a
	// reset, or no answer in 20 s) counts.
	patient := startPatientLoad(addr, "db.example.org", ff.ca.pool, 20*time.Millisecond)
	defer patient.stop()
	time.Sleep(200 * time.Millisecond)
	restart := time.Now()
	ff.front.p.Stop(5 * time.Second)
	ff.front.p.MustStart(t)
	started := time.Now()
	waitFor(t, "the restarted front routes", routeTimeout, func() error {
		for _, s := range patient.between(started, time.Now()) {
			if s.from == "db@n2" {
				return nil
			}
		}
		return errors.New("not yet")
	})
	time.Sleep(time.Second)
	patient.stop()
	shots := patient.between(restart, time.Now())
	failed, first := failures(shots)
	var slowest time.Duration
	for _, s := range shots {
		slowest = max(slowest, s.took)
	}
	if failed > 0 {
		t.Errorf("front restart, TCP: %d of %d new connections failed (first: %s)", failed, len(shots), first)
	}
	qshots := qload.between(restart, time.Now())
	qfailed, qfirst := failures(qshots)
	t.Logf("front restart (stop and start took %s): TCP %d new connections, %d failed, the slowest answered in %s; QUIC %d new connections, %d failed (first: %s)",
		ms(started.Sub(restart)), len(shots), failed, ms(slowest), len(qshots), qfailed, qfirst)
}

// startPatientLoad is startConnLoad with 20 s for each connection and its answer, each
// connection in its own goroutine (a queued one does not hold the next back).
func startPatientLoad(addr, host string, roots *x509.CertPool, every time.Duration) *dialLoad {
	return startDialLoad(every, func() (string, error) {
		d := &net.Dialer{Timeout: 20 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: host, RootCAs: roots})
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		line, err := bufio.NewReader(c).ReadBytes('\n')
		if err != nil {
			return "", err
		}
		var rep tlsReply
		err = json.Unmarshal(line, &rep)
		return rep.Name, err
	})
}

// TestTheFrontGivesACaddyFleetPassthrough: a Caddy on the shipped Caddyfile, its HTTPS
// server given the proxy_protocol listener wrapper (allowing the front's address), behind
// the front. A passthrough name reaches the application's own TLS through the front
// (Caddy alone refuses it: TestCaddyNeverServesAPassthroughHost), and HTTPS for an HTTP
// application goes through the front to Caddy, which reads the PROXY header, obtains the
// name's certificate from Pebble on demand and serves it.
func TestTheFrontGivesACaddyFleetPassthrough(t *testing.T) {
	f := startFleet(t, 1, nodeOptions{args: ownPorts()})
	n1 := f.nodes[0]
	f.deploy(t, "site", "acme", []*node{n1}, "/healthz")
	const site = "tls.example.org"
	n1.claim(t, "site", site)
	ca := newTestCA(t)
	cert := ca.leaf(t, "db.example.org")
	log := &helloLog{}
	n1.call(t, http.MethodPut, "/v1/apps/db", map[string]any{"account": "acme", "placement": []string{"n1"}, "passthrough": true}, nil)
	n1.claim(t, "db", "db.example.org")
	port := n1.allocatePort(t, "db")
	startTLSApp(t, "db@n1", hostPort(n1.ip, port), map[string]*tls.Certificate{"db.example.org": &cert}, false, log)
	n1.setInstance(t, "db", port, true)
	waitFor(t, "n1 routes db", routeTimeout, func() error { return n1.hasUpstreams("db", 1) })

	web := freePort(t, "127.0.0.1")
	peb := pebbletest.Start(t, pebbletest.Config{HTTPPort: web})
	cd := startCaddyForPebble(t, "caddy-behind-front", web, []*node{n1}, peb, site, "site@n1", func(cfg map[string]any, websecure int) {
		servers := cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)
		wrapped := 0
		for _, s := range servers {
			sm := s.(map[string]any)
			for _, l := range sm["listen"].([]any) {
				if strings.HasSuffix(l.(string), ":"+strconv.Itoa(websecure)) {
					sm["listener_wrappers"] = []any{
						map[string]any{"wrapper": "proxy_protocol", "allow": []string{"127.0.0.1/32"}},
						map[string]any{"wrapper": "tls"},
					}
					wrapped++
				}
			}
		}
		if wrapped != 1 {
			t.Fatalf("wrapped %d servers on :%d, want Caddy's HTTPS server", wrapped, websecure)
		}
	})
	fr := startFront(t, n1, hostPort("127.0.0.1", cd.ports.websecure))
	waitFor(t, "db through the front", routeTimeout, func() error {
		rep, c, err := dialTLS(fr.tcp, "db.example.org", nil, ca.pool)
		if err != nil {
			return err
		}
		c.Close()
		if rep.Name != "db@n1" || rep.SNI != "db.example.org" {
			return fmt.Errorf("reply %+v", rep)
		}
		return nil
	})
	// HTTPS for site: through the front to Caddy, which must read the PROXY header
	// before its TLS; the handshake waits for Pebble's order.
	roots := peb.IssuerRoot(t)
	hc := &http.Client{Timeout: 150 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: site, RootCAs: roots}}}
	req, _ := http.NewRequest(http.MethodGet, "https://"+fr.tcp+"/", nil)
	req.Host = site
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("HTTPS %s through the front to Caddy: %v\n%s", site, err, cd.proc.Output())
	}
	r, _ := readResponse(resp)
	resp.Body.Close()
	if r.from() != "site@n1" {
		t.Fatalf("HTTPS %s through the front: served by %s", site, r.from())
	}
	if hs := log.list(); len(hs) != 1 {
		t.Fatalf("the passthrough application saw %q, want the one connection to db.example.org", hs)
	}
}
