package certstore

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/node/store"
)

// pruneEmptyDirs removes FileStorage's empty directories below root: a directory here
// exists only while a value lies below it (the documented difference).
func pruneEmptyDirs(t *testing.T, root string) {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := len(dirs) - 1; i >= 0; i-- { // deepest first
		if es, err := os.ReadDir(dirs[i]); err == nil && len(es) == 0 {
			if err := os.Remove(dirs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMatchesFileStorage runs one random sequence of operations on CertMagic's own
// FileStorage and on this Storage and compares every answer: Load, Stat (terminal or
// not, size), Exists, and List recursive and not, in order. Operations FileStorage
// refuses (a value where a directory is, a directory where a value is) are not applied
// to either; empty directories FileStorage leaves after a delete are pruned.
func TestMatchesFileStorage(t *testing.T) {
	segs := []string{"a", "b", "a.b", "ab", "*", "x@y:z", "%2F", "ü", "c d", "~!"}
	eachBackend(t, func(t *testing.T, st store.Store, _ func(t *testing.T) store.Store) {
		ctx := context.Background()
		root := t.TempDir()
		fsx := &certmagic.FileStorage{Path: root}
		ours := New(st, quietOpts(Options{}))
		rng := rand.New(rand.NewPCG(14, 1))
		randKey := func() string {
			n := 1 + rng.IntN(3)
			parts := make([]string, n)
			for i := range parts {
				parts[i] = segs[rng.IntN(len(segs))]
			}
			return strings.Join(parts, "/")
		}
		ops := 400
		if testing.Short() {
			ops = 120
		}
		var applied, compared int
		for i := range ops {
			key := randKey()
			switch op := rng.IntN(10); {
			case op < 4: // store
				val := []byte(strings.Repeat(key, 1+rng.IntN(3)))
				if err := fsx.Store(ctx, key, val); err != nil {
					pruneEmptyDirs(t, root) // MkdirAll may have left some
					continue
				}
				applied++
				if err := ours.Store(ctx, key, val); err != nil {
					t.Fatalf("op %d: Store(%q): %v", i, key, err)
				}
			case op < 5: // delete
				if err := fsx.Delete(ctx, key); err != nil {
					continue
				}
				pruneEmptyDirs(t, root)
				applied++
				if err := ours.Delete(ctx, key); err != nil {
					t.Fatalf("op %d: Delete(%q): %v", i, key, err)
				}
			case op < 6: // load
				fv, ferr := fsx.Load(ctx, key)
				ov, oerr := ours.Load(ctx, key)
				compared++
				if (ferr == nil) != (oerr == nil) || string(fv) != string(ov) ||
					errors.Is(ferr, fs.ErrNotExist) && !errors.Is(oerr, fs.ErrNotExist) {
					t.Fatalf("op %d: Load(%q): FileStorage %q, %v; ours %q, %v", i, key, fv, ferr, ov, oerr)
				}
			case op < 8: // stat and exists
				fi, ferr := fsx.Stat(ctx, key)
				oi, oerr := ours.Stat(ctx, key)
				compared++
				if (ferr == nil) != (oerr == nil) || fi.IsTerminal != oi.IsTerminal || fi.Key != oi.Key ||
					(fi.IsTerminal && fi.Size != oi.Size) {
					t.Fatalf("op %d: Stat(%q): FileStorage %+v, %v; ours %+v, %v", i, key, fi, ferr, oi, oerr)
				}
				// FileStorage.Exists says true for "a/b" when "a" is a file (ENOTDIR is not
				// ErrNotExist); compare where its answer is sound.
				if _, err := os.Stat(fsx.Filename(key)); err == nil || errors.Is(err, fs.ErrNotExist) {
					if fe, oe := fsx.Exists(ctx, key), ours.Exists(ctx, key); fe != oe {
						t.Fatalf("op %d: Exists(%q): FileStorage %v, ours %v", i, key, fe, oe)
					}
				}
			default: // list
				prefix := key
				if rng.IntN(4) == 0 {
					prefix = ""
				} else if j := strings.LastIndexByte(key, '/'); j > 0 && rng.IntN(2) == 0 {
					prefix = key[:j]
				}
				rec := rng.IntN(2) == 0
				fl, ferr := fsx.List(ctx, prefix, rec)
				ol, oerr := ours.List(ctx, prefix, rec)
				compared++
				if (ferr == nil) != (oerr == nil) || !slices.Equal(fl, ol) ||
					errors.Is(ferr, fs.ErrNotExist) && !errors.Is(oerr, fs.ErrNotExist) {
					t.Fatalf("op %d: List(%q, %v):\nFileStorage %q, %v\nours        %q, %v", i, prefix, rec, fl, ferr, ol, oerr)
				}
			}
		}
		// The final state, whole: every key in one recursive list.
		fl, ferr := fsx.List(ctx, "", true)
		ol, oerr := ours.List(ctx, "", true)
		if ferr != nil || oerr != nil || !slices.Equal(fl, ol) {
			t.Fatalf("final List: FileStorage %q, %v; ours %q, %v", fl, ferr, ol, oerr)
		}
		if applied < ops/4 || compared < ops/4 || len(ol) < 5 {
			t.Fatalf("the sequence exercised too little: %d writes applied, %d reads compared, %d keys at the end", applied, compared, len(ol))
		}
		t.Logf("%d writes applied, %d reads compared, %d keys at the end", applied, compared, len(ol))
	})
}
