// Package certstore is the fleet store's certificate namespace with CertMagic's Storage
// semantics (github.com/caddyserver/certmagic): every node, and every CertMagic user
// that reaches a node over /v1/storage, shares certificates, private keys and issuance
// locks by sharing the fleet store (dir or S3).
//
// # Keys
//
// A CertMagic key is slash-separated ("certificates/acme-v02…/example.com/example.com.crt")
// and maps injectively onto one store key under DataPrefix ("certs/"): each segment is
// escaped (letters, digits, '-', '_', '@' and a non-leading '.' stay; every other byte is
// %XX), a value's last segment gets the mark '!', and an escaped segment over 200 bytes is
// shortened to a prefix, '~' and a 128-bit hash (MinIO refuses segments over 255 bytes).
// No key can leave the namespace: CheckKey refuses empty keys, leading or trailing
// slashes, empty, "." and ".." segments, backslashes, control characters (NUL included),
// invalid UTF-8, keys over MaxKeyLen bytes, and keys whose mapping exceeds the store's
// key limit. Anything else ('*', ':', '%', spaces, non-ASCII) round-trips.
//
// # Values
//
// Each value is stored in an envelope (see envelope.go) that records its key, when it was
// written (by the writer's clock), its size and its SHA-256; at most Options.MaxValueSize
// bytes (default 1 MiB). A read that finds an object that is not a valid envelope, or
// whose key differs, returns ErrCorrupt.
//
// # Directories
//
// As in CertMagic's FileStorage, a directory is a key that prefixes other keys, on
// segment boundaries ("a" prefixes "a/b", not "ab"). Unlike a file system, a directory
// exists only while some value lies below it (deleting the last value removes it), and a
// key can be a value and a directory at once (Store("a") and Store("a/b") both succeed;
// Stat("a") reports the value). List returns keys in the order of a depth-first walk
// with names sorted bytewise (FileStorage's order); recursive lists include the
// directories, as FileStorage's do.
//
// # Locks
//
// See lock.go: a lock is one store object under LockPrefix, taken with create-only
// writes and compare-and-swap, held under a lease that the holder renews in the
// background, taken over once the lease has run out.
package certstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/node/store"
)

// Defaults for Options.
const (
	DefaultLockLease    = 2 * time.Minute
	DefaultMaxValueSize = 1 << 20
	// DefaultMaxLockLease bounds the lease an AcquireLock caller may ask for.
	DefaultMaxLockLease = time.Hour
)

// ErrValueTooLarge: a value over Options.MaxValueSize.
var ErrValueTooLarge = errors.New("certstore: value too large")

// Options configure a Storage. The zero value works (see each field's default).
type Options struct {
	// LockLease is how long a lock taken by Lock or TryLock stays valid without
	// renewal; the holder renews it every RenewInterval while it holds it, so a holder
	// that died is taken over at most LockLease after its last renewal. Default 2m.
	LockLease time.Duration
	// RenewInterval is how often a held lock is renewed. Default LockLease/3.
	RenewInterval time.Duration
	// Owner names this holder in lock objects (the node's name), for diagnostics; the
	// identity that Unlock checks is a random token per acquisition. Default "node".
	Owner string
	// MaxValueSize bounds a stored value in bytes. Default 1 MiB.
	MaxValueSize int
	// MaxLockLease bounds the lease an AcquireLock caller may ask for. Default 1h.
	MaxLockLease time.Duration
	// PollMin and PollMax bound the backoff between attempts of a blocked Lock.
	// Defaults 100ms and 2s.
	PollMin, PollMax time.Duration
	// Logger receives lock takeovers, lost locks and skipped foreign objects. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.LockLease <= 0 {
		o.LockLease = DefaultLockLease
	}
	if o.Owner == "" {
		o.Owner = "node"
	}
	if o.MaxValueSize <= 0 {
		o.MaxValueSize = DefaultMaxValueSize
	}
	if o.MaxLockLease <= 0 {
		o.MaxLockLease = DefaultMaxLockLease
	}
	if o.MaxLockLease < o.LockLease {
		o.MaxLockLease = o.LockLease
	}
	// RenewInterval, PollMin and PollMax are the LockManager's: it defaults them.
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Storage is the certificate namespace of a fleet store. It implements
// certmagic.Storage, certmagic.TryLocker and certmagic.LockLeaseRenewer, and LeaseOps
// (the one-shot lock operations /v1/storage/locks serves). Safe for concurrent use.
type Storage struct {
	st    store.Store
	opts  Options
	locks *LockManager
}

var (
	_ certmagic.Storage          = (*Storage)(nil)
	_ certmagic.TryLocker        = (*Storage)(nil)
	_ certmagic.LockLeaseRenewer = (*Storage)(nil)
	_ LeaseOps                   = (*Storage)(nil)
)

// New returns the certificate namespace of st.
func New(st store.Store, opts Options) *Storage {
	s := &Storage{st: st, opts: opts.withDefaults()}
	s.locks = NewLockManager(s, LockOptions{Lease: s.opts.LockLease, RenewInterval: s.opts.RenewInterval,
		PollMin: s.opts.PollMin, PollMax: s.opts.PollMax, Logger: s.opts.Logger})
	return s
}

// Lock takes lock name, waiting (polling with backoff) while another holder has it,
// until ctx is done; the lock is renewed in the background until Unlock (LockManager).
func (s *Storage) Lock(ctx context.Context, name string) error {
	if err := CheckLockName(name); err != nil {
		return err
	}
	return s.locks.Lock(ctx, name)
}

// TryLock makes one attempt at lock name.
func (s *Storage) TryLock(ctx context.Context, name string) (bool, error) {
	if err := CheckLockName(name); err != nil {
		return false, err
	}
	return s.locks.TryLock(ctx, name)
}

// Unlock releases lock name, taken by Lock or TryLock on this Storage.
func (s *Storage) Unlock(ctx context.Context, name string) error { return s.locks.Unlock(ctx, name) }

// RenewLockLease renews a lock this Storage holds now (see LockManager.RenewLockLease).
func (s *Storage) RenewLockLease(ctx context.Context, name string, d time.Duration) error {
	return s.locks.RenewLockLease(ctx, name, d)
}

// Options returns the options in force (defaults applied).
func (s *Storage) Options() Options { return s.opts }

// String names the storage in CertMagic's logs.
func (s *Storage) String() string { return "scafo-certstore:" + s.opts.Owner }

func notExist(op, key string) error {
	return fmt.Errorf("certstore: %s %q: %w", op, key, fs.ErrNotExist)
}

// Store puts value at key, overwriting any value there.
func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	_, err := s.StoreInfo(ctx, key, value)
	return err
}

// StoreInfo is Store, answering what Stat would now say of key.
func (s *Storage) StoreInfo(ctx context.Context, key string, value []byte) (certmagic.KeyInfo, error) {
	sk, err := dataKey(key, true)
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	if len(value) > s.opts.MaxValueSize {
		return certmagic.KeyInfo{}, fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), s.opts.MaxValueSize)
	}
	now := s.opts.Now().UTC()
	if _, err := s.st.Put(ctx, sk, seal(key, value, now), store.Condition{}); err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("certstore: store %q: %w", key, err)
	}
	return certmagic.KeyInfo{Key: key, Modified: now, Size: int64(len(value)), IsTerminal: true}, nil
}

// load reads the value at key with its header; fs.ErrNotExist when absent.
func (s *Storage) load(ctx context.Context, key string) (header, []byte, error) {
	sk, err := dataKey(key, true)
	if err != nil {
		return header{}, nil, err
	}
	obj, err := s.st.Get(ctx, sk)
	if errors.Is(err, store.ErrNotFound) {
		return header{}, nil, notExist("load", key)
	}
	if err != nil {
		return header{}, nil, fmt.Errorf("certstore: load %q: %w", key, err)
	}
	h, v, err := open(obj.Value)
	if err != nil {
		return header{}, nil, fmt.Errorf("certstore: load %q: %w", key, err)
	}
	if h.Key != key {
		return header{}, nil, fmt.Errorf("certstore: load %q: %w: object is for key %q", key, ErrCorrupt, h.Key)
	}
	return h, v, nil
}

// Load returns the value at key; an error wrapping fs.ErrNotExist when there is none.
func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	_, v, err := s.load(ctx, key)
	return v, err
}

// listBelow returns the store entries below directory key ("" for the root).
func (s *Storage) listBelow(ctx context.Context, key string) (string, []store.Entry, error) {
	p, err := dirPrefix(key)
	if err != nil {
		return "", nil, err
	}
	es, err := s.st.List(ctx, p)
	if err != nil {
		return "", nil, fmt.Errorf("certstore: list %q: %w", key, err)
	}
	return p, es, nil
}

// Delete removes the value at key and every value below it (a directory). A key that
// does not exist is not an error; an error means something may remain.
func (s *Storage) Delete(ctx context.Context, key string) error {
	sk, err := dataKey(key, true)
	if err != nil {
		return err
	}
	if err := s.st.Delete(ctx, sk, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("certstore: delete %q: %w", key, err)
	}
	_, below, err := s.listBelow(ctx, key)
	if err != nil {
		return fmt.Errorf("certstore: delete %q: %w", key, err)
	}
	for _, e := range below {
		if err := s.st.Delete(ctx, e.Key, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("certstore: delete %q: %w", key, err)
		}
	}
	return nil
}

// Exists reports whether key is a value or a directory. An invalid key or a store error
// reports false.
func (s *Storage) Exists(ctx context.Context, key string) bool {
	_, err := s.Stat(ctx, key)
	return err == nil
}

// Stat describes key: a value (IsTerminal, its size and write time) or a directory
// (not terminal, size 0, the newest store time of a value below it). An error wrapping
// fs.ErrNotExist when it is neither.
func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	h, v, err := s.load(ctx, key)
	if err == nil {
		return certmagic.KeyInfo{Key: key, Modified: h.Modified, Size: int64(len(v)), IsTerminal: true}, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return certmagic.KeyInfo{}, err
	}
	_, below, err := s.listBelow(ctx, key)
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	if len(below) == 0 {
		return certmagic.KeyInfo{}, notExist("stat", key)
	}
	var newest time.Time
	for _, e := range below {
		if e.ModTime.After(newest) {
			newest = e.ModTime
		}
	}
	return certmagic.KeyInfo{Key: key, Modified: newest}, nil
}

// List returns the keys below prefix ("" for the whole namespace): its children, or
// with recursive every value and directory below it, in FileStorage's order. A prefix
// that is neither a directory nor a value is an error wrapping fs.ErrNotExist; a value
// has no children (an empty list), as in FileStorage.
func (s *Storage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	p, below, err := s.listBelow(ctx, prefix)
	if err != nil {
		return nil, err
	}
	if len(below) == 0 && prefix != "" {
		if _, _, err := s.load(ctx, prefix); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, notExist("list", prefix)
			}
			return nil, err
		}
		return []string{}, nil
	}
	names := newNamer(s, ctx)
	seen := map[string]bool{}
	var out []string
	for _, e := range below {
		rel, ok := strings.CutPrefix(e.Key, p)
		if !ok {
			continue
		}
		segs, ok := names.decode(e.Key, strings.Split(rel, "/"))
		if !ok {
			continue
		}
		if !recursive && len(segs) > 1 {
			segs = segs[:1]
		}
		for i := range segs {
			k := joinKey(prefix, segs[:i+1])
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	if names.err != nil {
		return nil, names.err
	}
	slices.SortFunc(out, compareKeys)
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func joinKey(prefix string, segs []string) string {
	if prefix == "" {
		return strings.Join(segs, "/")
	}
	return prefix + "/" + strings.Join(segs, "/")
}

// compareKeys orders keys as a depth-first walk with names sorted bytewise: by segments.
func compareKeys(a, b string) int {
	for {
		sa, ra, moreA := strings.Cut(a, "/")
		sb, rb, moreB := strings.Cut(b, "/")
		if c := strings.Compare(sa, sb); c != 0 {
			return c
		}
		switch {
		case !moreA && !moreB:
			return 0
		case !moreA:
			return -1
		case !moreB:
			return 1
		}
		a, b = ra, rb
	}
}

// namer decodes listed store keys back to CertMagic keys, reading an object's header
// when a segment was hashed; what one header tells of a hashed directory serves every
// other key below it.
type namer struct {
	s     *Storage
	ctx   context.Context
	err   error
	known map[string][]string // store segments up to a hashed one, joined → key segments
}

func newNamer(s *Storage, ctx context.Context) *namer {
	return &namer{s: s, ctx: ctx, known: map[string][]string{}}
}

// decode maps the segments of a listed store key (below the listed prefix) to key
// segments. ok is false for an object this namespace did not write (skipped).
func (n *namer) decode(storeKey string, segs []string) ([]string, bool) {
	last := len(segs) - 1
	lastSeg, isFile := strings.CutSuffix(segs[last], fileMark)
	if !isFile {
		n.s.opts.Logger.Warn("certstore: skipping a foreign object in the namespace", "key", storeKey)
		return nil, false
	}
	out := make([]string, len(segs))
	lastHashed := -1
	for i, raw := range segs {
		if i == last {
			raw = lastSeg
		}
		seg, h, ok := unescapeSegment(raw)
		if !ok {
			n.s.opts.Logger.Warn("certstore: skipping a foreign object in the namespace", "key", storeKey)
			return nil, false
		}
		if h {
			lastHashed = i
		}
		out[i] = seg
	}
	if lastHashed < 0 {
		return out, true
	}
	memo := strings.Join(segs[:lastHashed+1], "/")
	if known, ok := n.known[memo]; ok {
		copy(out, known)
		return out, true
	}
	// A shortened segment: the object's header knows its key.
	obj, err := n.s.st.Get(n.ctx, storeKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false // deleted since the list
	}
	if err != nil {
		if n.err == nil {
			n.err = fmt.Errorf("certstore: list: reading %q: %w", storeKey, err)
		}
		return nil, false
	}
	h, _, err := open(obj.Value)
	if err != nil {
		n.s.opts.Logger.Warn("certstore: skipping a corrupt object in the namespace", "key", storeKey, "error", err)
		return nil, false
	}
	full, err := dataKey(h.Key, true)
	if err != nil || full != storeKey {
		n.s.opts.Logger.Warn("certstore: skipping an object whose header names another key", "key", storeKey)
		return nil, false
	}
	all := strings.Split(h.Key, "/")
	out = all[len(all)-len(segs):]
	n.known[memo] = out[:lastHashed+1]
	return out, true
}
