package front

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
)

// twoNames is the route table of the tests: one application hosting nameDB and nameKV.
func twoNames(upstreams ...string) []Route {
	return []Route{
		{Name: nameDB, Application: "db", Upstreams: upstreams},
		{Name: nameKV, Application: "db", Upstreams: upstreams},
	}
}

func TestExactNameReachesTheApplicationWithItsOwnCertificate(t *testing.T) {
	pki, up, fb := tlsApp(t)
	p, addr := startFront(t, TCPConfig{Fallback: fb.addr()}, twoNames(up.addr()), nil)

	// The exact names, and ASCII upper case (the application gets the name as sent and
	// folds ASCII case itself).
	sent := []string{nameDB, nameKV, "DB.Example.ORG", "DB.EXAMPLE.ORG", "Kv.Services.Example.Org"}
	for _, name := range sent {
		rep, c, err := dialTLS(addr, name, pki.roots, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rep.serverName != name || rep.alpn != "h2" || rep.proxySrc != "-" {
			t.Errorf("%s: the application saw %+v, want the name as sent, ALPN h2, no PROXY header", name, rep)
		}
		// The session carries data both ways after the handshake (the copy, spliced).
		msg := strings.Repeat("x", 100_000) + "\n"
		go func() { _, _ = io.WriteString(c, msg) }()
		back, err := bufio.NewReaderSize(c, 1<<17).ReadString('\n')
		if err != nil || back != msg {
			t.Errorf("%s: echo of %d bytes: got %d, %v", name, len(msg), len(back), err)
		}
		c.Close()
	}
	accepted, names := up.seen()
	if accepted != int64(len(sent)) || strings.Join(names, ",") != strings.Join(sent, ",") {
		t.Errorf("the application accepted %d connections with server names %q, want %q", accepted, names, sent)
	}
	if s := p.Stats(); s.Routed != uint64(len(sent)) || s.Fallback != 0 {
		t.Errorf("stats %+v: want %d routed, none to the fallback", s, len(sent))
	}
}

// unicodeSpaces is every rune unicode.IsSpace (so strings.TrimSpace) removes: the
// White_Space property, which IsSpace follows outside Latin-1 and equals within it.
func unicodeSpaces() []rune {
	var rs []rune
	for _, r16 := range unicode.White_Space.R16 {
		for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
			rs = append(rs, r)
		}
	}
	for _, r32 := range unicode.White_Space.R32 {
		for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
			rs = append(rs, r)
		}
	}
	return rs
}

// oddSpellings is every spelling that must never reach the application: the rows of
// docs/passthrough.md's table, U+0130, U+017F and U+212A each in place of the ASCII
// letter they fold to, and every Unicode space around an exact name.
func oddSpellings(t *testing.T) []struct{ why, raw string } {
	t.Helper()
	odd := []struct{ why, raw string }{
		{"trailing dot", nameDB + "."},
		{"two trailing dots", nameDB + ".."},
		{"trailing dot and upper case", "DB.example.org."},
		{"leading dot", "." + nameDB},
		{"NUL inside", "db\x00.example.org"},
		{"NUL at the end", nameDB + "\x00"},
		{"U+0130 prepended", "\u0130" + nameDB},
		{"U+0130 in place of the i", strings.Replace(nameKV, "i", "\u0130", 1)},
		{"U+017F in place of an s", strings.Replace(nameKV, "s", "\u017f", 1)},
		{"U+212A in place of the k", strings.Replace(nameKV, "k", "\u212a", 1)},
		{"another name's A-label", "xn--db-8ka.example.org"},
		{"a port", nameDB + ":443"},
		{"Unicode (U+00E4)", "db.ex\u00e4mple.org"},
		{"Cyrillic a", "db.ex\u0430mple.org"},
		{"IPv4 literal", "127.0.0.1"},
		{"IPv6 literal", "::1"},
		{"wildcard", "*.example.org"},
		{"unknown name", "nope.example.org"},
		{"a name below an exact one", "a." + nameDB},
		{"a name above an exact one", "services.example.org"},
		{"percent-encoded", "db%2Eexample.org"},
		{"leading space", " " + nameDB},
		{"trailing tab", nameDB + "\t"},
	}
	for _, r := range unicodeSpaces() {
		odd = append(odd,
			struct{ why, raw string }{fmt.Sprintf("leading %U", r), string(r) + nameDB},
			struct{ why, raw string }{fmt.Sprintf("trailing %U", r), nameDB + string(r)})
	}
	if len(odd) < 23+2*25 {
		t.Fatalf("only %d spellings: unicode.White_Space has fewer runes than the 25 expected", len(odd))
	}
	return odd
}

func TestNoSpellingButTheExactNameReachesTheApplication(t *testing.T) {
	_, up, fb := tlsApp(t)
	p, addr := startFront(t, TCPConfig{Fallback: fb.addr()}, twoNames(up.addr()), nil)

	type hello struct {
		why   string
		msg   []byte // the handshake message
		bytes []byte // as sent: in records
	}
	var hellos []hello
	add := func(why string, msg []byte, recordSizes ...int) {
		hellos = append(hellos, hello{why, msg, records(msg, recordSizes...)})
	}
	for _, o := range oddSpellings(t) {
		add(fmt.Sprintf("%s %q", o.why, o.raw), goHello(t, []byte(o.raw)))
	}
	add("no server name", goHello(t))
	add("the exact name twice in one list", goHello(t, []byte(nameDB), []byte(nameDB)))
	add("two exact names in one list", goHello(t, []byte(nameDB), []byte(nameKV)))
	add("an unknown name then the exact one", goHello(t, []byte("nope.example.org"), []byte(nameDB)))
	add("an empty name", goHello(t, []byte{}))
	add("an odd name split across two records", goHello(t, []byte(nameDB+"\u00a0")), 60)
	for _, h := range hellos {
		before := p.Stats()
		c := sendRaw(t, addr, h.bytes)
		// The connection ends when whoever got it closes: the fallback after reading
		// everything (it reports before closing), or the application refusing a
		// handshake the client never finishes.
		_, _ = io.Copy(io.Discard, c)
		c.Close()
		if accepted, names := up.seen(); accepted != 0 {
			t.Fatalf("%s reached the application (server names %q)", h.why, names)
		}
		var got fallbackConn
		select {
		case got = <-fb.conns:
		default:
			t.Errorf("%s: never reached the fallback", h.why)
			continue
		}
		if got.err != nil {
			t.Errorf("%s: the fallback read: %v", h.why, got.err)
		} else if !bytes.Equal(got.bytes, h.bytes) {
			t.Errorf("%s: the fallback got %d bytes, not the %d sent byte for byte", h.why, len(got.bytes), len(h.bytes))
		}
		if got.header.src.String() != c.LocalAddr().String() || got.header.dst.String() != addr || got.header.command != 0x21 {
			t.Errorf("%s: PROXY v2 header %+v, want PROXY from %s to %s", h.why, got.header, c.LocalAddr(), addr)
		}
		// A name crypto/tls accepts missed the table (the exact lookup refused it);
		// one it refuses never got that far. Either way, the fallback.
		after := p.Stats()
		if name, ok := ServerName(h.msg); ok {
			if after.Unrouted != before.Unrouted+1 {
				t.Errorf("%s: server name %q was not a table miss: stats %+v", h.why, name, after)
			}
		} else if after.NoServerName != before.NoServerName+1 {
			t.Errorf("%s: not counted as a ClientHello without a server name: stats %+v", h.why, after)
		}
	}
	if s := p.Stats(); s.Fallback != uint64(len(hellos)) || s.Routed != 0 {
		t.Errorf("stats %+v: want all %d to the fallback", s, len(hellos))
	}

	// The control: the same crafting with the exact name reaches the application (so
	// the misses above are misses of the name, not of the crafting).
	for _, name := range []string{nameDB, "KV.services.example.ORG"} {
		c := sendRaw(t, addr, records(goHello(t, []byte(name))))
		_, _ = io.Copy(io.Discard, c) // the application refuses the half-done handshake and closes
		c.Close()
	}
	if accepted, names := up.seen(); accepted != 2 || strings.Join(names, ",") != nameDB+",KV.services.example.ORG" {
		t.Errorf("crafted exact names: the application accepted %d with %q, want both", accepted, names)
	}
}

// splitHelloConn re-cuts the ClientHello Go's client writes: two TLS records, the second
// starting inside the server name, sent in three writes (the last inside the second
// record's header); before each next write it waits until the front has read all the
// bytes of the previous one, so the front sees them in separate reads.
type splitHelloConn struct {
	net.Conn
	name  string
	reads chan int
	done  bool
	t     testing.TB
}

func (c *splitHelloConn) Write(p []byte) (int, error) {
	if c.done {
		return c.Conn.Write(p)
	}
	c.done = true
	if len(p) < 5 || p[0] != 22 || 5+int(binary.BigEndian.Uint16(p[3:5])) != len(p) {
		c.t.Errorf("Go's first write is not one handshake record: % x", p[:min(len(p), 8)])
		return c.Conn.Write(p)
	}
	msg := p[5:]
	i := bytes.Index(msg, []byte(c.name))
	if i < 0 {
		c.t.Errorf("server name %q not in the ClientHello", c.name)
		return c.Conn.Write(p)
	}
	recs := records(msg, i+3) // "db." | "example.org..."
	first := 5 + i + 3
	cuts := [][]byte{recs[:first+2], recs[first+2 : first+4], recs[first+4:]}
	for k, piece := range cuts {
		if _, err := c.Conn.Write(piece); err != nil {
			return 0, err
		}
		if k == len(cuts)-1 {
			break
		}
		for got := 0; got < len(piece); {
			select {
			case n := <-c.reads:
				got += n
			case <-time.After(10 * time.Second):
				return 0, errors.New("the front never read the first piece")
			}
		}
	}
	return len(p), nil
}

func TestAClientHelloSplitAcrossRecordsAndSegmentsIsRouted(t *testing.T) {
	pki, up, fb := tlsApp(t)
	reads := make(chan int, 64)
	p, addr := startFront(t, TCPConfig{Fallback: fb.addr()}, twoNames(up.addr()),
		func(ln net.Listener) net.Listener { return &readsListener{Listener: ln, reads: reads} })

	rep, c, err := dialTLS(addr, nameDB, pki.roots, func(c net.Conn) net.Conn {
		return &splitHelloConn{Conn: c, name: nameDB, reads: reads, t: t}
	})
	if err != nil {
		t.Fatalf("a split ClientHello: %v", err)
	}
	c.Close()
	if rep.serverName != nameDB || rep.alpn != "h2" {
		t.Errorf("the application saw %+v", rep)
	}
	if s := p.Stats(); s.Routed != 1 {
		t.Errorf("stats %+v: want 1 routed", s)
	}

	// An odd spelling split across records misses as a whole one does, its records
	// replayed to the fallback byte for byte: TestNoSpellingButTheExactNameReachesTheApplication.
}

func TestFailoverFollowsTheDocumentOrder(t *testing.T) {
	pki := newTestPKI(t, nameDB, nameKV)
	first := startTLSUpstream(t, pki, false)
	second := startTLSUpstream(t, pki, false)
	fb := startFallback(t)

	t.Run("the first answers: the second gets nothing", func(t *testing.T) {
		_, addr := startFront(t, TCPConfig{Fallback: fb.addr()}, twoNames(first.addr(), second.addr()), nil)
		for i := 0; i < 5; i++ {
			if _, c, err := dialTLS(addr, nameDB, pki.roots, nil); err != nil {
				t.Fatal(err)
			} else {
				c.Close()
			}
		}
		if a, _ := first.seen(); a != 5 {
			t.Errorf("the first upstream accepted %d of 5", a)
		}
		if a, _ := second.seen(); a != 0 {
			t.Errorf("the second upstream accepted %d, want 0", a)
		}
	})

	t.Run("the first refuses: the next at once, no connection fails", func(t *testing.T) {
		before, _ := second.seen()
		p, addr := startFront(t, TCPConfig{Fallback: fb.addr(), DialTimeout: time.Minute}, twoNames(refusedAddr(t), second.addr()), nil)
		const n = 50
		for i := 0; i < n; i++ {
			if _, c, err := dialTLS(addr, nameDB, pki.roots, nil); err != nil {
				t.Fatalf("connection %d of %d failed: %v", i+1, n, err)
			} else {
				c.Close()
			}
		}
		if a, _ := second.seen(); a-before != n {
			t.Errorf("the second upstream accepted %d of %d", a-before, n)
		}
		if s := p.Stats(); s.Routed != n || s.DialFailures != n || s.NoUpstream != 0 {
			t.Errorf("stats %+v: want %d routed after %d refusals", s, n, n)
		}
	})

	t.Run("the first is silent: the next after the dial budget", func(t *testing.T) {
		silent := silentAddr(t)
		before, _ := second.seen()
		budget := 200 * time.Millisecond
		p, addr := startFront(t, TCPConfig{Fallback: fb.addr(), DialTimeout: budget}, twoNames(silent, second.addr()), nil)
		const n = 3
		for i := 0; i < n; i++ {
			start := time.Now()
			if _, c, err := dialTLS(addr, nameDB, pki.roots, nil); err != nil {
				t.Fatalf("connection %d of %d failed: %v", i+1, n, err)
			} else {
				c.Close()
			}
			if d := time.Since(start); d < budget {
				t.Errorf("connection %d reached the second upstream in %s, before the silent one's budget %s ended", i+1, d, budget)
			}
		}
		if a, _ := second.seen(); a-before != n {
			t.Errorf("the second upstream accepted %d of %d", a-before, n)
		}
		if s := p.Stats(); s.Routed != n || s.DialFailures != n {
			t.Errorf("stats %+v: want %d routed after %d silent dials", s, n, n)
		}
	})

	t.Run("none answers: the client is closed, never sent to the fallback", func(t *testing.T) {
		p, addr := startFront(t, TCPConfig{Fallback: fb.addr()}, twoNames(refusedAddr(t), refusedAddr(t)), nil)
		c := sendRaw(t, addr, records(goHello(t, []byte(nameDB))))
		if n, err := io.Copy(io.Discard, c); n != 0 || err != nil {
			t.Errorf("the client read %d bytes (%v), want a close and nothing else", n, err)
		}
		if s := p.Stats(); s.NoUpstream != 1 || s.DialFailures != 2 || s.Fallback != 0 {
			t.Errorf("stats %+v: want 1 closed after 2 failed dials, none to the fallback", s)
		}
		select {
		case got := <-fb.conns:
			t.Errorf("a passthrough name reached the fallback: %+v", got)
		default:
		}
	})
}

func TestProxyV2GoesToAnUpstreamThatAsksWithTheClientsAddress(t *testing.T) {
	pki := newTestPKI(t, nameDB)
	withHeader := startTLSUpstream(t, pki, true)
	fb := startFallback(t)
	_, addr := startFront(t, TCPConfig{Fallback: fb.addr()}, []Route{
		{Name: nameDB, Application: "db", Upstreams: []string{refusedAddr(t), withHeader.addr()}, ProxyProtocol: 2},
	}, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: nameDB, RootCAs: pki.roots, NextProtos: []string{"h2"}})
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(line); len(f) != 3 || f[2] != c.LocalAddr().String() {
		t.Errorf("the application read PROXY source %q, want the client's %s", line, c.LocalAddr())
	}
}

// What is not a ClientHello reaches the fallback byte for byte after the front's PROXY
// header. A client that sends its own PROXY header (v1 text or v2 binary), hoping
// Traefik takes it for the front's, is no exception: its header comes after the
// front's, where a PROXY reader (one header per connection) sees TLS that does not
// parse, never a second header.
func TestNotAClientHelloGoesToTheFallback(t *testing.T) {
	_, up, fb := tlsApp(t)
	p, addr := startFront(t, TCPConfig{Fallback: fb.addr()}, []Route{{Name: nameDB, Upstreams: []string{up.addr()}}}, nil)
	serverHello := append([]byte{2, 0, 0, 4}, 3, 3, 0, 0)
	v1 := []byte("PROXY TCP4 6.6.6.6 10.0.0.1 8080 443\r\n")
	v2 := append(proxyV2Signature[:], proxyV2Command, proxyV2TCP4, 0, 12, 6, 6, 6, 6, 10, 0, 0, 1, 0x1f, 0x90, 0x01, 0xbb)
	unrouted := records(goHello(t, []byte("unrouted.example.org")))
	cat := func(a, b []byte) []byte { return append(append([]byte(nil), a...), b...) }
	cases := []struct {
		why   string
		bytes []byte
	}{
		{"plain HTTP for a passthrough name", []byte("GET / HTTP/1.1\r\nHost: db.example.org\r\n\r\n")},
		{"an SSLv2 ClientHello", []byte{0x80, 0x2e, 0x01, 0x00, 0x02, 0x00, 0x15, 0x00, 0x00, 0x00, 0x10, 0x07, 0x00, 0xc0}},
		{"an alert record", []byte{21, 3, 3, 0, 2, 2, 40}},
		{"a handshake that is not a ClientHello", records(serverHello)},
		{"an empty handshake record", []byte{22, 3, 1, 0, 0}},
		{"a record over 2^14", []byte{22, 3, 1, 0x40, 0x01, 1, 0, 0, 1}},
		// The ClientHello's first record (20 bytes of it), then an application data record.
		{"an application data record inside a ClientHello", append(records(goHello(t, []byte(nameDB)), 20)[:25], 23, 3, 3, 0, 1, 0)},
		{"a PROXY v1 line", v1},
		{"a PROXY v1 line before a ClientHello", cat(v1, unrouted)},
		{"a PROXY v2 header", v2},
		{"a PROXY v2 header before a ClientHello", cat(v2, unrouted)},
		{"a ClientHello, then a PROXY v2 header", cat(unrouted, v2)},
	}
	for _, tc := range cases {
		c := sendRaw(t, addr, tc.bytes)
		got := fb.next(t)
		if got.err != nil || got.header.command != proxyV2Command || got.header.src.String() != c.LocalAddr().String() || !bytes.Equal(got.bytes, tc.bytes) {
			t.Errorf("%s: the fallback got %q after the header %+v (%v), want %q after the front's from %s", tc.why, got.bytes, got.header, got.err, tc.bytes, c.LocalAddr())
		}
	}
	if a, _ := up.seen(); a != 0 {
		t.Errorf("the application accepted %d connections, want none", a)
	}
	if s := p.Stats(); s.Fallback != uint64(len(cases)) {
		t.Errorf("stats %+v: want %d to the fallback", s, len(cases))
	}
}

func TestSlowClientHelloIsCutAtTheDeadline(t *testing.T) {
	_, up, fb := tlsApp(t)
	timeout := 400 * time.Millisecond
	p, addr := startFront(t, TCPConfig{Fallback: fb.addr(), HelloTimeout: timeout}, []Route{{Name: nameDB, Upstreams: []string{up.addr()}}}, nil)
	hello := records(goHello(t, []byte(nameDB)))
	// start before the dial: the front's deadline runs from its accept, which the kernel may
	// complete before Dial returns here (CI once measured 396.6 ms from after the dial).
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a byte every 100 ms: the whole ClientHello would take minutes
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := range hello {
			if _, err := c.Write(hello[i : i+1]); err != nil {
				return
			}
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	cut := time.Since(start)
	if n != 0 || (err != io.EOF && !errors.Is(err, net.ErrClosed) && !isReset(err)) {
		t.Fatalf("the slow client read %d bytes, %v: want the front's close", n, err)
	}
	if cut < timeout || cut > timeout+3*time.Second {
		t.Errorf("cut after %s, want at the %s deadline", cut, timeout)
	}
	if s := p.Stats(); s.HelloTimeout != 1 || s.Routed != 0 || s.Fallback != 0 {
		t.Errorf("stats %+v: want one ClientHello timed out, nothing relayed", s)
	}
	if a, _ := up.seen(); a != 0 {
		t.Errorf("the application accepted %d", a)
	}
}

// isReset: the front closed with bytes of ours unread, so the kernel sent a reset.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// withPadding adds a padding extension (RFC 7685, type 21) of n zero bytes to msg.
func withPadding(msg []byte, n int) []byte {
	body := append([]byte(nil), msg[4:]...)
	ext := binary.BigEndian.AppendUint16([]byte{0, 21}, uint16(n))
	ext = append(ext, make([]byte, n)...)
	// The extensions' length is the last length before them: find it by walking.
	p := 2 + 32
	p += 1 + int(body[p])
	p += 2 + int(binary.BigEndian.Uint16(body[p:]))
	p += 1 + int(body[p])
	binary.BigEndian.PutUint16(body[p:], binary.BigEndian.Uint16(body[p:])+uint16(len(ext)))
	body = append(body, ext...)
	return append([]byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

func TestOversizeClientHelloIsCut(t *testing.T) {
	_, up, fb := tlsApp(t)
	p, addr := startFront(t, TCPConfig{Fallback: fb.addr()}, []Route{{Name: nameDB, Upstreams: []string{up.addr()}}}, nil)
	base := goHello(t, []byte(nameDB))

	// Just under the bound (16 KiB of records, in two records): routed.
	under := withPadding(base, defaultMaxHello-len(base)-4-2*recordHeaderLen)
	c := sendRaw(t, addr, records(under, 8000))
	_, _ = io.Copy(io.Discard, c)
	if a, _ := up.seen(); a != 1 || len(records(under, 8000)) != defaultMaxHello {
		t.Fatalf("a ClientHello of exactly %d bytes of records: the application accepted %d, want 1", len(records(under, 8000)), a)
	}

	for _, tc := range []struct {
		why   string
		bytes []byte
	}{
		{"one byte over the bound", records(withPadding(base, defaultMaxHello-len(base)-4-2*recordHeaderLen+1), 8000)},
		{"a length over the bound announced (nothing more sent)", []byte{22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff}},
		{"small records whose headers pass the bound", records(withPadding(base, 4000), repeat(1, 4000)...)},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// Written in the background: the front may close before it has read it all.
		go func() { _, _ = c.Write(tc.bytes) }()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || (err != io.EOF && !isReset(err)) {
			t.Errorf("%s: read %d, %v: want the front's close", tc.why, n, err)
		}
		c.Close()
	}
	if s := p.Stats(); s.HelloTooLarge != 3 || s.Routed != 1 || s.Fallback != 0 {
		t.Errorf("stats %+v: want 3 cut for size, 1 routed, none to the fallback", s)
	}
	if a, _ := up.seen(); a != 1 {
		t.Errorf("the application accepted %d, want only the one under the bound", a)
	}
}

func repeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// Shutdown closes the listener at once and lets open connections run; it returns nil
// when the last one ends, or its context's error when that ends first, closing them.
func TestShutdownLetsOpenConnectionsRunUntilTheyOrItsContextEnd(t *testing.T) {
	pki := newTestPKI(t, nameDB)
	up := startTLSUpstream(t, pki, false)
	for _, byContext := range []bool{true, false} {
		p, addr := startFront(t, TCPConfig{}, []Route{{Name: nameDB, Upstreams: []string{up.addr()}}}, nil)
		_, open, err := dialTLS(addr, nameDB, pki.roots, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer open.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		shut := make(chan error, 1)
		go func() { shut <- p.Shutdown(ctx) }()
		// No new connection once Shutdown began (its listener is closed: refused).
		for {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				break
			}
			c.Close() // accepted before the listener closed (the front sees it leave)
		}
		// The open connection still works, and holds Shutdown.
		br := bufio.NewReader(open)
		if _, err := io.WriteString(open, "still here\n"); err != nil {
			t.Fatal(err)
		}
		if line, err := br.ReadString('\n'); err != nil || line != "still here\n" {
			t.Fatalf("the open connection during Shutdown: %q, %v", line, err)
		}
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned %v with a connection open", err)
		default:
		}
		if !byContext {
			open.Close() // the client leaves: the application sees EOF and closes, the relay ends
			if err := <-shut; err != nil {
				t.Errorf("Shutdown = %v, want nil once the last connection ended", err)
			}
		} else {
			cancel()
			if err := <-shut; !errors.Is(err, context.Canceled) {
				t.Errorf("Shutdown = %v, want context.Canceled", err)
			}
			_ = open.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := br.ReadString('\n'); err == nil {
				t.Error("the open connection survived the end of Shutdown's context")
			}
		}
		if s := p.Stats(); s.Open != 0 {
			t.Errorf("stats %+v: connections still open", s)
		}
		if err := p.Serve(&net.TCPListener{}); !errors.Is(err, ErrTCPProxyClosed) {
			t.Errorf("Serve after Shutdown = %v, want ErrTCPProxyClosed", err)
		}
	}
}

func TestTCPConfigValidationNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  TCPConfig
		want string
	}{
		{TCPConfig{}, ""},
		{TCPConfig{Fallback: "127.0.0.1:8443", HelloTimeout: time.Second, MaxHello: 8 << 10, DialTimeout: time.Second}, ""},
		{TCPConfig{HelloTimeout: -1}, "helloTimeout"},
		{TCPConfig{MaxHello: 100}, "maxHello"},
		{TCPConfig{MaxHello: 1 << 20}, "maxHello"},
		{TCPConfig{DialTimeout: -time.Second}, "dialTimeout"},
		{TCPConfig{Fallback: "127.0.0.1"}, "fallback"},
	} {
		errs := tc.cfg.Validate()
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%+v: %v, want valid", tc.cfg, errs)
		case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want)):
			t.Errorf("%+v: %v, want one error naming %s", tc.cfg, errs, tc.want)
		}
	}
}
