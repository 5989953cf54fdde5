// Package dir is the directory backend of the fleet-state store: one file per key under
// a root directory, for one machine (or several processes on one machine).
//
// Layout: key "apps/shop.json" is the file <root>/apps/shop.json, each segment one file
// or directory name. A segment longer than a file name may be (255 bytes, NAME_MAX: a
// claim "domains/<host>.json" for a 253-byte host, a valid DNS name, has 258) is split
// at UTF-8 character boundaries into chunks of at most 200 bytes, one path component
// each: ".+<chunk>" for a chunk that more chunks follow (always a directory), ".=<chunk>"
// for the last one (the key's file, or the directory of the keys below it). So
// "domains/<258 bytes>" is the file <root>/domains/.+<its first 200 bytes>/.=<the other
// 58>. Keys whose segments all fit a name (every key an older version could store) keep
// their plain path: no migration. The mapping is a pure function of the key, so writes,
// the lock and reads work on it unchanged; List maps each path back to its key and
// ignores a path that is not the exact mapping of a valid key; Delete removes the ".+"
// and ".=" directories it leaves empty (an empty plain directory stays, harmless).
//
// Names starting with a dot are the backend's own: <root>/.lock (the cross-process
// lock), ".tmp-*" files (writes in flight) and the ".+" and ".=" chunks of long
// segments; store.CheckKey refuses keys with such segments, and List skips any other.
//
// ETags are the lowercase hex SHA-256 of the content, unquoted (64 characters): the same
// content always has the same etag, in every process, and no state besides the files is
// kept.
//
// Writes are atomic: the value goes to a temp file in the key's directory, is fsynced,
// renamed over the key, and the directory is fsynced. Readers therefore see the old or
// the new file, never a partial one, and need no lock. Every write (conditional or not)
// and every delete holds the store's lock around check-etag-then-rename: an in-process
// mutex plus flock(2) on <root>/.lock, so two goroutines, two Store values or two
// processes on one directory never lose an update.
//
// Errors: a missing key is store.ErrNotFound; a failed conditional write is
// store.ErrPreconditionFailed; any other I/O or permission failure wraps
// store.ErrUnavailable (a caller keeps what it last read); an invalid key wraps
// store.ErrInvalidKey.
package dir

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/scafo/ingress/node/store"
)

const (
	lockName   = ".lock"
	tempPrefix = ".tmp-"
	dirMode    = 0o700

	// maxName is the longest segment that is its own file name: NAME_MAX on Linux
	// (ext4, XFS, Btrfs, tmpfs) and the BSDs. Keeping it (not a lower "safe" length)
	// keeps every key that was ever storable at its old path.
	maxName = 255
	// chunkLen bounds the bytes of a long segment per path component.
	chunkLen = 200
	// moreMark and lastMark start the path components of a long segment's chunks: a
	// chunk that more chunks follow, and the last one.
	moreMark = ".+"
	lastMark = ".="
)

// Store is a directory-backed store.Store. Safe for concurrent use.
type Store struct {
	root string

	mu   sync.Mutex // serialises writers in this process; guards lock
	lock *os.File   // open <root>/.lock, flocked by writers
}

var _ store.Store = (*Store)(nil)

// New opens (creating if needed, mode 0700) the store rooted at root. It removes temp
// files that a crashed writer left behind, under the lock (so never a live writer's).
func New(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("dir store: root path is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("dir store: resolving root %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, dirMode); err != nil {
		return nil, fmt.Errorf("dir store: creating root %q: %w", abs, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("dir store: root %q: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("dir store: root %q is not a directory", abs)
	}
	s := &Store{root: abs}
	if err := s.openLock(); err != nil {
		return nil, fmt.Errorf("dir store: %w", err)
	}
	unlock, err := s.acquire(context.Background())
	if err != nil {
		s.lock.Close()
		return nil, fmt.Errorf("dir store: %w", err)
	}
	err = s.removeTemps()
	unlock()
	if err != nil {
		s.lock.Close()
		return nil, fmt.Errorf("dir store: removing stale temp files: %w", err)
	}
	return s, nil
}

// Root returns the absolute root directory.
func (s *Store) Root() string { return s.root }

// Close releases the lock file. The Store must not be used afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close()
	s.lock = nil
	return err
}

// ETag returns the etag this backend gives to value.
func ETag(value []byte) string {
	sum := sha256.Sum256(value)
	return hex.EncodeToString(sum[:])
}

// Get reads one object.
func (s *Store) Get(ctx context.Context, key string) (store.Object, error) {
	if err := s.check(ctx, key); err != nil {
		return store.Object{}, err
	}
	b, err := s.read(key)
	if err != nil {
		return store.Object{}, fmt.Errorf("dir store: get %q: %w", key, err)
	}
	return store.Object{Key: key, Value: b, ETag: ETag(b)}, nil
}

// GetIfChanged reads key unless its content still hashes to etag. The file is read
// either way (a local read is cheap); only the copy to the caller is saved.
func (s *Store) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	obj, err := s.Get(ctx, key)
	if err != nil {
		return store.Object{}, false, err
	}
	if etag != "" && obj.ETag == etag {
		return store.Object{}, false, nil
	}
	return obj, true, nil
}

// List returns every key under prefix with its etag, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dir store: list %q: %w", prefix, err)
	}
	if err := store.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("dir store: list: %w", err)
	}
	if err := s.rootPresent(); err != nil {
		return nil, fmt.Errorf("dir store: list %q: %w", prefix, err)
	}
	// Walk only the directory the prefix's complete segments name.
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(s.root, relPath(prefix[:i]))
	}
	var out []store.Entry
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && isNotFound(err) {
				return fs.SkipAll // nothing under that prefix
			}
			if p != start && errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return unavailable(err)
		}
		if p == s.root {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") && !isChunk(d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// Get follows symlinks, so List does too, for links to regular files.
			fi, err := os.Stat(p)
			if err != nil {
				if isNotFound(err) {
					return nil // dangling
				}
				return unavailable(err)
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return unavailable(err)
		}
		key, ok := keyOf(rel)
		if !ok || !strings.HasPrefix(key, prefix) {
			return nil
		}
		etag, err := s.etagOf(key) // hashed as read: a huge file costs no memory
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil // deleted between the walk and the read
			}
			return unavailable(err)
		}
		var mtime time.Time
		if fi, err := os.Stat(p); err == nil {
			mtime = fi.ModTime()
		}
		out = append(out, store.Entry{Key: key, ETag: etag, ModTime: mtime})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dir store: list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Put writes value at key under cond and returns the new etag.
func (s *Store) Put(ctx context.Context, key string, value []byte, cond store.Condition) (string, error) {
	if err := s.check(ctx, key); err != nil {
		return "", err
	}
	if cond.IfMatch != "" && cond.IfNoneMatch {
		return "", fmt.Errorf("dir store: put %q: IfMatch and IfNoneMatch are exclusive", key)
	}
	if len(value) > store.MaxObjectSize {
		return "", fmt.Errorf("dir store: put %q: %w: %d bytes", key, store.ErrTooLarge, len(value))
	}
	unlock, err := s.acquire(ctx)
	if err != nil {
		return "", fmt.Errorf("dir store: put %q: %w", key, err)
	}
	defer unlock()

	if err := s.checkCondition(key, cond.IfMatch, cond.IfNoneMatch); err != nil {
		return "", fmt.Errorf("dir store: put %q: %w", key, err)
	}
	if err := s.writeAtomic(key, value); err != nil {
		return "", fmt.Errorf("dir store: put %q: %w", key, err)
	}
	return ETag(value), nil
}

// Delete removes key; with a non-empty ifMatch only if its etag matches. The check and
// the removal happen under the store's lock, so a delete never removes a newer value.
func (s *Store) Delete(ctx context.Context, key, ifMatch string) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	unlock, err := s.acquire(ctx)
	if err != nil {
		return fmt.Errorf("dir store: delete %q: %w", key, err)
	}
	defer unlock()

	cur, err := s.etagOf(key)
	if err != nil {
		return fmt.Errorf("dir store: delete %q: %w", key, err)
	}
	if ifMatch != "" && cur != ifMatch {
		return fmt.Errorf("dir store: delete %q: %w", key, store.ErrPreconditionFailed)
	}
	p := s.path(key)
	if err := os.Remove(p); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("dir store: delete %q: %w", key, store.ErrNotFound)
		}
		return fmt.Errorf("dir store: delete %q: %w", key, unavailable(err))
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("dir store: delete %q: %w", key, unavailable(err))
	}
	s.removeEmptyChunks(filepath.Dir(p))
	return nil
}

// removeEmptyChunks removes dir and its parents while they are empty directories of
// long-segment chunks, so a long segment that held keys can become a key again.
// Best effort: the delete is done, and an empty directory left behind is harmless (it
// lists as nothing). Caller holds the lock, so no writer is filling one.
func (s *Store) removeEmptyChunks(dir string) {
	removed := false
	for dir != s.root && isChunk(filepath.Base(dir)) {
		if os.Remove(dir) != nil {
			break // not empty, or already gone
		}
		removed = true
		dir = filepath.Dir(dir)
	}
	if removed {
		syncDir(dir)
	}
}

func (s *Store) check(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dir store: %q: %w", key, err)
	}
	if err := store.CheckKey(key); err != nil {
		return fmt.Errorf("dir store: %w", err)
	}
	return nil
}

func (s *Store) path(key string) string {
	return filepath.Join(s.root, relPath(key))
}

// relPath maps a valid key (or its complete leading segments) to its path below the
// root; see Layout in the package doc.
func relPath(key string) string {
	if len(key) <= maxName {
		return filepath.FromSlash(key) // no segment can be long
	}
	var parts []string
	for seg := range strings.SplitSeq(key, "/") {
		if len(seg) <= maxName {
			parts = append(parts, seg)
			continue
		}
		for len(seg) > chunkLen {
			n := chunkLen
			for !utf8.RuneStart(seg[n]) {
				n--
			}
			parts = append(parts, moreMark+seg[:n])
			seg = seg[n:]
		}
		parts = append(parts, lastMark+seg)
	}
	return filepath.Join(parts...)
}

// keyOf maps a path below the root back to its key. ok is false unless rel is exactly
// relPath of a valid key: a stray name (".+x" alone, a chunk split elsewhere, a short
// segment under a chunk name) is nobody's key.
func keyOf(rel string) (key string, ok bool) {
	var segs []string
	var long strings.Builder
	inLong := false
	for part := range strings.SplitSeq(filepath.ToSlash(rel), "/") {
		switch {
		case strings.HasPrefix(part, moreMark):
			long.WriteString(part[len(moreMark):])
			inLong = true
		case strings.HasPrefix(part, lastMark):
			long.WriteString(part[len(lastMark):])
			segs = append(segs, long.String())
			long.Reset()
			inLong = false
		case inLong:
			return "", false
		default:
			segs = append(segs, part)
		}
	}
	if inLong {
		return "", false
	}
	key = strings.Join(segs, "/")
	if store.CheckKey(key) != nil || relPath(key) != filepath.Clean(rel) {
		return "", false
	}
	return key, true
}

// isChunk reports whether a file name is a long segment's chunk.
func isChunk(name string) bool {
	return len(name) > len(moreMark) && (strings.HasPrefix(name, moreMark) || strings.HasPrefix(name, lastMark))
}

// read returns the content at key: store.ErrNotFound if absent (or a directory), an
// error wrapping store.ErrUnavailable for any other failure, including a root that has
// vanished (a missing root is a broken store, not an empty one).
func (s *Store) read(key string) ([]byte, error) {
	b, err := readBounded(s.path(key))
	if err == nil || errors.Is(err, store.ErrTooLarge) {
		return b, err
	}
	if isNotFound(err) {
		if rerr := s.rootPresent(); rerr != nil {
			return nil, rerr
		}
		return nil, store.ErrNotFound
	}
	return nil, unavailable(err)
}

// readBounded reads the file at p, or answers store.ErrTooLarge without reading it
// when it is larger than store.MaxObjectSize.
func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: syscall.EISDIR}
	} else if err == nil && fi.Size() > store.MaxObjectSize {
		return nil, fmt.Errorf("%w: %d bytes", store.ErrTooLarge, fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, store.MaxObjectSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > store.MaxObjectSize {
		return nil, fmt.Errorf("%w: more than %d bytes", store.ErrTooLarge, store.MaxObjectSize)
	}
	return b, nil
}

// etagOf is the etag of key's content, hashed as it is read (an object too large to
// read has one too: a write or delete conditional on it works). Errors as read's.
func (s *Store) etagOf(key string) (string, error) {
	f, err := os.Open(s.path(key))
	if err != nil {
		if isNotFound(err) {
			if rerr := s.rootPresent(); rerr != nil {
				return "", rerr
			}
			return "", store.ErrNotFound
		}
		return "", unavailable(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return "", store.ErrNotFound
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", unavailable(err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (s *Store) rootPresent() error {
	fi, err := os.Stat(s.root)
	if err != nil {
		return unavailable(fmt.Errorf("store root: %w", err))
	}
	if !fi.IsDir() {
		return unavailable(fmt.Errorf("store root %s is not a directory", s.root))
	}
	return nil
}

// checkCondition evaluates a write condition against the current content. Caller holds
// the lock.
func (s *Store) checkCondition(key, ifMatch string, ifNoneMatch bool) error {
	if ifMatch == "" && !ifNoneMatch {
		return nil
	}
	cur, err := s.etagOf(key)
	switch {
	case err == nil:
		if ifNoneMatch {
			return fmt.Errorf("%w: create-only, but the key exists", store.ErrPreconditionFailed)
		}
		if cur != ifMatch {
			return fmt.Errorf("%w: etag moved", store.ErrPreconditionFailed)
		}
		return nil
	case errors.Is(err, store.ErrNotFound):
		if ifMatch != "" {
			return fmt.Errorf("%w: If-Match, but the key is absent", store.ErrPreconditionFailed)
		}
		return nil
	default:
		return err
	}
}

// writeAtomic replaces key's file with value: temp file in the same directory, fsync,
// rename, fsync of the directory. Caller holds the lock.
func (s *Store) writeAtomic(key string, value []byte) error {
	p := s.path(key)
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return fmt.Errorf("key is a directory holding other keys")
	}
	dir := filepath.Dir(p)
	if err := s.mkdirs(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return unavailable(err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(value); err != nil {
		return unavailable(err)
	}
	if err := f.Sync(); err != nil {
		return unavailable(err)
	}
	if err := f.Close(); err != nil {
		return unavailable(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return unavailable(err)
	}
	ok = true
	if err := syncDir(dir); err != nil {
		return unavailable(err)
	}
	return nil
}

// mkdirs creates dir and its missing parents below the root, fsyncing each parent that
// gained an entry so the new directories survive a crash.
func (s *Store) mkdirs(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is a key, not a directory", s.relKey(dir))
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir && strings.HasPrefix(parent, s.root) && parent != s.root {
		if err := s.mkdirs(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, dirMode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("a parent of %s is a key, not a directory", s.relKey(dir))
		}
		return unavailable(err)
	}
	if err := syncDir(parent); err != nil {
		return unavailable(err)
	}
	return nil
}

func (s *Store) relKey(p string) string {
	rel, err := filepath.Rel(s.root, p)
	if err != nil {
		return p
	}
	if key, ok := keyOf(rel); ok {
		return fmt.Sprintf("%q", key)
	}
	return fmt.Sprintf("%q", filepath.ToSlash(rel))
}

// removeTemps deletes ".tmp-*" files anywhere under the root. Caller holds the lock, so
// no live writer owns one.
func (s *Store) removeTemps() error {
	return filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), tempPrefix) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// isNotFound reports errors meaning "no file at that path": absent, a path through a
// regular file, or a directory where a file was expected.
func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

// unavailable wraps an I/O failure so callers see store.ErrUnavailable.
func unavailable(err error) error {
	if errors.Is(err, store.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}
