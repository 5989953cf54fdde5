package publish

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// TestTheGzipBodyIsMadeOnceAtTheFirstAsk: a body's gzip body is made at the first poll
// that asks for it (lazyGzip), once across concurrent first polls (run under -race):
// every poll gets the same bytes and the same spill file, which hold the body
// gzipped. The cache letting the body go removes the file, also when the gzip body is
// first asked for afterwards (then none is spilled; the bytes in memory are served).
func TestTheGzipBodyIsMadeOnceAtTheFirstAsk(t *testing.T) {
	st, fo := fleet.GenerateState(50, 0), fleet.GenerateOptions()
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fo, nil)
	spill := t.TempDir()
	p := newPublisher(render.Options{}, spill)
	p.Publish(doc, time.Now())
	body := func(format string) *Rendered {
		t.Helper()
		r, err := p.Body(p.Current(), Request{Format: format, Ingress: "edge-0"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := body(api.FormatTraefik)
	if r.made.Load() || r.file == "" {
		t.Fatalf("rendered: gzip made %v, identity file %q: want no gzip yet, the identity body spilled", r.made.Load(), r.file)
	}
	var wg sync.WaitGroup
	gzs, files := make([][]byte, 8), make([]string, 8)
	for i := range gzs {
		wg.Go(func() { gzs[i], files[i] = r.Gzip(), r.GzFile() })
	}
	wg.Wait()
	for i := range gzs {
		if len(gzs[i]) == 0 || &gzs[i][0] != &gzs[0][0] || files[i] != files[0] {
			t.Fatalf("poll %d got another gzip body (%d bytes, file %q) than poll 0 (%d bytes, file %q)", i, len(gzs[i]), files[i], len(gzs[0]), files[0])
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(gzs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := io.ReadAll(zr); err != nil || !bytes.Equal(plain, r.Body()) {
		t.Fatalf("the gzip body is not the body gzipped (%v)", err)
	}
	if b, err := os.ReadFile(files[0]); err != nil || !bytes.Equal(b, gzs[0]) {
		t.Fatalf("the gzip spill file %q does not hold the gzip body (%v)", files[0], err)
	}
	if body(api.FormatTraefik) != r || r.Gzip() == nil || &r.Gzip()[0] != &gzs[0][0] {
		t.Fatal("the cached body's gzip body was made again")
	}
	p.cache.evicted(r)
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Fatalf("an evicted body's gzip file is left: %v", err)
	}

	// Let go before the gzip body was asked for: nothing spilled, served from memory.
	r2 := body(api.FormatRoutes)
	p.cache.evicted(r2)
	if r2.GzFile() != "" || len(r2.Gzip()) == 0 {
		t.Fatalf("a body let go before its gzip was asked for: file %q, %d gzip bytes", r2.GzFile(), len(r2.Gzip()))
	}
	if left, _ := os.ReadDir(spill); len(left) != 0 {
		t.Fatalf("the spill directory holds %d files after both bodies were let go, want none", len(left))
	}
}

// The cache lets the body go while its first gzip poll writes the spill file (after
// gzipped's evicted check, before made is set, so evict cannot see the file): gzipped
// removes it, it is not left behind (hostile review 7, F2).
func TestAnEvictionDuringTheGzipSpillRemovesTheFile(t *testing.T) {
	dir := t.TempDir()
	p := &Publisher{spillDir: dir}
	r := &Rendered{body: bytes.Repeat([]byte(`{"routes":[]}`), 2000)}
	r.spillGz = func(b []byte) string {
		f := p.spill(b)
		r.evict() // lands here
		return f
	}
	if r.GzFile() == "" {
		t.Fatal("the gzip body was not spilled")
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("%d spill files left by a gzip spilled while its body was evicted", len(left))
	}
}
