package front

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The TCP tests' parts, all on loopback in the test's process: a real crypto/tls
// application hosting two names (tlsUpstream), a fake fallback that parses the PROXY v2
// header and records what follows (fallbackRecorder), the front between them
// (startFront), and ClientHellos crafted from Go's own with any server_name extension.

const (
	nameDB = "db.example.org"
	nameKV = "kv.services.example.org" // holds a k, an s and an i for U+212A, U+017F, U+0130
)

// testPKI is a CA and the leaf certificates of the application's names.
type testPKI struct {
	roots *x509.CertPool
	certs map[string]*tls.Certificate
}

func newTestPKI(t testing.TB, names ...string) *testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "front test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := &testPKI{roots: x509.NewCertPool(), certs: map[string]*tls.Certificate{}}
	p.roots.AddCert(ca)
	for i, n := range names {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: n}, DNSNames: []string{n},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		p.certs[n] = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	return p
}

// tlsUpstream is an application that terminates its own TLS for its names (an exact
// lookup after an ASCII case fold, as docs/passthrough.md asks of one), optionally
// behind a PROXY v2 header, and answers every session with one line: the server name
// and ALPN it received and the PROXY source ("-" without one).
type tlsUpstream struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	names    []string // server names of the ClientHellos it saw
}

func startTLSUpstream(t testing.TB, pki *testPKI, proxy bool) *tlsUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &tlsUpstream{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.accepted.Add(1)
			go u.handle(c, pki, proxy)
		}
	}()
	return u
}

// tlsApp is an application for nameDB and nameKV (no PROXY header), and a fallback.
func tlsApp(t testing.TB) (*testPKI, *tlsUpstream, *fallbackRecorder) {
	pki := newTestPKI(t, nameDB, nameKV)
	return pki, startTLSUpstream(t, pki, false), startFallback(t)
}

func (u *tlsUpstream) addr() string { return u.ln.Addr().String() }

func (u *tlsUpstream) seen() (accepted int64, names []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.accepted.Load(), append([]string(nil), u.names...)
}

func (u *tlsUpstream) handle(c net.Conn, pki *testPKI, proxy bool) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	src := "-"
	var conn net.Conn = c
	if proxy {
		br := bufio.NewReader(c)
		h, err := readProxyV2(br)
		if err != nil {
			return
		}
		src = h.src.String()
		conn = &readerConn{Conn: c, r: br}
	}
	tc := tls.Server(conn, &tls.Config{
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			u.mu.Lock()
			u.names = append(u.names, h.ServerName)
			u.mu.Unlock()
			if c, ok := pki.certs[asciiLower(h.ServerName)]; ok {
				return c, nil
			}
			return nil, fmt.Errorf("no certificate for %q", h.ServerName)
		},
	})
	if err := tc.Handshake(); err != nil {
		return
	}
	st := tc.ConnectionState()
	fmt.Fprintf(tc, "%s %s %s\n", st.ServerName, st.NegotiatedProtocol, src)
	// Echo what follows, so a test can exchange data after the handshake.
	_, _ = io.Copy(tc, tc)
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// proxyV2 is a parsed PROXY v2 header.
type proxyV2 struct {
	command, family byte
	src, dst        *net.TCPAddr
}

// readProxyV2 parses a PROXY v2 header off r by the spec (haproxy proxy-protocol.txt
// §2.2), independently of appendProxyV2.
func readProxyV2(r io.Reader) (proxyV2, error) {
	var hdr [16]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return proxyV2{}, err
	}
	if !bytes.Equal(hdr[:12], []byte("\r\n\r\n\x00\r\nQUIT\n")) {
		return proxyV2{}, fmt.Errorf("no PROXY v2 signature: % x", hdr[:12])
	}
	h := proxyV2{command: hdr[12], family: hdr[13]}
	if h.command>>4 != 2 {
		return h, fmt.Errorf("version %d", h.command>>4)
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[14:16]))
	if _, err := io.ReadFull(r, body); err != nil {
		return h, err
	}
	switch h.family {
	case 0x11:
		if len(body) < 12 {
			return h, errors.New("short IPv4 block")
		}
		h.src = &net.TCPAddr{IP: net.IP(body[0:4]), Port: int(binary.BigEndian.Uint16(body[8:10]))}
		h.dst = &net.TCPAddr{IP: net.IP(body[4:8]), Port: int(binary.BigEndian.Uint16(body[10:12]))}
	case 0x21:
		if len(body) < 36 {
			return h, errors.New("short IPv6 block")
		}
		h.src = &net.TCPAddr{IP: net.IP(body[0:16]), Port: int(binary.BigEndian.Uint16(body[32:34]))}
		h.dst = &net.TCPAddr{IP: net.IP(body[16:32]), Port: int(binary.BigEndian.Uint16(body[34:36]))}
	default:
		return h, fmt.Errorf("family %#x", h.family)
	}
	return h, nil
}

// fallbackRecorder stands for Traefik's entry point: it reads the PROXY v2 header, then
// every byte until the front half-closes, and reports one fallbackConn per connection.
type fallbackRecorder struct {
	ln    net.Listener
	conns chan fallbackConn
}

type fallbackConn struct {
	header proxyV2
	bytes  []byte
	err    error
}

func startFallback(t testing.TB) *fallbackRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fallbackRecorder{ln: ln, conns: make(chan fallbackConn, 1024)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				h, err := readProxyV2(br)
				var b []byte
				if err == nil {
					b, err = io.ReadAll(br)
				}
				f.conns <- fallbackConn{header: h, bytes: b, err: err}
			}()
		}
	}()
	return f
}

func (f *fallbackRecorder) addr() string { return f.ln.Addr().String() }

// next waits for the fallback's next connection.
func (f *fallbackRecorder) next(t testing.TB) fallbackConn {
	t.Helper()
	select {
	case c := <-f.conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection reached the fallback")
		return fallbackConn{}
	}
}

// startFront serves a TCPProxy with routes on a loopback listener, wrapped by wrap
// when not nil.
func startFront(t testing.TB, cfg TCPConfig, routes []Route, wrap func(net.Listener) net.Listener) (*TCPProxy, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	return serveTCP(t, ln, cfg, routes), ln.Addr().String()
}

// serveTCP serves a TCPProxy with routes on ln; Close at cleanup, and Serve must then
// have returned nil.
func serveTCP(t testing.TB, ln net.Listener, cfg TCPConfig, routes []Route) *TCPProxy {
	t.Helper()
	table := NewTable(routes)
	p := NewTCPProxy(cfg, func() *Table { return table }, nil)
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return p
}

// tlsReply is what a session through the front got from the application.
type tlsReply struct {
	serverName, alpn, proxySrc string
}

// dialTLS makes a verified TLS session with serverName through addr and reads the
// application's line.
func dialTLS(addr, serverName string, roots *x509.CertPool, wrap func(net.Conn) net.Conn) (tlsReply, *tls.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return tlsReply{}, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var conn net.Conn = c
	if wrap != nil {
		conn = wrap(c)
	}
	tc := tls.Client(conn, &tls.Config{ServerName: serverName, RootCAs: roots, NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil {
		c.Close()
		return tlsReply{}, nil, err
	}
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil {
		c.Close()
		return tlsReply{}, nil, fmt.Errorf("reading the application's line: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != 3 {
		c.Close()
		return tlsReply{}, nil, fmt.Errorf("application line %q", line)
	}
	return tlsReply{f[0], f[1], f[2]}, tc, nil
}

// goHello is Go's TLS client's ClientHello message (handshake header included) with
// its server_name extension replaced by a list of names, byte for byte as given (no
// names: no extension at all).
func goHello(t testing.TB, names ...[]byte) []byte {
	t.Helper()
	msg := clientHello(t, &tls.Config{ServerName: "placeholder.invalid", NextProtos: []string{"h2"}})
	return withServerNames(t, msg, names)
}

// withServerNames rewrites msg's server_name extension (RFC 6066 §3) to list names.
func withServerNames(t testing.TB, msg []byte, names [][]byte) []byte {
	t.Helper()
	// type(1) len(3) version(2) random(32) session_id<1> cipher_suites<2> compression<1> extensions<2>
	p := 4 + 2 + 32
	p += 1 + int(msg[p])
	p += 2 + int(binary.BigEndian.Uint16(msg[p:]))
	p += 1 + int(msg[p])
	extStart := p + 2
	extEnd := extStart + int(binary.BigEndian.Uint16(msg[p:]))
	if extEnd != len(msg) {
		t.Fatalf("ClientHello layout: extensions end at %d of %d", extEnd, len(msg))
	}
	var exts []byte
	for q := extStart; q < extEnd; {
		typ := binary.BigEndian.Uint16(msg[q:])
		n := int(binary.BigEndian.Uint16(msg[q+2:]))
		if typ != 0 { // not server_name: kept
			exts = append(exts, msg[q:q+4+n]...)
		}
		q += 4 + n
	}
	if len(names) > 0 {
		var list []byte
		for _, n := range names {
			list = append(list, 0) // host_name
			list = binary.BigEndian.AppendUint16(list, uint16(len(n)))
			list = append(list, n...)
		}
		ext := binary.BigEndian.AppendUint16([]byte{0, 0}, uint16(2+len(list)))
		ext = binary.BigEndian.AppendUint16(ext, uint16(len(list)))
		exts = append(ext, append(list, exts...)...)
	}
	body := append([]byte(nil), msg[4:p]...)
	body = binary.BigEndian.AppendUint16(body, uint16(len(exts)))
	body = append(body, exts...)
	out := []byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	return append(out, body...)
}

// records wraps a handshake message in TLS records of content type 22, the message cut
// into fragments of the given sizes, the rest in records of at most 2^14 bytes.
func records(msg []byte, sizes ...int) []byte {
	var out []byte
	for i := 0; len(msg) > 0 || i == 0; i++ {
		n := maxRecordPlaintext
		if i < len(sizes) {
			n = sizes[i]
		}
		n = min(n, len(msg), maxRecordPlaintext)
		out = append(out, 22, 3, 1, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// sendRaw opens a connection to addr, writes b, half-closes and returns the connection
// (the caller reads its end).
func sendRaw(t testing.TB, addr string, b []byte) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	tc := c.(*net.TCPConn)
	if err := tc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	return tc
}

// boundSocket is a TCP socket bound to a loopback port (no one else can take the port
// while the test runs), and its address.
func boundSocket(t testing.TB) (int, string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// refusedAddr is a loopback port bound by a socket that does not listen: a SYN to it
// is answered by a reset (a refusal).
func refusedAddr(t testing.TB) string {
	_, addr := boundSocket(t)
	return addr
}

// silentAddr is a loopback listener that never answers a SYN: it listens with a backlog
// of 0 and one connection fills its accept queue, so Linux drops every further SYN
// (tcp_conn_request: the accept queue is full). A dial to it times out, as one to a
// node that stopped answering does.
func silentAddr(t testing.TB) string {
	t.Helper()
	fd, addr := boundSocket(t)
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	filler, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("filling the accept queue of %s: %v", addr, err)
	}
	t.Cleanup(func() { filler.Close() })
	// The queue is full: a further SYN is dropped (checked, so a kernel that behaves
	// otherwise fails here rather than in the test that relies on it).
	if c, err := net.DialTimeout("tcp", addr, 50*time.Millisecond); err == nil {
		c.Close()
		t.Skipf("this kernel answers a SYN to a full accept queue: no silent loopback address")
	}
	return addr
}

// readsListener wraps a listener so that every Read of an accepted connection reports
// the bytes it returned on reads: a test writing a ClientHello in pieces waits for the
// front to have read one before it writes the next, so the pieces reach the front in
// separate reads (separate segments, by construction, not by timing).
type readsListener struct {
	net.Listener
	reads chan int
}

func (l *readsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &readsConn{Conn: c, reads: l.reads}, nil
}

type readsConn struct {
	net.Conn
	reads chan int
}

func (c *readsConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		select {
		case c.reads <- n: // the test drains the reads it waits for; later ones may go unreported
		default:
		}
	}
	return n, err
}
