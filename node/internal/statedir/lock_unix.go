//go:build unix

package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the lock's name in the state dir.
const LockFile = "lock"

// Lock is a held state dir: one node per state dir (its tokens, its port allocations,
// its memory of the served store). The kernel releases it when the process ends, however
// it ends, so a stale lock file never stops a restart.
type Lock struct{ f *os.File }

// Acquire takes dir's lock (an exclusive flock on <dir>/lock, which then holds this
// process's pid). Held by another live process, it fails naming that process's pid.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFile)
	// O_NOFOLLOW, and a regular file only: the lock is truncated and written, and a
	// node run as root on a state dir another user could write must not truncate the
	// file a planted link names (TestTheLockNeverWritesThroughALink).
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("state dir lock %s: not a regular file", path)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "unknown"
			if b, err := os.ReadFile(path); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					holder = strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("state dir %s is held by another scafo-node (pid %s, %s): one node per state dir; give this one its own --stateDir", dir, holder, path)
		}
		return nil, fmt.Errorf("state dir lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("state dir lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release lets the state dir go (a nil Lock: nothing). The file stays, with the pid of
// its last holder.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
