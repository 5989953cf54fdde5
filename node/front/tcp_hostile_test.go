package front

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/render/routing"
)

// Hostile clients and hostile routing documents against the TCP side (issue 47, the
// review of the front as anyone on the internet, a tenant, or a corrupt document).

// A route naming the front's own socket (a corrupt document or state file) would make
// every connection to the name dial the front again with the same ClientHello, a loop
// that ends when descriptors run out; one naming the fallback (Traefik's entry point,
// which trusts PROXY headers from the front's address) would hand Traefik the client's
// bytes from 127.0.0.1 with no header. Neither is dialed: the client is closed, and the
// front accepted one connection (the client's), the fallback none.
func TestARouteToTheFrontOrItsFallbackIsNotDialed(t *testing.T) {
	for _, toFallback := range []bool{false, true} {
		fb := startFallback(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		target := ln.Addr().String()
		if toFallback {
			target = fb.addr()
		}
		p := serveTCP(t, ln, TCPConfig{Fallback: fb.addr(), DialTimeout: time.Second}, []Route{{Name: nameDB, Application: "db", Upstreams: []string{target}}})

		c := sendRaw(t, ln.Addr().String(), records(goHello(t, []byte(nameDB))))
		if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
			t.Fatalf("route to the fallback %v: the client read %d bytes, %v: want a close", toFallback, n, err)
		}
		// The front decided before closing the client: a dial would have been accepted already.
		select {
		case got := <-fb.conns:
			t.Fatalf("route to the fallback %v: the fallback got a connection for a passthrough name: %+v", toFallback, got)
		default:
		}
		if s := p.Stats(); s.Accepted != 1 || s.Forbidden != 1 || s.NoUpstream != 1 || s.Routed != 0 || s.Fallback != 0 {
			t.Fatalf("route to the fallback %v: stats %+v: want one connection accepted, its one upstream refused", toFallback, s)
		}
	}
}

// The guard's rules, address by address.
func TestUpstreamGuardRefusesTheFrontsOwnAddresses(t *testing.T) {
	g := newUpstreamGuard([]guardEntry{
		{"127.0.0.1:8443", "the fallback"},
		{":443", "the front's own listening socket"},
		{"[::]:7443", "the front's own socket"},
		{"10.83.0.1:7400", "a node API"},
		{"localhost:7401", "a node API"},
		{"node-b.example:7402", "a node API"}, // no lookup: not refused by name
	})
	var aLocal string
	for a := range g.local {
		if a.Is4() && !a.IsLoopback() {
			aLocal = a.String()
			break
		}
	}
	for _, tc := range []struct {
		addr   string
		refuse bool
	}{
		{"127.0.0.1:8443", true},
		{"[::ffff:127.0.0.1]:8443", true},
		{"127.0.0.1:443", true},
		{"127.0.0.2:443", true},
		{"[::1]:443", true},
		{"127.0.0.1:7443", true},
		{"10.83.0.1:7400", true},
		{"0.0.0.0:24000", true},
		{"[::]:24000", true},
		{"224.0.0.1:24000", true},
		{"255.255.255.255:24000", true},
		{"127.0.0.1:24000", false}, // a one-node fleet's instance
		{"127.0.0.2:8443", false},  // not where the fallback listens
		{"10.83.0.2:443", false},   // another node's 443 (not this host's)
		{"10.83.0.1:24000", false},
		{"[fd00::1]:24000", false},
		{"db.internal:443", false}, // not an IP literal: not judged (a document has none)
		{"127.0.0.1:7401", true},
		{"[::1]:7401", true},
		{"127.0.0.1:7402", false},
	} {
		if got := g.refuse(tc.addr) != ""; got != tc.refuse {
			t.Errorf("refuse(%s) = %q, want refused: %v", tc.addr, g.refuse(tc.addr), tc.refuse)
		}
	}
	if aLocal != "" {
		if g.refuse(net.JoinHostPort(aLocal, "443")) == "" {
			t.Errorf("this host's address %s on the front's port 443 is not refused", aLocal)
		}
		if g.refuse(net.JoinHostPort(aLocal, "24000")) != "" {
			t.Errorf("this host's address %s on an instance port is refused", aLocal)
		}
	}
	if got := nodeAPIAddrs([]string{"http://127.0.0.1:7400", "https://node-b.example", "http://[fd00::2]:7400/"}); len(got) != 3 ||
		got[0] != "127.0.0.1:7400" || got[1] != "node-b.example:443" || got[2] != "[fd00::2]:7400" {
		t.Errorf("nodeAPIAddrs: %q", got)
	}
}

// A record header announcing 2^14 bytes costs the client 5 bytes: the front must not
// answer it with a 16 KiB buffer before the bytes come, or a flood of half-open
// connections holds 16 KiB of the front's memory each for 5 bytes each. What a
// ClientHello read holds grows with what the client sent.
func TestAnAnnouncedRecordIsNotAllocatedBeforeItsBytesCome(t *testing.T) {
	header := []byte{22, 3, 1, 0x40, 0x00, 1, 0, 0x3f, 0xfc} // a record of 2^14, a ClientHello of 16 380
	const calls = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < calls; i++ {
		// The client sent the header, then nothing until its read deadline.
		_, err := readClientHello(bytesConn{r: bytes.NewReader(header), end: os.ErrDeadlineExceeded}, time.Time{}, 32<<10)
		if !errors.Is(err, errHelloTimeout) {
			t.Fatalf("read: %v, want the deadline", err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > 4<<10 {
		t.Fatalf("a read that got %d bytes allocated %d bytes: want it to grow with what came (< 4 KiB)", len(header), per)
	}
}

// BenchmarkHalfOpenClientHelloMemory: what a connection that sent a record header
// announcing 12 KiB, then nothing, holds of the front's memory (heap and goroutine
// stacks) while it waits for its deadline. Reported as bytes/conn; b.N is ignored
// beyond running once (1 000 connections).
func BenchmarkHalfOpenClientHelloMemory(b *testing.B) {
	const conns = 1000
	reads := make(chan int, 4*conns)
	_, addr := startFront(b, TCPConfig{HelloTimeout: time.Minute}, nil,
		func(ln net.Listener) net.Listener { return &readsListener{Listener: ln, reads: reads} })
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cs := make([]net.Conn, 0, conns)
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, c)
		if _, err := c.Write([]byte{22, 3, 1, 0x30, 0x00, 1, 0, 0x2f, 0xfc}); err != nil {
			b.Fatal(err)
		}
	}
	// Every handler has read its 9 bytes (and waits for more).
	for got := 0; got < 9*conns; got += <-reads {
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)
	b.ReportMetric(float64(held)/conns, "bytes/conn")
	for _, c := range cs {
		c.Close()
	}
}

// A routing document the front did not derive (a compromised node, a bad state file
// that skipped the codec): only exact lower-case ASCII passthrough names enter the
// table, the first of a duplicated name wins, and a lookup folds ASCII case and
// nothing else.
func TestACorruptDocumentPutsOnlyExactNamesInTheTable(t *testing.T) {
	up := func(a string) []routing.Upstream { return []routing.Upstream{{Node: "n", Address: a}} }
	doc := &routing.Document{Routes: []routing.Route{
		{Host: "*.example.org", Application: "wild", Passthrough: true, Upstreams: up("10.0.0.9:1")},
		{Host: "DB.example.org", Application: "upper", Passthrough: true, Upstreams: up("10.0.0.9:2")},
		{Host: "db.ex\u00e4mple.org", Application: "unicode", Passthrough: true, Upstreams: up("10.0.0.9:3")},
		{Host: "db.example.org.", Application: "dot", Passthrough: true, Upstreams: up("10.0.0.9:4")},
		{Host: " db.example.org", Application: "space", Passthrough: true, Upstreams: up("10.0.0.9:5")},
		{Host: "db.example.org", Application: "first", Passthrough: true, Upstreams: up("10.0.0.1:1")},
		{Host: "db.example.org", Application: "second", Passthrough: true, Upstreams: up("10.0.0.9:6")},
		{Host: "http.example.org", Application: "http", Upstreams: up("10.0.0.9:7")},
		{Host: strings.Repeat("a", 254), Application: "long", Passthrough: true, Upstreams: up("10.0.0.9:8")},
	}}
	tab := FromDocument(doc)
	if got := tab.Names(); len(got) != 1 || got[0] != nameDB {
		t.Fatalf("names %q, want only %q", got, nameDB)
	}
	for _, name := range []string{"db.example.org", "DB.EXAMPLE.ORG", "Db.Example.Org"} {
		if r, ok := tab.Lookup(name); !ok || r.Application != "first" {
			t.Errorf("Lookup(%q) = %+v, %v: want the first route of the name", name, r, ok)
		}
	}
	for _, name := range []string{"db.examp\u212ae.org", "db.example.org.", "*.example.org", "x.example.org", "db.ex\u00e4mple.org",
		"http.example.org", "db.example.org\x00", "d\u0130b.example.org"} {
		if r, ok := tab.Lookup(name); ok {
			t.Errorf("Lookup(%q) = %+v: want no route", name, r)
		}
	}
	var none *Table // before any document
	if _, ok := none.Lookup(nameDB); ok {
		t.Error("a nil table routed a name")
	}
}

// A ClientHello cut into 1-byte records (6 bytes on the wire for each byte of it) is
// read and routed, its records replayed byte for byte; the same cut of a ClientHello
// whose records pass MaxHello is closed, never passed on, whatever it would name.
func TestAClientHelloInOneByteRecordsIsRoutedWithinTheByteBound(t *testing.T) {
	up := startFallback(t) // an upstream that records what it gets after a PROXY header
	p, addr := startFront(t, TCPConfig{}, []Route{{Name: nameDB, Upstreams: []string{up.addr()}, ProxyProtocol: 2}}, nil)
	hello := goHello(t, []byte(nameDB))
	sent := records(hello, repeat(1, len(hello))...)
	c := sendRaw(t, addr, sent)
	if got := up.next(t); got.err != nil || !bytes.Equal(got.bytes, sent) {
		t.Fatalf("the application got %d bytes (%v), want the %d sent", len(got.bytes), got.err, len(sent))
	}
	c.Close()

	// A ClientHello of 3 000 bytes (a long session ticket, say) in 1-byte records: 18 000
	// bytes of records, over the 16 KiB bound.
	big := withPadding(hello, 3000-len(hello))
	c = sendRaw(t, addr, records(big, repeat(1, len(big))...))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := io.Copy(io.Discard, c); n != 0 {
		t.Fatalf("the client read %d bytes", n)
	}
	if s := p.Stats(); s.Routed != 1 || s.HelloTooLarge != 1 {
		t.Fatalf("stats %+v: want the first routed, the second cut", s)
	}
}
