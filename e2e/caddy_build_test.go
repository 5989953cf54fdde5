package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 26: the Caddy binary is cached like Traefik's, keyed by what goes into it. The
// key (.ci/caddy.sh --key) of a copy of this checkout elsewhere is this checkout's (the
// key never names where the tree is); a change to a source file of a package the build
// compiles (deploy/caddy's own, or the main module's it imports through the replace),
// to either go.sum, or to an embedded file changes it; a change to a file the build
// does not read (a doc, a node package Caddy does not import, a test) leaves it, so that
// tree reuses the cached binary.
func TestCaddyBinaryCacheKeyFollowsWhatTheBuildReads(t *testing.T) {
	requireBinaries(t)
	script := filepath.Join(bins.root, ".ci", "caddy.sh")
	key := func(root string) string {
		t.Helper()
		cmd := exec.Command(script, "--key")
		cmd.Env = append(os.Environ(), "SCAFO_ROOT="+root, "CADDY_BIN=/ignored/by/--key")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf(".ci/caddy.sh --key in %s: %v\n%s", root, err, out)
		}
		k := strings.TrimSpace(string(out))
		if len(k) != 24 {
			t.Fatalf(".ci/caddy.sh --key: %q, want 24 hex digits", k)
		}
		return k
	}

	// A copy of the checkout's files (tracked and new, not ignored ones).
	ls := exec.Command("git", "ls-files", "-co", "--exclude-standard", "-z")
	ls.Dir = bins.root
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	cp := t.TempDir()
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src, dst := filepath.Join(bins.root, rel), filepath.Join(cp, rel)
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 { // deploy/caddy/.bin
			to, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(to, dst); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(cp, ".ci", "caddy.sh"), 0o755); err != nil {
		t.Fatal(err)
	}

	base := key(bins.root)
	if k := key(cp); k != base {
		t.Fatalf("a copy of the same tree keys %s, the checkout %s: the key depends on where the tree is", k, base)
	}
	edit := func(rel, add string) (undo func()) {
		t.Helper()
		p := filepath.Join(cp, rel)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(append([]byte{}, b...), add...), 0o644); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		file, add string
		rebuild   bool
	}{
		{"render/routing/doc.go", "\n// a change the build compiles\n", true},
		{"node/storageclient/client.go", "\n// a change the build compiles\n", true},
		{"deploy/caddy/scafo/permission.go", "\n// a change the build compiles\n", true},
		{"deploy/caddy/main.go", "\n// a change the build compiles\n", true},
		{"deploy/caddy/go.sum", "example.org/x v0.0.1 h1:AAAA\n", true},
		{"go.sum", "example.org/x v0.0.1 h1:AAAA\n", true},
		{"docs/design.md", "\nnot compiled\n", false},
		{"deploy/caddy/README.md", "\nnot compiled\n", false},
		{"deploy/caddy/scafo/table_test.go", "\n// a test: not in the binary\n", false},
		{"node/config.go", "\n// node/ itself: Caddy does not import it\n", false},
	} {
		if _, err := os.Stat(filepath.Join(cp, c.file)); err != nil {
			t.Fatalf("%s: %v (the case names a file that is not there)", c.file, err)
		}
		undo := edit(c.file, c.add)
		k := key(cp)
		undo()
		if c.rebuild && k == base {
			t.Errorf("%s changed: key %s unchanged, the cached binary would be reused for a changed build", c.file, k)
		}
		if !c.rebuild && k != base {
			t.Errorf("%s changed: key %s (was %s), a rebuild for a file the build does not read", c.file, k, base)
		}
	}
	if k := key(cp); k != base {
		t.Fatalf("after undoing every edit the key is %s, want %s", k, base)
	}
}
