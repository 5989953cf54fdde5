//go:build unix

package dir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// openLock opens (creating) <root>/.lock. Caller holds s.mu or has sole access.
func (s *Store) openLock() error {
	f, err := os.OpenFile(filepath.Join(s.root, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening lock file: %w", unavailable(err))
	}
	s.lock = f
	return nil
}

// acquire takes the in-process mutex, then an exclusive flock on the lock file, and
// returns the function that releases both. flock(2) locks belong to the open file
// description, so each Store (and each process) excludes every other.
//
// If the lock file was removed or replaced while we waited (someone cleaned the
// directory), the flock we hold is on an orphaned inode that others no longer see: the
// file is reopened and the lock taken again, so all writers always lock one inode.
func (s *Store) acquire(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.lock == nil {
		s.mu.Unlock()
		return nil, errors.New("store is closed")
	}
	for range 10 {
		if err := flock(s.lock, syscall.LOCK_EX); err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("locking %s: %w", s.lock.Name(), unavailable(err))
		}
		same, err := s.lockIsCurrent()
		if err != nil {
			flock(s.lock, syscall.LOCK_UN)
			s.mu.Unlock()
			return nil, fmt.Errorf("checking lock file: %w", unavailable(err))
		}
		if same {
			f := s.lock
			return func() {
				flock(f, syscall.LOCK_UN)
				s.mu.Unlock()
			}, nil
		}
		old := s.lock
		if err := s.openLock(); err != nil {
			s.lock = old
			flock(old, syscall.LOCK_UN)
			s.mu.Unlock()
			return nil, err
		}
		old.Close() // releases its flock
	}
	s.mu.Unlock()
	return nil, unavailable(errors.New("lock file keeps being replaced"))
}

// lockIsCurrent reports whether the open lock file is still the one at <root>/.lock.
func (s *Store) lockIsCurrent() (bool, error) {
	held, err := s.lock.Stat()
	if err != nil {
		return false, err
	}
	cur, err := os.Stat(filepath.Join(s.root, lockName))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(held, cur), nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
