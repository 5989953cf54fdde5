package publish

import (
	"bytes"
	"compress/gzip"
	"os"
	"sync"
	"sync/atomic"
)

// gzipWriters are reused across renders: a gzip.Writer allocates its compressor (about
// a megabyte, zeroed) at its first Write, which cost more than compressing a small
// document (the fleet simulator's profile under -race: compressor.init). Two are kept
// on a free list (gzipKept) before the pool: sync.Pool drops a quarter of what is put
// back under the race detector, on purpose, and empties at every collection, so the
// race-enabled tests built a new compressor for most renders (2.5 ms against 0.37 ms
// for an 8 KB body; without -race 12 µs either way). The list holds at most 2 MB.
var (
	gzipKept    = make(chan *gzip.Writer, 2)
	gzipWriters = sync.Pool{New: func() any {
		zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: never an error
		return zw
	}}
)

// gzipBytes is b gzipped at gzip.BestSpeed (the bytes every render serves gzipped).
func gzipBytes(b []byte) []byte {
	var zb bytes.Buffer
	var zw *gzip.Writer
	select {
	case zw = <-gzipKept:
	default:
		zw = gzipWriters.Get().(*gzip.Writer)
	}
	zw.Reset(&zb)
	zw.Write(b) // into a bytes.Buffer: never an error
	zw.Close()
	zw.Reset(nil)
	select {
	case gzipKept <- zw:
	default:
		gzipWriters.Put(zw)
	}
	return zb.Bytes()
}

// lazyGzip is a Rendered body's gzip body and its spill file, made at the first poll
// that accepts gzip (Rendered.Gzip, GzFile), once: concurrent first polls wait for
// the one that compresses, and every poll gets the same bytes. Most bodies are never
// asked for gzipped (the fleet simulator's, an in-process caller's, a poller that
// does not send Accept-Encoding), and compressing each render was most of the cost
// of a new revision's first poll under -race (BenchmarkFirstPollOfANewRevision).
// Nothing else changes: the gzip ETag is the identity body's hash (renderNow).
type lazyGzip struct {
	gzMu sync.Mutex
	made atomic.Bool // gz and gzFile are set, and never change again
	gz   []byte
	// gzFile holds gz on disk when spillGz is set (the cache keeps the body): "" when
	// spilling failed, or the body left the cache before gz was made (evicted).
	gzFile  string
	spillGz func([]byte) string
	evicted atomic.Bool
}

// gzipped makes r's gzip body (and its file) at the first call.
func (r *Rendered) gzipped() *lazyGzip {
	if !r.made.Load() {
		r.gzMu.Lock()
		if !r.made.Load() {
			r.gz = gzipBytes(r.body)
			if r.spillGz != nil && !r.evicted.Load() {
				r.gzFile = r.spillGz(r.gz)
			}
			r.made.Store(true)
			if r.gzFile != "" && r.evicted.Load() { // evicted while it was spilled
				os.Remove(r.gzFile)
			}
		}
		r.gzMu.Unlock()
	}
	return &r.lazyGzip
}

// evict removes r's gzip file when it was made (the cache let r go); one made after
// this is removed by gzipped. Either side sees the other's flag, so the file is never
// left behind; it may be removed twice (harmless).
func (r *Rendered) evict() {
	r.evicted.Store(true)
	if r.made.Load() && r.gzFile != "" {
		os.Remove(r.gzFile)
	}
}
