package dir_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

// Two Store values on one directory have separate lock file descriptions, exactly like
// two processes: flock must exclude them.
func TestTwoStoresOnOneDirLoseNoUpdate(t *testing.T) {
	root := t.TempDir()
	a, err := dir.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := dir.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const perGoroutine, goroutines = 20, 10
	var wg sync.WaitGroup
	for i := range goroutines {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range perGoroutine {
				if _, err := store.BumpSerial(t.Context(), s); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	n, _, err := store.ReadSerial(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	if n != goroutines*perGoroutine {
		t.Fatalf("serial = %d, want %d", n, goroutines*perGoroutine)
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

func TestETagIsHexSHA256OfContent(t *testing.T) {
	s := newStore(t)
	etag, err := s.Put(t.Context(), "k", []byte("hello"), store.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	const want = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	if etag != want {
		t.Fatalf("etag = %q, want %q", etag, want)
	}
}

func TestWriteLeavesNoTempFilesAndFileHoldsValue(t *testing.T) {
	s := newStore(t)
	for i := range 5 {
		if _, err := s.Put(t.Context(), "apps/shop.json", []byte(strconv.Itoa(i)), store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(s.Root(), "apps"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "shop.json" {
		t.Fatalf("apps/ holds %q, want only shop.json", names)
	}
	b, err := os.ReadFile(filepath.Join(s.Root(), "apps", "shop.json"))
	if err != nil || string(b) != "4" {
		t.Fatalf("file = %q, %v; want %q", b, err, "4")
	}
}

func TestNewRemovesStaleTempFilesAndListSkipsHiddenFiles(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"apps/.tmp-123", ".tmp-9", "apps/.hidden", ".git/config"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "apps", "a.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := dir.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{"apps/.tmp-123", ".tmp-9"} {
		if _, err := os.Stat(filepath.Join(root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale temp file %s: stat err = %v, want not-exist", p, err)
		}
	}
	got, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Key != "apps/a.json" {
		t.Fatalf("List = %+v, want only apps/a.json", got)
	}
}

// A failure that is not "absent" must read as unavailable, never as not-found or an
// empty list: the node keeps its last document instead of withdrawing routes.
func TestIOErrorsAreUnavailableNotNotFound(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, root string)
		key   string
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
		})
	}
}

func TestUnreadableDirIsUnavailable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads through file modes")
	}
	s := newStore(t)
	if _, err := s.Put(t.Context(), "apps/shop.json", []byte("{}"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	apps := filepath.Join(s.Root(), "apps")
	if err := os.Chmod(apps, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(apps, 0o700) })
	if _, err := s.Get(t.Context(), "apps/shop.json"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Get: err = %v, want ErrUnavailable", err)
	}
	if _, err := s.List(t.Context(), "apps/"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("List: err = %v, want ErrUnavailable", err)
	}
	if _, err := s.Put(t.Context(), "apps/shop.json", []byte("x"), store.Condition{}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Put: err = %v, want ErrUnavailable", err)
	}
}

func TestKeyAndDirectoryClashAreClearErrors(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if _, err := s.Put(ctx, "apps/shop.json", []byte("{}"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	// "apps" is a directory of keys, not a key.
	_, err := s.Get(ctx, "apps")
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(apps) err = %v, want ErrNotFound", err)
	}
	if _, err := s.Put(ctx, "apps", []byte("x"), store.Condition{}); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("Put(apps) err = %v, want a directory clash", err)
	}
	// "apps/shop.json" is a key, so nothing can live under it.
	if _, err := s.Put(ctx, "apps/shop.json/x", []byte("x"), store.Condition{}); err == nil || !strings.Contains(err.Error(), "is a key") {
		t.Errorf("Put(apps/shop.json/x) err = %v, want a key clash", err)
	}
	if _, err := s.Get(ctx, "apps/shop.json/x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(apps/shop.json/x) err = %v, want ErrNotFound", err)
	}
}

func TestFilesAndDirsArePrivate(t *testing.T) {
	s := newStore(t)
	if _, err := s.Put(t.Context(), "tokens/t.json", []byte("{}"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{"tokens": 0o700, "tokens/t.json": 0o600} {
		fi, err := os.Stat(filepath.Join(s.Root(), p))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %o, want %o", p, got, want)
		}
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
