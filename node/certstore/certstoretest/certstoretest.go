// Package certstoretest is the CertMagic storage suite, written once and run against
// every certmagic.Storage of the project: the fleet store's adapter (node/certstore),
// the HTTP client of a node's storage API (node/storageclient) and the Caddy module's
// split storage (deploy/caddy/scafo, a module of its own, which is why this package is
// not internal).
package certstoretest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// Oracle is one random sequence of operations that MatchesFileStorage runs on
// CertMagic's FileStorage, the reference, and on the storage under test.
type Oracle struct {
	Seed1, Seed2 uint64   // the sequence's seed
	Ops          int      // how many operations
	Tops         []string // a key's first segment is one of these (none: any of Segs)
	Segs         []string // the other segments (one to three of them)
	// RootList lists the root ("") now and then, and compares the final state through it
	// (else through the root of Tops[0]).
	RootList bool
	// KeepsEmptyDir says which of the empty directories FileStorage leaves behind (a
	// failed Store's MkdirAll, a Delete) the storage under test keeps too: a storage
	// over local files keeps them, the fleet's storages keep a directory only while a
	// value lies below it. The others are pruned from the reference. Nil: none kept.
	KeepsEmptyDir func(dir string) bool
	// EmptyListsAgree counts two empty listings as one answer when only one of them is
	// an error (a storage that merges listings of two places answers "nothing" where
	// FileStorage says "no such directory").
	EmptyListsAgree bool
}

// MatchesFileStorage writes through writer and reads through reader (one storage, or
// two views of one, as two nodes over one store) and compares every answer with
// FileStorage's: Load, Stat (terminal or not, size), Exists, and List recursive and
// not, in order. Operations FileStorage refuses (a value where a directory is, a
// directory where a value is) are applied to neither.
func MatchesFileStorage(t *testing.T, writer, reader certmagic.Storage, o Oracle) {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	fsx := &certmagic.FileStorage{Path: root}
	prune := func() { pruneEmptyDirs(t, root, o.KeepsEmptyDir) }
	rng := rand.New(rand.NewPCG(o.Seed1, o.Seed2))
	randKey := func() string {
		var parts []string
		if len(o.Tops) > 0 {
			parts = append(parts, o.Tops[rng.IntN(len(o.Tops))])
		}
		for range 1 + rng.IntN(3) {
			parts = append(parts, o.Segs[rng.IntN(len(o.Segs))])
		}
		return strings.Join(parts, "/")
	}
	var applied, compared int
	for i := range o.Ops {
		key := randKey()
		switch op := rng.IntN(10); {
		case op < 4: // store
			val := []byte(strings.Repeat(key, 1+rng.IntN(3)))
			if err := fsx.Store(ctx, key, val); err != nil {
				prune() // MkdirAll may have left some
				continue
			}
			applied++
			if err := writer.Store(ctx, key, val); err != nil {
				t.Fatalf("op %d: Store(%q): %v", i, key, err)
			}
		case op < 5: // delete
			if err := fsx.Delete(ctx, key); err != nil {
				continue
			}
			prune()
			applied++
			if err := writer.Delete(ctx, key); err != nil {
				t.Fatalf("op %d: Delete(%q): %v", i, key, err)
			}
		case op < 6: // load
			fv, ferr := fsx.Load(ctx, key)
			ov, oerr := reader.Load(ctx, key)
			compared++
			if (ferr == nil) != (oerr == nil) || string(fv) != string(ov) ||
				errors.Is(ferr, fs.ErrNotExist) && !errors.Is(oerr, fs.ErrNotExist) {
				t.Fatalf("op %d: Load(%q): FileStorage %q, %v; tested %q, %v", i, key, fv, ferr, ov, oerr)
			}
		case op < 8: // stat and exists
			fi, ferr := fsx.Stat(ctx, key)
			oi, oerr := reader.Stat(ctx, key)
			compared++
			if (ferr == nil) != (oerr == nil) || fi.IsTerminal != oi.IsTerminal || fi.Key != oi.Key ||
				(fi.IsTerminal && fi.Size != oi.Size) || errors.Is(ferr, fs.ErrNotExist) && !errors.Is(oerr, fs.ErrNotExist) {
				t.Fatalf("op %d: Stat(%q): FileStorage %+v, %v; tested %+v, %v", i, key, fi, ferr, oi, oerr)
			}
			// FileStorage.Exists says true for "a/b" when "a" is a file (ENOTDIR is not
			// ErrNotExist); compare where its answer is sound.
			if _, err := os.Stat(fsx.Filename(key)); err == nil || errors.Is(err, fs.ErrNotExist) {
				if fe, oe := fsx.Exists(ctx, key), reader.Exists(ctx, key); fe != oe {
					t.Fatalf("op %d: Exists(%q): FileStorage %v, tested %v", i, key, fe, oe)
				}
			}
		default: // list
			prefix := key
			if o.RootList && rng.IntN(4) == 0 {
				prefix = ""
			} else if j := strings.LastIndexByte(key, '/'); j > 0 && rng.IntN(2) == 0 {
				prefix = key[:j]
			}
			rec := rng.IntN(2) == 0
			fl, ferr := fsx.List(ctx, prefix, rec)
			ol, oerr := reader.List(ctx, prefix, rec)
			compared++
			bothEmpty := o.EmptyListsAgree && len(fl) == 0 && len(ol) == 0
			if (ferr == nil) != (oerr == nil) && !bothEmpty || !slices.Equal(fl, ol) ||
				errors.Is(ferr, fs.ErrNotExist) && !errors.Is(oerr, fs.ErrNotExist) && !bothEmpty {
				t.Fatalf("op %d: List(%q, %v):\nFileStorage %q, %v\ntested      %q, %v", i, prefix, rec, fl, ferr, ol, oerr)
			}
		}
	}
	// The final state, whole: every key in one recursive list.
	top := ""
	if !o.RootList {
		top = o.Tops[0]
	}
	fl, ferr := fsx.List(ctx, top, true)
	ol, oerr := reader.List(ctx, top, true)
	if ferr != nil || oerr != nil || !slices.Equal(fl, ol) {
		t.Fatalf("final List(%q): FileStorage %q, %v; tested %q, %v", top, fl, ferr, ol, oerr)
	}
	if applied < o.Ops/4 || compared < o.Ops/4 || len(ol) < 5 {
		t.Fatalf("the sequence exercised too little: %d writes applied, %d reads compared, %d keys at the end", applied, compared, len(ol))
	}
	t.Logf("%d writes applied, %d reads compared, %d keys at the end", applied, compared, len(ol))
}

// pruneEmptyDirs removes FileStorage's empty directories below root, deepest first,
// but those keep holds for (their key, slash-separated).
func pruneEmptyDirs(t *testing.T, root string, keep func(dir string) bool) {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root {
			if rel, _ := filepath.Rel(root, p); keep == nil || !keep(filepath.ToSlash(rel)) {
				dirs = append(dirs, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if es, err := os.ReadDir(dirs[i]); err == nil && len(es) == 0 {
			if err := os.Remove(dirs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Locks has workers goroutines behind each storage (each, say, on its own node)
// increment one counter under one lock, rounds times each: no update is lost and no
// two critical sections overlap. key is where the counter is kept, lock the lock's
// name. First, while each storage holds the lock, every other one's TryLock (one
// attempt, made while no one else in its process wants the lock, so it asks the
// store) fails: a lock that admits a second holder fails here every time, whatever
// the scheduling of the workers after.
func Locks(t *testing.T, key, lock string, workers, rounds int, storages ...certmagic.Storage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i, holder := range storages {
		if err := holder.Lock(ctx, lock); err != nil {
			t.Fatal(err)
		}
		for j, other := range storages {
			if j == i {
				continue
			}
			tl, ok := other.(certmagic.TryLocker)
			if !ok {
				t.Fatalf("%T is not a certmagic.TryLocker", other)
			}
			got, err := tl.TryLock(ctx, lock)
			if got {
				err = errors.Join(fmt.Errorf("storage %d took lock %q while storage %d held it", j, lock, i), other.Unlock(ctx, lock))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := holder.Unlock(ctx, lock); err != nil {
			t.Fatal(err)
		}
	}
	if err := storages[0].Store(ctx, key, []byte("0")); err != nil {
		t.Fatal(err)
	}
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	errc := make(chan error, len(storages)*workers)
	for _, s := range storages {
		for range workers {
			wg.Go(func() {
				for range rounds {
					if err := s.Lock(ctx, lock); err != nil {
						errc <- err
						return
					}
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					v, err := s.Load(ctx, key)
					if err == nil {
						n, _ := strconv.Atoi(string(v))
						err = s.Store(ctx, key, []byte(strconv.Itoa(n+1)))
					}
					inside.Add(-1)
					if uerr := s.Unlock(ctx, lock); err == nil {
						err = uerr
					}
					if err != nil {
						errc <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	v, err := storages[len(storages)-1].Load(ctx, key)
	if want := strconv.Itoa(len(storages) * workers * rounds); err != nil || string(v) != want || overlaps.Load() != 0 {
		t.Fatalf("counter = %s (%v), want %s; %d overlapping critical sections", v, err, want, overlaps.Load())
	}
}
