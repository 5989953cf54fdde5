package publish

import (
	"bytes"
	"compress/gzip"
	"sync"
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
