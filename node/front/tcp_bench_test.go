package front

import (
	"crypto/tls"
	"io"
	"testing"
	"time"
)

// The TCP half of issue 47 item 8, on loopback in one process: the same TLS
// application reached directly and through the front, alternately in every iteration
// (so the machine's load falls on both alike), each figure and their ratio reported.
// Traefik's own TCP passthrough beside it needs a Traefik binary: e2e/bench.
//
//	go test -run '^$' -bench TCPPassthrough -benchtime 2s ./node/front/

// benchFront: the application (tlsApp), its address, and the front's.
func benchFront(b *testing.B) (pki *testPKI, direct, front string) {
	pki, up, fb := tlsApp(b)
	_, front = startFront(b, TCPConfig{Fallback: fb.addr()}, twoNames(up.addr()), nil)
	return pki, up.addr(), front
}

// BenchmarkTCPPassthroughHandshakes: new TLS connections (connect, full handshake, the
// application's first line, close), one direct and one through the front per iteration.
func BenchmarkTCPPassthroughHandshakes(b *testing.B) {
	pki, direct, front := benchFront(b)
	var tDirect, tFront time.Duration
	one := func(addr string) time.Duration {
		start := time.Now()
		_, c, err := dialTLS(addr, nameDB, pki.roots, nil)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		c.Close()
		return d
	}
	n := 0
	for b.Loop() {
		tDirect += one(direct)
		tFront += one(front)
		n++
	}
	b.ReportMetric(float64(n)/tDirect.Seconds(), "direct-conns/s")
	b.ReportMetric(float64(n)/tFront.Seconds(), "front-conns/s")
	b.ReportMetric(tDirect.Seconds()/tFront.Seconds(), "front/direct")
	b.ReportMetric(float64((tFront-tDirect).Microseconds())/float64(n), "added-µs/conn")
}

// BenchmarkTCPPassthroughBytes: 4 MiB echoed (both directions) over one open TLS
// session, direct and through the front, per iteration.
func BenchmarkTCPPassthroughBytes(b *testing.B) {
	pki, direct, front := benchFront(b)
	const size = 4 << 20
	open := func(addr string) *tls.Conn {
		_, c, err := dialTLS(addr, nameDB, pki.roots, nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = c.NetConn().SetDeadline(time.Time{})
		b.Cleanup(func() { c.Close() })
		return c
	}
	cd, cf := open(direct), open(front)
	buf := make([]byte, 64<<10)
	echo := func(c *tls.Conn) time.Duration {
		start := time.Now()
		werr := make(chan error, 1)
		go func() {
			var err error
			for sent := 0; sent < size && err == nil; sent += len(buf) {
				_, err = c.Write(buf)
			}
			werr <- err
		}()
		if _, err := io.CopyN(io.Discard, c, size); err != nil {
			b.Fatal(err)
		}
		if err := <-werr; err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var tDirect, tFront time.Duration
	n := 0
	for b.Loop() {
		tDirect += echo(cd)
		tFront += echo(cf)
		n++
	}
	mb := float64(n) * 2 * size / 1e6 // each way
	b.ReportMetric(mb/tDirect.Seconds(), "direct-MB/s")
	b.ReportMetric(mb/tFront.Seconds(), "front-MB/s")
	b.ReportMetric(tDirect.Seconds()/tFront.Seconds(), "front/direct")
}
