package dir_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/node/store/storetest"
)

func newStore(t *testing.T) *dir.Store {
	t.Helper()
	s, err := dir.New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.RunOptions(t, func(t *testing.T) store.Store { return newStore(t) }, storetest.Options{LongSegments: true, ETag: dir.ETag,
		PutRaw: func(t *testing.T, s store.Store, key string, value []byte) {
			p := filepath.Join(s.(*dir.Store).Root(), filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, value, 0o600); err != nil {
				t.Fatal(err)
			}
		}})
}

// The on-disk layout of the package doc: short keys at their plain path, a segment
// over 255 bytes as ".+" chunks of at most 200 bytes ending in a ".=" chunk, no name
// longer than 255 bytes; List ignores names that are not the exact encoding of a key.
func TestLongSegmentLayout(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	root := s.Root()
	long := strings.Repeat("é", 100) + strings.Repeat("x", 258) // 458 bytes; byte 200 is a rune start
	odd := "z" + strings.Repeat("é", 150)                       // 301 bytes; byte 200 is not
	edge := strings.Repeat("y", 255)                            // the longest plain name
	for _, k := range []string{"apps/shop.json", "a/" + long, "b/" + odd + "/c.json", edge} {
		if _, err := s.Put(ctx, k, []byte(k[:1]), store.Condition{}); err != nil {
			t.Fatalf("Put(%.30q…): %v", k, err)
		}
	}
	for k, p := range map[string]string{
		"apps/shop.json":       "apps/shop.json",
		"a/" + long:            "a/.+" + long[:200] + "/.+" + long[200:400] + "/.=" + long[400:],
		"b/" + odd + "/c.json": "b/.+" + odd[:199] + "/.=" + odd[199:] + "/c.json",
		edge:                   edge,
	} {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil || string(b) != k[:1] {
			t.Errorf("key %.30q…: file %.40q… = %q, %v; want %q", k, p, b, err, k[:1])
		}
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && len(d.Name()) > 255 {
			t.Errorf("name of %d bytes: %.40q…", len(d.Name()), d.Name())
		}
		return err
	})

	// Names that no key maps to: a lone chunk file, a plain name after a ".+" chunk,
	// a segment split at the wrong place, a ".=" chunk of a short segment.
	for _, p := range []string{
		"a/.+stray",
		"a/.+" + long[:200] + "/plain",
		"a/.+" + long[:100] + "/.+" + long[100:300] + "/.=" + long[300:],
		".=short",
		"apps/.=" + strings.Repeat("q", 10),
		"apps/.hidden", ".git/config", // hidden names: not keys either
	} {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("stray"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range got {
		keys = append(keys, e.Key)
	}
	if want := []string{"a/" + long, "apps/shop.json", "b/" + odd + "/c.json", edge}; !slices.Equal(keys, want) {
		t.Errorf("List = %.60q, want %.60q", keys, want)
	}

	// Temp files a crashed writer left (at the root, in a directory, in a chunk
	// directory) are removed by New.
	temps := []string{filepath.Join(root, "b", ".+"+odd[:199], ".tmp-1"), filepath.Join(root, "apps", ".tmp-123"), filepath.Join(root, ".tmp-9")}
	for _, tmp := range temps {
		if err := os.WriteFile(tmp, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := dir.New(root)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	for _, tmp := range temps {
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temp file %s: stat err = %v, want not-exist", tmp, err)
		}
	}
}

// A key and a directory of keys clash with clear errors naming the key, for a short
// segment and for a long one (its chunks); a delete removes the chunk directories it
// empties, so the long segment can then be a key.
func TestKeyAndDirectoryClashAreClearErrors(t *testing.T) {
	for _, dirKey := range []string{"apps", "a/" + strings.Repeat("l", 300)} {
		s := newStore(t)
		ctx := t.Context()
		key := dirKey + "/b.json"
		if _, err := s.Put(ctx, key, []byte("x"), store.Condition{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, dirKey); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%.20q…), a directory of keys: err = %v, want ErrNotFound", dirKey, err)
		}
		if _, err := s.Put(ctx, dirKey, []byte("x"), store.Condition{}); err == nil || !strings.Contains(err.Error(), "directory") {
			t.Errorf("Put(%.20q…) over a directory of keys: err = %v, want a directory clash", dirKey, err)
		}
		if _, err := s.Put(ctx, key+"/x", []byte("x"), store.Condition{}); err == nil || !strings.Contains(err.Error(), "is a key") {
			t.Errorf("Put(%.20q…/x) under a key: err = %v, want a key clash", key, err)
		} else if !strings.Contains(err.Error(), key) {
			t.Errorf("clash error names an encoded path, not the key: %v", err)
		}
		if _, err := s.Get(ctx, key+"/x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%.20q…/x) err = %v, want ErrNotFound", key, err)
		}
	}
	s := newStore(t)
	long := "a/" + strings.Repeat("l", 300)
	if _, err := s.Put(t.Context(), long+"/b.json", []byte("x"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), long+"/b.json", ""); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(filepath.Join(s.Root(), "a")); err != nil || len(entries) != 0 {
		t.Errorf("a/ after the delete holds %v (%v), want nothing", entries, err)
	}
	if _, err := s.Put(t.Context(), long, []byte("x"), store.Condition{}); err != nil {
		t.Fatalf("Put(long) after its keys were deleted: %v", err)
	}
}

const helperEnv = "SCAFO_TEST_DIR_STORE_HELPER" // "<root>,<increments>"

// TestCrossProcessCASLosesNoUpdate runs two copies of this test binary (see
// TestHelperProcessIncrements) that increment one counter in one directory, while this
// process increments it too; the final count must equal the sum of all increments.
func TestCrossProcessCASLosesNoUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	root := t.TempDir()
	const perProcess = 150
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 2 {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcessIncrements$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", helperEnv, root, perProcess))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, &out)
	}
	s, err := dir.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range perProcess {
		if _, err := store.BumpSerial(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process %d: %v\n%s", i, err, outs[i])
		}
		if !strings.Contains(outs[i].String(), fmt.Sprintf("helper: %d increments", perProcess)) {
			t.Fatalf("helper process %d did not report its increments (did the -test.run filter match?):\n%s", i, outs[i])
		}
	}
	n, _, err := store.ReadSerial(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(3 * perProcess); n != want {
		t.Fatalf("serial after 3 processes × %d increments = %d, want %d (an update was lost)", perProcess, n, want)
	}
}

// TestHelperProcessIncrements is not a test: it is the child process of
// TestCrossProcessCASLosesNoUpdate, and does nothing without its environment variable.
func TestHelperProcessIncrements(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process for TestCrossProcessCASLosesNoUpdate")
	}
	root, countStr, _ := strings.Cut(spec, ",")
	count, err := strconv.Atoi(countStr)
	if err != nil {
		t.Fatalf("%s=%q: %v", helperEnv, spec, err)
	}
	s, err := dir.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range count {
		if _, err := store.BumpSerial(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("helper: %d increments\n", count)
}

// A Put leaves one file holding the value at the key's path and no temp file, in a
// private directory (0700, the file 0600), and answers the hex SHA-256 of the value.
func TestAPutIsOnePrivateFileHoldingTheValue(t *testing.T) {
	s := newStore(t)
	var etag string
	for _, v := range []string{"0", "1", "hello"} {
		var err error
		if etag, err = s.Put(t.Context(), "apps/shop.json", []byte(v), store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	if want := "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"; etag != want {
		t.Errorf("etag = %q, want %q", etag, want)
	}
	entries, err := os.ReadDir(filepath.Join(s.Root(), "apps"))
	if err != nil || len(entries) != 1 || entries[0].Name() != "shop.json" {
		t.Fatalf("apps/ holds %v (%v), want only shop.json", entries, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.Root(), "apps", "shop.json")); err != nil || string(b) != "hello" {
		t.Fatalf("file = %q, %v; want %q", b, err, "hello")
	}
	for p, want := range map[string]os.FileMode{"apps": 0o700, "apps/shop.json": 0o600} {
		if fi, err := os.Stat(filepath.Join(s.Root(), p)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %o", p, fi, err, want)
		}
	}
}

// A failure that is not "absent" must read as unavailable, never as not-found or an
// empty list: the node keeps its last document instead of withdrawing routes.
func TestIOErrorsAreUnavailableNotNotFound(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, root string)
		key   string
		put   bool // Put is refused too
	}{
		{
			name: "symlink loop",
			setup: func(t *testing.T, root string) {
				os.MkdirAll(filepath.Join(root, "apps"), 0o700)
				if err := os.Symlink("loop.json", filepath.Join(root, "apps", "loop.json")); err != nil {
					t.Fatal(err)
				}
			},
			key: "apps/loop.json",
		},
		{
			name:  "root removed",
			setup: func(t *testing.T, root string) { os.RemoveAll(root) },
			key:   "apps/shop.json",
		},
		{
			name: "root replaced by a file",
			setup: func(t *testing.T, root string) {
				os.RemoveAll(root)
				os.WriteFile(root, []byte("x"), 0o600)
			},
			key: "apps/shop.json",
		},
		{
			name: "unreadable directory",
			setup: func(t *testing.T, root string) {
				if os.Geteuid() == 0 {
					t.Skip("root reads through file modes")
				}
				apps := filepath.Join(root, "apps")
				os.MkdirAll(apps, 0o700)
				os.WriteFile(filepath.Join(apps, "shop.json"), []byte("{}"), 0o600)
				if err := os.Chmod(apps, 0); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(apps, 0o700) })
			},
			key: "apps/shop.json", put: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			tc.setup(t, s.Root())
			_, err := s.Get(t.Context(), tc.key)
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Get: err = %v, want ErrUnavailable", err)
			}
			if _, err := s.List(t.Context(), ""); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("List: err = %v, want ErrUnavailable", err)
			}
			if _, err := s.Put(t.Context(), tc.key, []byte("x"), store.Condition{}); tc.put && !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Put: err = %v, want ErrUnavailable", err)
			}
		})
	}
}

// A replaced lock file (someone cleaned the directory) must not split writers onto two
// inodes.
func TestRemovedLockFileIsRecreatedAndShared(t *testing.T) {
	root := t.TempDir()
	a, err := dir.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := os.Remove(filepath.Join(root, ".lock")); err != nil {
		t.Fatal(err)
	}
	b, err := dir.New(root) // creates a new .lock
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := store.BumpSerial(t.Context(), a); err != nil { // a notices and reopens
		t.Fatal(err)
	}
	var sa, sb syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, ".lock"), &sa); err != nil {
		t.Fatal(err)
	}
	// Both now lock the file at the path: exercise them together.
	var wg sync.WaitGroup
	for _, s := range []*dir.Store{a, b, a, b} {
		wg.Go(func() {
			for range 25 {
				if _, err := store.BumpSerial(context.Background(), s); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := syscall.Stat(filepath.Join(root, ".lock"), &sb); err != nil {
		t.Fatal(err)
	}
	if sa.Ino != sb.Ino {
		t.Errorf("lock file inode changed during the run")
	}
	n, _, err := store.ReadSerial(t.Context(), a)
	if err != nil || n != 101 {
		t.Fatalf("serial = %d, %v; want 101", n, err)
	}
}

func TestNewRejectsBadRoot(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	for _, root := range []string{"", f} {
		if _, err := dir.New(root); err == nil {
			t.Errorf("New(%q) succeeded", root)
		}
	}
}

func TestClosedStoreRefusesWrites(t *testing.T) {
	s := newStore(t)
	s.Close()
	if _, err := s.Put(t.Context(), "k", []byte("x"), store.Condition{}); err == nil {
		t.Fatal("Put on a closed store succeeded")
	}
}
