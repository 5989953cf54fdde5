package publish

import (
	"bytes"
	"compress/gzip"
	"sync"
)

// gzipWriters are reused across renders: a gzip.Writer allocates its compressor (about
// a megabyte, zeroed) at its first Write, which cost more than compressing a small
// document (the fleet simulator's profile under -race: compressor.init).
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: never an error
	return zw
}}

// gzipBytes is b gzipped at gzip.BestSpeed (the bytes every render serves gzipped).
func gzipBytes(b []byte) []byte {
	var zb bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&zb)
	zw.Write(b) // into a bytes.Buffer: never an error
	zw.Close()
	zw.Reset(nil)
	gzipWriters.Put(zw)
	return zb.Bytes()
}
