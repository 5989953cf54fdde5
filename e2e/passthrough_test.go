package e2e

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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// Applications that terminate TLS themselves (issue 37, docs/passthrough.md): a real
// TLS server behind a real Traefik, through the HTTP provider and the provider plugin.

// passthroughArgs are the node flags of the passthrough scenarios: every router on the
// websecure entry point, where the TCP routers go beside the HTTP ones.
var passthroughArgs = []string{"--traefik.entryPoints=websecure"}

// testCA is a certificate authority of the test's own: the applications' certificates
// are signed by it, and the clients trust it alone, so a handshake that verifies was
// answered by the application, never by Traefik (whose default certificate is
// self-signed).
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "scafo e2e passthrough CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// leaf issues a certificate for exactly name.
func (ca *testCA) leaf(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsReply is what tlsApp answers once a handshake completes: who it is, the server
// name and ALPN protocol it got, and the client address a PROXY v2 header carried.
type tlsReply struct {
	Name  string `json:"name"`
	SNI   string `json:"sni"`
	ALPN  string `json:"alpn"`
	Proxy string `json:"proxy,omitempty"`
}

// tlsApp is an application that terminates TLS itself, with the rules of issue 37:
// the server name selects a certificate by exact canonical name (ASCII case folded,
// nothing else rewritten), and there is no default: any other name fails the
// handshake. It counts every connection it accepts and records every ClientHello's
// server name, so a test can tell whether a connection reached it at all. After a
// handshake it writes one JSON line (tlsReply), then echoes what it reads.
type tlsApp struct {
	name  string
	certs map[string]*tls.Certificate // exact names
	proxy bool                        // expects a PROXY protocol v2 header

	log *helloLog // shared by the instances of one test, in arrival order

	l       net.Listener
	conns   atomic.Int64
	mu      sync.Mutex
	hellos  []string
	open    map[net.Conn]bool
	stopped bool
}

// helloLog lists "<instance> <server name>" of every ClientHello any instance of a test
// saw, in arrival order.
type helloLog struct {
	mu  sync.Mutex
	all []string
}

func (h *helloLog) add(s string) {
	h.mu.Lock()
	h.all = append(h.all, s)
	h.mu.Unlock()
}

func (h *helloLog) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.all...)
}

func startTLSApp(t *testing.T, name, addr string, certs map[string]*tls.Certificate, proxy bool, log *helloLog) *tlsApp {
	t.Helper()
	var l net.Listener
	if err := poll(5*time.Second, 50*time.Millisecond, func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("tls app %s: %v", name, err)
	}
	a := &tlsApp{name: name, certs: certs, proxy: proxy, log: log, l: l, open: map[net.Conn]bool{}}
	go a.serve()
	t.Cleanup(a.stop)
	return a
}

func (a *tlsApp) port() int { return a.l.Addr().(*net.TCPAddr).Port }

// stop closes the listener and every open connection, as a dying process does.
func (a *tlsApp) stop() {
	a.mu.Lock()
	a.stopped = true
	conns := a.open
	a.open = map[net.Conn]bool{}
	a.mu.Unlock()
	_ = a.l.Close()
	for c := range conns {
		_ = c.Close()
	}
}

// closeListener stops accepting and leaves the open connections alone: a release
// draining after a deploy.
func (a *tlsApp) closeListener() { _ = a.l.Close() }

func (a *tlsApp) seen() (conns int, hellos []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int(a.conns.Load()), append([]string(nil), a.hellos...)
}

func (a *tlsApp) serve() {
	for {
		c, err := a.l.Accept()
		if err != nil {
			return
		}
		a.conns.Add(1)
		a.mu.Lock()
		if a.stopped {
			a.mu.Unlock()
			_ = c.Close()
			continue
		}
		a.open[c] = true
		a.mu.Unlock()
		go a.handle(c)
	}
}

func (a *tlsApp) handle(c net.Conn) {
	defer func() {
		_ = c.Close()
		a.mu.Lock()
		delete(a.open, c)
		a.mu.Unlock()
	}()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(c)
	var proxySrc string
	if a.proxy {
		src, err := readProxyV2(rd)
		if err != nil {
			return
		}
		proxySrc = src
	}
	cfg := &tls.Config{
		NextProtos: []string{"x-scafo", "h2", "http/1.1"},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			a.mu.Lock()
			a.hellos = append(a.hellos, h.ServerName)
			a.mu.Unlock()
			if a.log != nil {
				a.log.add(fmt.Sprintf("%s %q", a.name, h.ServerName))
			}
			return nil, nil
		},
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if cert := a.certs[asciiLower(h.ServerName)]; cert != nil {
				return cert, nil
			}
			return nil, fmt.Errorf("no certificate for %q (exact names only, no default)", h.ServerName)
		},
	}
	tc := tls.Server(&bufConn{Conn: c, r: rd}, cfg)
	if err := tc.Handshake(); err != nil {
		return
	}
	st := tc.ConnectionState()
	b, _ := json.Marshal(tlsReply{Name: a.name, SNI: st.ServerName, ALPN: st.NegotiatedProtocol, Proxy: proxySrc})
	if _, err := tc.Write(append(b, '\n')); err != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	_, _ = io.Copy(tc, tc)
}

// asciiLower folds A-Z only: the rule (no Unicode case mapping).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// proxyV2Sig is the PROXY protocol v2 signature.
var proxyV2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")

// readProxyV2 reads a PROXY protocol v2 header and returns its source address.
func readProxyV2(r *bufio.Reader) (string, error) {
	hdr := make([]byte, 16)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return "", err
	}
	if !bytes.Equal(hdr[:12], proxyV2Sig) || hdr[12]>>4 != 2 {
		return "", errors.New("not a PROXY v2 header")
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[14:16]))
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	if hdr[13]>>4 != 1 || len(body) < 12 { // AF_INET
		return "", fmt.Errorf("PROXY v2 family %#x", hdr[13])
	}
	ip := net.IP(body[0:4])
	return fmt.Sprintf("%s:%d", ip, binary.BigEndian.Uint16(body[8:10])), nil
}

// dialTLS opens a verified TLS connection to addr for sni offering alpn, trusting the
// test CA alone, and reads the application's reply.
func dialTLS(addr, sni string, alpn []string, roots *x509.CertPool) (tlsReply, *tls.Conn, error) {
	d := &net.Dialer{Timeout: 3 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: sni, RootCAs: roots, NextProtos: alpn})
	if err != nil {
		return tlsReply{}, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		c.Close()
		return tlsReply{}, nil, fmt.Errorf("reading the reply: %w", err)
	}
	var rep tlsReply
	if err := json.Unmarshal(line, &rep); err != nil {
		c.Close()
		return tlsReply{}, nil, fmt.Errorf("reply %q: %w", line, err)
	}
	if got := c.ConnectionState().NegotiatedProtocol; got != rep.ALPN {
		c.Close()
		return tlsReply{}, nil, fmt.Errorf("client negotiated %q, the application %q", got, rep.ALPN)
	}
	return rep, c, nil
}

// rawSNIConn rewrites the first write (the ClientHello) replacing placeholder with raw:
// how a client sends a server name Go's client would not (a trailing dot, an IP
// literal, a space), byte for byte the same length.
type rawSNIConn struct {
	net.Conn
	placeholder, raw []byte
	done             bool
}

func (c *rawSNIConn) Write(p []byte) (int, error) {
	if !c.done {
		c.done = true
		if i := bytes.Index(p, c.placeholder); i >= 0 {
			q := append([]byte(nil), p...)
			copy(q[i:], c.raw)
			if _, err := c.Conn.Write(q); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}

// oddOutcome is what one odd ClientHello got through Traefik.
type oddOutcome struct {
	handshake bool   // a TLS session was established (with anyone)
	issuer    string // the certificate's issuer when it was
	reply     string // the application's reply line, if any
	err       string
}

// dialRawSNI sends a ClientHello whose server_name is raw exactly ("" sends none),
// offering alpn, verifying nothing, and reports who answered.
func dialRawSNI(addr, raw string, alpn []string) oddOutcome {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return oddOutcome{err: err.Error()}
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	cfg := &tls.Config{InsecureSkipVerify: true, NextProtos: alpn}
	var conn net.Conn = c
	if raw != "" {
		ph := strings.Repeat("q", len(raw))
		cfg.ServerName = ph
		conn = &rawSNIConn{Conn: c, placeholder: []byte(ph), raw: []byte(raw)}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return oddOutcome{err: err.Error()}
	}
	out := oddOutcome{handshake: true}
	if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
		out.issuer = pc[0].Issuer.CommonName
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond)) // an application writes at once; Traefik's TLS waits for a request
	line, _ := bufio.NewReader(tc).ReadString('\n')
	out.reply = strings.TrimSpace(line)
	return out
}

// passthroughFleet is the scenario's fleet: two nodes; acme's HTTP application web on
// n1 holding the wildcard *.example.org; acme's passthrough application db on [n1, n2]
// holding db.example.org and kv.example.org (both under web's wildcard); acme's
// passthrough application mq on n1 with PROXY protocol v2; another account's HTTP
// application evil holding evil.example.net.
type passthroughFleet struct {
	f      *fleet
	ca     *testCA
	web    *deployment
	evil   *deployment
	db     map[string]*tlsApp // by node name
	log    *helloLog
	mq     *tlsApp
	dbCert map[string]*tls.Certificate
}

var dbNames = []string{"db.apps.localhost", "db.example.org", "kv.example.org"}

func startPassthroughFleet(t *testing.T) *passthroughFleet {
	t.Helper()
	f := startFleet(t, 2, nodeOptions{args: passthroughArgs})
	n1, n2 := f.nodes[0], f.nodes[1]
	p := &passthroughFleet{f: f, ca: newTestCA(t), db: map[string]*tlsApp{}, dbCert: map[string]*tls.Certificate{}, log: &helloLog{}}
	p.web = f.deploy(t, "web", "acme", []*node{n1}, "/healthz")
	n1.claim(t, "web", "*.example.org")
	p.evil = f.deploy(t, "evil", "evil", []*node{n1}, "/healthz")
	n1.claim(t, "evil", "evil.example.net")
	for _, n := range dbNames {
		c := p.ca.leaf(t, n)
		p.dbCert[n] = &c
	}
	n1.call(t, http.MethodPut, "/v1/apps/db", map[string]any{"account": "acme", "placement": []string{"n1", "n2"}, "passthrough": true}, nil)
	n1.claim(t, "db", "db.example.org")
	n1.claim(t, "db", "kv.example.org")
	for _, n := range []*node{n1, n2} {
		port := n.allocatePort(t, "db")
		p.db[n.name] = startTLSApp(t, "db@"+n.name, hostPort(n.ip, port), p.dbCert, false, p.log)
		n.setInstance(t, "db", port, true)
	}
	mqCert := p.ca.leaf(t, "mq.apps.localhost")
	n1.call(t, http.MethodPut, "/v1/apps/mq", map[string]any{"account": "acme", "placement": []string{"n1"}, "passthrough": true, "proxyProtocol": 2}, nil)
	port := n1.allocatePort(t, "mq")
	p.mq = startTLSApp(t, "mq@n1", hostPort(n1.ip, port), map[string]*tls.Certificate{"mq.apps.localhost": &mqCert}, true, p.log)
	n1.setInstance(t, "mq", port, true)
	for _, n := range f.nodes {
		waitFor(t, n.name+" routes db on both nodes", routeTimeout, func() error { return n.hasUpstreams("db", 2) })
		waitFor(t, n.name+" routes mq", routeTimeout, func() error { return n.hasUpstreams("mq", 1) })
	}
	return p
}

// passthroughTraefik starts the provider's Traefik polling n1 with n1 preferred.
func (p *passthroughFleet) traefik(t *testing.T, provider string) *traefik {
	t.Helper()
	n1 := p.f.nodes[0]
	if provider == "plugin" {
		return startPluginTraefik(t, "traefik-plugin", pluginTraefikOptions{endpoints: []*node{n1}, prefer: "n1"})
	}
	return startTraefik(t, "traefik", traefikOptions{node: n1})
}

// hellos lists the server names of every ClientHello any passthrough instance saw: a
// connection Traefik forwards always starts with one (it forwards after reading it),
// while the nodes' TCP-connect probes send none, so this counts what reached an
// application and nothing else.
func (p *passthroughFleet) hellos() []string { return p.log.list() }

// TestPassthroughRoutesExactServerNamesToTheApplicationsOwnTLS is scenario 27.
func TestPassthroughRoutesExactServerNamesToTheApplicationsOwnTLS(t *testing.T) {
	for _, provider := range []string{"http", "plugin"} {
		t.Run(provider, func(t *testing.T) { testPassthroughRouting(t, provider) })
	}
}

func testPassthroughRouting(t *testing.T, provider string) {
	p := startPassthroughFleet(t)
	tr := p.traefik(t, provider)
	addr := tr.secureAddr()
	alpn := []string{"x-scafo", "h2"}
	waitFor(t, "db through Traefik", routeTimeout, func() error {
		_, c, err := dialTLS(addr, "db.apps.localhost", alpn, p.ca.pool)
		if err == nil {
			c.Close()
		}
		return err
	})

	// Each exact name: the client verifies the application's own certificate for that
	// name (the test CA alone is trusted), and the application got the server name and
	// the ALPN offer unchanged. ASCII case is folded on the way (Traefik lowercases for
	// its match; the application folds for its lookup) and the name arrives as sent.
	for _, sni := range append(dbNames, "DB.Apps.LocalHost", "DB.EXAMPLE.ORG") {
		rep, c, err := dialTLS(addr, sni, alpn, p.ca.pool)
		if err != nil {
			t.Fatalf("%s: %v", sni, err)
		}
		c.Close()
		if rep.Name != "db@n1" || rep.SNI != sni || rep.ALPN != "x-scafo" {
			t.Fatalf("%s: reply %+v, want db@n1 with the server name as sent and ALPN x-scafo", sni, rep)
		}
	}
	// PROXY protocol v2 on mq carries the client's own address; db gets none (its
	// first bytes are the ClientHello, or its handshake would have failed above).
	rep, c, err := dialTLS(addr, "mq.apps.localhost", alpn, p.ca.pool)
	if err != nil {
		t.Fatalf("mq: %v", err)
	}
	if local := c.LocalAddr().String(); rep.Proxy != local {
		t.Fatalf("mq saw PROXY source %q, want the client's %s", rep.Proxy, local)
	}
	c.Close()

	// Odd spellings: none reaches any passthrough instance.
	never := []struct{ name, raw string }{
		{"trailing dot", "db.apps.localhost."},
		{"port", "db.apps.localhost:443"},
		{"Unicode (U+00E4)", "db.\u00e4pps.localhost"},
		{"Unicode (Cyrillic a)", "db.\u0430pps.localhost"},
		{"IPv4 literal", "127.0.0.1"},
		{"IPv6 literal", "::1"},
		{"no server name", ""},
		{"wildcard", "*.example.org"},
		{"wildcard of a platform domain", "*.apps.localhost"},
		{"unknown name", "nope.apps.localhost"},
		{"a name below an exact one", "a.db.example.org"},
		{"another account's custom domain", "evil.example.net"},
		{"a name only web's wildcard covers", "other.example.org"},
		{"the HTTP application's name", "web.apps.localhost"},
		{"trailing dot and upper case", "DB.example.org."},
		{"percent-encoded", "db%2Eexample.org"},
		{"two trailing dots", "db.example.org.."},
		{"leading dot", ".db.example.org"},
		{"NUL at the end", "db.example.org\x00"},
		{"NUL inside", "db\x00.example.org"},
		{"an A-label of another name", "xn--db-8ka.example.org"},
		{"a Unicode upper case that lowercases to non-ASCII (U+0130)", "\u0130db.example.org"},
	}
	for _, tc := range never {
		before := len(p.hellos())
		out := dialRawSNI(addr, tc.raw, alpn)
		if hellos := p.hellos(); len(hellos) != before {
			t.Errorf("%s (%q) reached a passthrough instance (server names %q); outcome %+v", tc.name, tc.raw, hellos[before:], out)
		}
		if out.handshake && out.issuer == p.ca.cert.Subject.CommonName {
			t.Errorf("%s (%q): a session with an application's certificate: %+v", tc.name, tc.raw, out)
		}
		t.Logf("%-36s %-28q handshake=%v issuer=%q err=%q", tc.name, tc.raw, out.handshake, out.issuer, out.err)
	}
	// The exact name with ALPN acme-tls/1 reaches the application: no certificate
	// resolver of the shipped file uses the TLS-ALPN challenge, so Traefik passes
	// acme-tls/1 to the routers (pkg/server/routerfactory.go: allowACMEByPass ||
	// !handlesTLSChallenge), and an application can answer its own TLS-ALPN-01 (ours
	// offers no acme-tls/1: no application protocol).
	before := len(p.hellos())
	out := dialRawSNI(addr, "db.example.org", []string{"acme-tls/1"})
	if hellos := p.hellos(); len(hellos) != before+1 || !strings.HasSuffix(hellos[before], `"db.example.org"`) {
		t.Errorf("acme-tls/1 for db.example.org: server names seen %q, want the application's one; %+v", hellos[before:], out)
	}
	// What Traefik folds beyond ASCII case (NewConnData: strings.TrimSpace and
	// strings.ToLower, Unicode's): these reach the application (measured: every run so
	// far), whose own exact lookup must refuse them; ours does, so no session is ever
	// established for them. No HostSNI rule can tell them apart: Traefik matches the
	// folded name. docs/passthrough.md.
	for _, tc := range []struct{ name, raw string }{
		{"leading space", " db.example.org"},
		{"trailing tab", "db.example.org\t"},
		{"leading no-break space (U+00A0)", "\u00a0db.example.org"},
		{"Kelvin sign (U+212A lowercases to k)", "\u212av.example.org"},
		// Only through v3.7, whose HostSNI compares with strings.EqualFold (U+017F
		// folds onto s); v3.6.12 routes it nowhere. render's sniCase asserts both.
		{"long s (U+017F, v3.7 folds it to s)", "db.app\u017f.localhost"},
	} {
		before := len(p.hellos())
		out := dialRawSNI(addr, tc.raw, alpn)
		hellos := p.hellos()
		if out.handshake && out.issuer == p.ca.cert.Subject.CommonName {
			t.Errorf("%s (%q): a session with an application's certificate: %+v", tc.name, tc.raw, out)
		}
		t.Logf("Traefik folds %-30s %q: reached an application %v (server names %q), session %v, err %q", tc.name, tc.raw, len(hellos) != before, hellos[before:], out.handshake, out.err)
	}

	// HTTP on the same port keeps working, and never routes a passthrough host: not
	// even web's wildcard, which covers db.example.org, takes it.
	sec := &traefik{name: tr.name, ports: traefikPorts{web: tr.ports.websecure}, http: tr.http}
	sec.expectServedBy(t, "web.apps.localhost", "/", "web@n1")
	sec.expectServedBy(t, "a.example.org", "/", "web@n1")
	sec.expectServedBy(t, "evil.example.net", "/", "evil@n1")
	for _, h := range []string{"db.example.org", "DB.example.org", "db.example.org.", "db.apps.localhost", "kv.example.org:443", "mq.apps.localhost"} {
		sec.expectTraefik404(t, h, "/")
		tr.expectTraefik404(t, h, "/") // and on web
	}
	prov := "http"
	if provider == "plugin" {
		tr.requireProviderClean(t, pluginProvider)
		prov = pluginProvider
	} else {
		tr.requireProviderClean(t, "http")
	}
	tr.requireTCPClean(t, prov, 4, 2) // db.apps.localhost, db.example.org, kv.example.org, mq.apps.localhost; db and mq
}

// requireTCPClean asserts that Traefik holds routers TCP routers and services TCP
// services from provider, every one enabled and without an error.
func (tr *traefik) requireTCPClean(t *testing.T, provider string, routers, services int) {
	t.Helper()
	rd, err := tr.rawData()
	if err != nil {
		t.Fatal(err)
	}
	nr, ns := 0, 0
	for name, r := range rd.TCPRouters {
		if strings.HasSuffix(name, "@"+provider) {
			nr++
			if r.Status != "enabled" || len(r.Err) > 0 {
				t.Errorf("TCP router %s: %s %v", name, r.Status, r.Err)
			}
		}
	}
	for name, s := range rd.TCPServices {
		if strings.HasSuffix(name, "@"+provider) {
			ns++
			if s.Status != "enabled" || len(s.Err) > 0 {
				t.Errorf("TCP service %s: %s %v", name, s.Status, s.Err)
			}
		}
	}
	if nr != routers || ns != services {
		t.Errorf("%d TCP routers and %d TCP services from %s, want %d and %d", nr, ns, provider, routers, services)
	}
}

// connShot is one new connection of the passthrough load: when it was opened, which
// instance answered ("" when it failed), and the error.
type connShot struct {
	at   time.Time
	took time.Duration
	from string
	err  string
}

// shotLog is the connections a load opened, in the order they ended.
type shotLog struct {
	mu    sync.Mutex
	shots []connShot
}

func (l *shotLog) add(s connShot) {
	l.mu.Lock()
	l.shots = append(l.shots, s)
	l.mu.Unlock()
}

// between returns the shots opened in [from, to).
func (l *shotLog) between(from, to time.Time) []connShot {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []connShot
	for _, s := range l.shots {
		if !s.at.Before(from) && s.at.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// startConnLoad opens a new verified TLS connection to host through addr every interval,
// one at a time, reads the application's reply and closes it.
func startConnLoad(addr, host string, roots *x509.CertPool, every time.Duration) *dialLoad {
	l := &dialLoad{}
	l.stop = repeat(nil, every, func() {
		s := connShot{at: time.Now()}
		rep, c, err := dialTLS(addr, host, []string{"x-scafo"}, roots)
		s.took, s.from = time.Since(s.at), rep.Name
		if err != nil {
			s.err = err.Error()
		} else {
			c.Close()
		}
		l.add(s)
	})
	return l
}

// TestPassthroughDeploysAndDeathsCountedThroughTraefik is scenario 28: db (passthrough)
// on [n1, n2], Traefik preferring n1, a new verified connection every 20 ms. A deploy
// across n1's port pair with ?wait=applied fails no new connection and sends every new
// connection opened after the answer to the new release; a connection open on the old
// release keeps working until that release exits, then closes. An instance death costs
// the new connections opened until the node's probe takes the instance out of the
// document and Traefik applies it: counted and timed for each provider (there is no
// TCP failover in Traefik v3.6; docs/passthrough.md).
func TestPassthroughDeploysAndDeathsCountedThroughTraefik(t *testing.T) {
	for _, provider := range []string{"http", "plugin"} {
		t.Run(provider, func(t *testing.T) { testPassthroughDeployAndDeath(t, provider) })
	}
}

func testPassthroughDeployAndDeath(t *testing.T, provider string) {
	f := startFleet(t, 2, nodeOptions{args: passthroughArgs})
	n1, n2 := f.nodes[0], f.nodes[1]
	p := &passthroughFleet{f: f, ca: newTestCA(t), db: map[string]*tlsApp{}, dbCert: map[string]*tls.Certificate{}, log: &helloLog{}}
	c := p.ca.leaf(t, "db.apps.localhost")
	p.dbCert["db.apps.localhost"] = &c
	n1.call(t, http.MethodPut, "/v1/apps/db", map[string]any{"account": "acme", "placement": []string{"n1", "n2"}, "passthrough": true}, nil)
	port, pair := n1.instancePair(t, "db")
	r1 := startTLSApp(t, "db@n1", hostPort(n1.ip, port), p.dbCert, false, p.log)
	n1.setInstance(t, "db", port, true)
	port2 := n2.allocatePort(t, "db")
	p.db["n2"] = startTLSApp(t, "db@n2", hostPort(n2.ip, port2), p.dbCert, false, p.log)
	n2.setInstance(t, "db", port2, true)
	for _, n := range f.nodes {
		waitFor(t, n.name+" routes db on both nodes", routeTimeout, func() error { return n.hasUpstreams("db", 2) })
	}
	tr := p.traefik(t, provider)
	addr := tr.secureAddr()
	waitFor(t, "db@n1 through Traefik", routeTimeout, func() error {
		rep, c, err := dialTLS(addr, "db.apps.localhost", nil, p.ca.pool)
		if err != nil {
			return err
		}
		c.Close()
		if rep.Name != "db@n1" {
			return fmt.Errorf("answered by %s", rep.Name)
		}
		return nil
	})

	const every = 20 * time.Millisecond
	load := startConnLoad(addr, "db.apps.localhost", p.ca.pool, every)
	defer load.stop()
	time.Sleep(500 * time.Millisecond)

	// A deploy across the pair: the new release on the other port, then the move.
	_, old, err := dialTLS(addr, "db.apps.localhost", nil, p.ca.pool)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	next := pair[0]
	if port == pair[0] {
		next = pair[1]
	}
	r2 := startTLSApp(t, "db@n1-r2", hostPort(n1.ip, next), p.dbCert, false, p.log)
	t0 := time.Now()
	took := n1.moveAndWait(t, "db", next)
	applied := time.Now()
	time.Sleep(time.Second)
	// The old release drains: its open connection still answers...
	_ = old.SetDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(old)
	if _, err := old.Write([]byte("still here\n")); err != nil {
		t.Fatalf("the connection open on the old release failed after the deploy: %v", err)
	}
	if line, err := rd.ReadString('\n'); err != nil || line != "still here\n" {
		t.Fatalf("the old release's open connection: %q %v", line, err)
	}
	// ...until the release exits.
	r1.stop()
	if _, err := rd.ReadString('\n'); err == nil {
		t.Fatal("the old release exited and its connection stayed open")
	}
	deploy := load.between(t0.Add(-500*time.Millisecond), time.Now())
	var failed, lateOld int
	for _, s := range deploy {
		if s.err != "" {
			failed++
			t.Logf("deploy: failed new connection at %s: %s", s.at.Sub(t0), s.err)
		}
		if s.from == "db@n1" && !s.at.Before(applied) {
			lateOld++
		}
	}
	if failed > 0 || lateOld > 0 {
		t.Errorf("deploy: %d of %d new connections failed, %d opened after wait=applied answered reached the old release", failed, len(deploy), lateOld)
	}
	t.Logf("%s deploy: wait=applied answered in %s; %d new connections across it, %d failed, %d reached the old release after the answer", provider, ms(took), len(deploy), failed, lateOld)

	// A death: the primary (the new release) dies; its node's probe takes it out.
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	r2.stop()
	var recovered time.Time
	waitFor(t, "new connections reach db@n2 after the death", routeTimeout, func() error {
		for _, s := range load.between(killed, time.Now()) {
			if s.from == "db@n2" {
				recovered = s.at
				return nil
			}
		}
		return errors.New("not yet")
	})
	time.Sleep(time.Second)
	var lost, after int
	for _, s := range load.between(killed, time.Now()) {
		if s.err != "" {
			lost++
			if s.at.After(recovered) {
				after++
			}
		}
	}
	if after > 0 {
		t.Errorf("death: %d new connections failed after the first one reached db@n2", after)
	}
	t.Logf("%s death: %d new connections failed (one every %s), the first reached db@n2 %s after the kill", provider, lost, every, ms(recovered.Sub(killed)))
}

// TestHTTP3OnTheEntryPointLeavesPassthroughHostsOnTCP is scenario 29: HTTP/3 turned on
// on websecure (not in the shipped file; an operator's choice) changes nothing for a
// passthrough host: a TCP client still reaches the application with its own
// certificate, and Traefik never announces HTTP/3 (Alt-Svc) on it, because Traefik
// speaks no HTTP on a passthrough connection: its Alt-Svc goes only on responses it
// serves itself (pkg/server/server_entrypoint_tcp_http3.go), shown here on its own 404
// for a name that is not passthrough. A client that tries QUIC for a passthrough host
// anyway reaches Traefik's HTTP/3, where no router serves it (traefik#10865):
// docs/passthrough.md.
func TestHTTP3OnTheEntryPointLeavesPassthroughHostsOnTCP(t *testing.T) {
	p := startPassthroughFleet(t)
	tr := startTraefik(t, "traefik-h3", traefikOptions{node: p.f.nodes[0], edit: withHTTP3})
	addr := tr.secureAddr()
	p.dbNamesReachDB(t, addr, "with HTTP/3 on")
	// Traefik's own HTTPS answers carry its Alt-Svc (HTTP/3 is on)...
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "nope.apps.localhost"}}}
	resp, err := hc.Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Alt-Svc"), "h3") {
		t.Fatalf("HTTP/3 not on: Traefik's own answer has Alt-Svc %q", resp.Header.Get("Alt-Svc"))
	}
	// ...and a passthrough host's connection is the application's: no HTTP from Traefik,
	// so no Alt-Svc (the application's reply line is the first thing the client reads).
	rep, c, err := dialTLS(addr, "db.example.org", []string{"http/1.1"}, p.ca.pool)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if rep.Name != "db@n1" {
		t.Fatalf("db.example.org with HTTP/3 on answered by %q", rep.Name)
	}
	tr.requireProviderClean(t, "http")
	tr.requireTCPClean(t, "http", 4, 2)
}

// withHTTP3 adds http3 {} to the websecure entry point of a static configuration.
func withHTTP3(cfg []byte) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(cfg, &m); err != nil {
		return nil, err
	}
	ws, ok := dig(m, "entryPoints", "websecure").(map[string]any)
	if !ok {
		return nil, errors.New("no entryPoints.websecure")
	}
	ws["http3"] = map[string]any{}
	return yaml.Marshal(m)
}

// TestPassthroughBesideHTTPSRoutersOnOnePort is scenario 30: the websecure entry point
// terminates TLS for every HTTP router (entryPoints.websecure.http.tls, Traefik's default
// certificate), so HTTPS routers with Host rules, and web's wildcard with its
// !HostRegexp exclusion, sit beside the TCP passthrough routers. Traefik matches its
// HTTPS server names before the TCP routers: the passthrough names must not be among
// them. Every passthrough name still reaches its application with the application's
// own certificate; HTTPS names are Traefik's; a request whose server name is an HTTPS
// one but whose Host is a passthrough name (domain fronting) reaches no application.
func TestPassthroughBesideHTTPSRoutersOnOnePort(t *testing.T) {
	p := startPassthroughFleet(t)
	tr := startTraefik(t, "traefik-tls", traefikOptions{node: p.f.nodes[0], edit: func(rendered []byte) ([]byte, error) {
		return withEntryPoint(rendered, func(ws map[string]any) {
			h, _ := ws["http"].(map[string]any)
			h["tls"] = map[string]any{}
		})
	}})
	addr := tr.secureAddr()
	https := func(sni, host string) (response, error) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: sni}}}
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/", nil)
		if err != nil {
			return response{}, err
		}
		req.Host = host
		resp, err := hc.Do(req)
		if err != nil {
			return response{}, err
		}
		defer resp.Body.Close()
		return readResponse(resp)
	}
	waitFor(t, "web over HTTPS on websecure", routeTimeout, func() error {
		r, err := https("web.apps.localhost", "web.apps.localhost")
		if err != nil {
			return err
		}
		if r.from() != "web@n1" {
			return fmt.Errorf("served by %s", r.from())
		}
		return nil
	})
	p.dbNamesReachDB(t, addr, "beside HTTPS routers")
	for _, tc := range []struct{ sni, host, want string }{
		{"web.apps.localhost", "web.apps.localhost", "web@n1"},
		{"a.example.org", "a.example.org", "web@n1"}, // web's wildcard over HTTPS
		{"evil.example.net", "evil.example.net", "evil@n1"},
		{"web.apps.localhost", "db.example.org", "traefik:404"}, // fronting a passthrough name
		{"a.example.org", "kv.example.org", "traefik:404"},
		{"", "db.apps.localhost", "traefik:404"},
	} {
		before := len(p.hellos())
		r, err := https(tc.sni, tc.host)
		if err != nil {
			t.Fatalf("HTTPS sni %q host %q: %v", tc.sni, tc.host, err)
		}
		got := r.from()
		if tc.want == "traefik:404" {
			if r.status != http.StatusNotFound || r.echo != nil {
				t.Errorf("HTTPS sni %q host %q: %d from %s, want Traefik's 404", tc.sni, tc.host, r.status, got)
			}
		} else if got != tc.want {
			t.Errorf("HTTPS sni %q host %q: served by %s, want %s", tc.sni, tc.host, got, tc.want)
		}
		if hellos := p.hellos(); len(hellos) != before {
			t.Errorf("HTTPS sni %q host %q reached a passthrough application: %q", tc.sni, tc.host, hellos[before:])
		}
	}
	tr.requireProviderClean(t, "http")
	tr.requireTCPClean(t, "http", 4, 2)
}

// withEntryPoint applies edit to the websecure entry point of a static configuration.
func withEntryPoint(cfg []byte, edit func(map[string]any)) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(cfg, &m); err != nil {
		return nil, err
	}
	ws, ok := dig(m, "entryPoints", "websecure").(map[string]any)
	if !ok {
		return nil, errors.New("no entryPoints.websecure")
	}
	edit(ws)
	return yaml.Marshal(m)
}

// TestCaddyNeverServesAPassthroughHost is scenario 31: the shipped Caddy has no layer-4
// routing, so a passthrough host is never routed over HTTP (404, even under web's
// wildcard, which covers db.example.org and kv.example.org), a TLS handshake for it
// establishes no session, and no connection reaches the application. Such an
// application needs a Traefik ingress.
func TestCaddyNeverServesAPassthroughHost(t *testing.T) {
	p := startPassthroughFleet(t)
	n1 := p.f.nodes[0]
	cd := startCaddy(t, "caddy", n1, "a.example.org", "/", "web@n1")
	for _, h := range []string{"db.example.org", "DB.example.org", "db.example.org.", "kv.example.org:80", "db.apps.localhost", "mq.apps.localhost"} {
		r, err := cd.get(h, "/")
		if err != nil {
			t.Fatalf("GET %s via Caddy: %v", h, err)
		}
		if r.status != http.StatusNotFound || r.echo != nil {
			t.Errorf("GET %s via Caddy: %d from %s, want 404", h, r.status, r.from())
		}
	}
	before := len(p.hellos())
	for _, sni := range dbNames {
		_, c, err := dialTLS(cd.secureAddr(), sni, nil, p.ca.pool)
		if err == nil {
			c.Close()
			t.Fatalf("%s: a TLS session through Caddy", sni)
		}
	}
	if hellos := p.hellos(); len(hellos) != before {
		t.Fatalf("through Caddy, a passthrough application saw %q", hellos[before:])
	}
	// (The refusal itself, tls.permission.scafo's ApplicationOf answering no, is
	// TestPassthroughHostsAreNeverRoutedNorApproved in deploy/caddy/scafo: Caddy logs
	// nothing for it at its default level.)
}

// dbNamesReachDB waits until the Traefik at addr routes db.example.org, then checks that
// every exact name of the db application reaches it on its own TLS: the application's
// certificate verifies, its server name and ALPN arrive as sent.
func (p *passthroughFleet) dbNamesReachDB(t *testing.T, addr, when string) {
	t.Helper()
	alpn := []string{"h2", "http/1.1"}
	waitFor(t, "db through Traefik "+when, routeTimeout, func() error {
		_, c, err := dialTLS(addr, "db.example.org", alpn, p.ca.pool)
		if err == nil {
			c.Close()
		}
		return err
	})
	for _, sni := range dbNames {
		rep, c, err := dialTLS(addr, sni, alpn, p.ca.pool)
		if err != nil {
			t.Fatalf("%s %s: %v", sni, when, err)
		}
		c.Close()
		if rep.Name != "db@n1" || rep.SNI != sni || rep.ALPN != "h2" {
			t.Fatalf("%s %s: %+v", sni, when, rep)
		}
	}
}
