// Package store is the fleet-state store: one small interface, two backends (a
// directory, an S3-compatible bucket), the same object layout on both (see package
// fleet for the keys).
//
// Every write is atomic and conditional. Readers see either the old or the new value of
// an object, never a partial one, and two writers that race on one key never lose an
// update: one wins, the other gets ErrPreconditionFailed and retries on the new etag.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Backends wrap them; test with errors.Is.
var (
	// ErrNotFound: no object at that key.
	ErrNotFound = errors.New("store: object not found")
	// ErrPreconditionFailed: a conditional write lost (If-Match did not match, or
	// create-only found an object).
	ErrPreconditionFailed = errors.New("store: precondition failed")
	// ErrUnavailable: the backend could not be reached or failed; nothing was changed
	// that the caller can observe (writes are atomic).
	ErrUnavailable = errors.New("store: unavailable")
	// ErrTooLarge: the object is larger than MaxObjectSize. A read does not load it
	// (a corrupt or hostile object must not exhaust every node's memory); a write of
	// one is refused.
	ErrTooLarge = errors.New("store: object larger than MaxObjectSize")
)

// MaxObjectSize bounds the objects a backend reads and writes. The largest the fleet
// writes is a claim with routing.MaxPaths prefixes (about 3 MiB).
const MaxObjectSize = 16 << 20

// Object is one stored value and its etag.
type Object struct {
	Key   string
	Value []byte
	// ETag identifies this exact content version of the object. Opaque; compare for
	// equality only.
	ETag string
}

// Entry is a listed key, its etag and when it was last written.
type Entry struct {
	Key  string
	ETag string
	// ModTime is when the object was last written, by the store's clock (a file's
	// mtime; S3's LastModified). A rewrite moves it even when nothing else is read, so
	// a LIST tells liveness without a GET. Zero when the backend does not know.
	ModTime time.Time
}

// Condition restricts a write.
type Condition struct {
	// IfMatch, when set, makes the write succeed only if the current etag equals it.
	IfMatch string
	// IfNoneMatch, when true, makes the write create-only: it fails if the key exists.
	IfNoneMatch bool
}

// Store is the fleet-state store.
type Store interface {
	// Get reads one object. ErrNotFound if absent; ErrTooLarge, without reading it,
	// above MaxObjectSize.
	Get(ctx context.Context, key string) (Object, error)
	// GetIfChanged reads key unless its etag is still etag (a conditional read: a 304
	// on S3). changed is false, with a zero Object, when the etag still matches.
	// ErrNotFound if absent.
	GetIfChanged(ctx context.Context, key, etag string) (obj Object, changed bool, err error)
	// List returns every key under prefix with its etag, sorted by key.
	List(ctx context.Context, prefix string) ([]Entry, error)
	// Put writes value at key under cond and returns the new etag. ErrTooLarge above
	// MaxObjectSize.
	Put(ctx context.Context, key string, value []byte, cond Condition) (etag string, err error)
	// Delete removes key; with a non-empty ifMatch only if the etag matches.
	// ErrNotFound if absent.
	Delete(ctx context.Context, key, ifMatch string) error
}
