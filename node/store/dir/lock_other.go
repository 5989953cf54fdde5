//go:build !unix

package dir

import (
	"context"
	"errors"
)

// The dir store needs flock(2) to exclude other processes; without it, refuse to open
// rather than risk lost updates.
func (s *Store) openLock() error {
	return errors.New("the dir store needs a unix system (flock)")
}

func (s *Store) acquire(context.Context) (func(), error) {
	return nil, errors.ErrUnsupported
}
