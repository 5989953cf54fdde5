//go:build unix

package statedir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestTheLockNeverWritesThroughALink: the lock is truncated and written with the
// node's pid; a link planted at <stateDir>/lock (a state dir another user could write,
// a node run as root) had the node truncate the file it names. A fifo there would
// block the start. Both are refused, the target untouched.
func TestTheLockNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, LockFile)); err != nil {
		t.Fatal(err)
	}
	if l, err := Acquire(dir); err == nil {
		l.Release()
		t.Errorf("Acquire over a symlinked lock file succeeded")
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the link's target now holds %q", b)
	}

	fifoDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, LockFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := Acquire(fifoDir); err == nil || !strings.Contains(err.Error(), "regular") {
		l.Release()
		t.Errorf("Acquire over a fifo: %v, want refused as not a regular file", err)
	}

	// The ordinary case still works, and a second holder is refused.
	ok := t.TempDir()
	l, err := Acquire(ok)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := Acquire(ok); err == nil {
		t.Errorf("a second Acquire of a held state dir succeeded")
	}
}
