package fleetcerts

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
)

// tracked wraps the storage so Close can wait for CertMagic's own goroutines (an
// obtain cancelled by Close still releases its lock, after Close returned otherwise):
// it counts calls in flight and locks held.
type tracked struct {
	certmagic.Storage
	mu       sync.Mutex
	inflight int
	held     int
	// closed: Close began. A goroutine CertMagic started before Close may only now reach
	// the store; what it would write (a lock, a certificate) is refused, so that nothing
	// is written after Close returns. Reads, deletes and unlocks still go through: they
	// release what is held.
	closed bool
	// left (nil: nobody waits) is closed by the next call that returns, for idle.
	left chan struct{}
}

// errClosed is what a write after Close gets.
var errClosed = errors.New("fleet certificates: the manager is closed")

// close refuses the writes that come after it.
func (t *tracked) close() { t.mu.Lock(); t.closed = true; t.mu.Unlock() }

// enterWrite is enter for a call that writes, refused once closed.
func (t *tracked) enterWrite() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errClosed
	}
	t.inflight++
	return nil
}

var (
	_ certmagic.TryLocker        = (*tracked)(nil)
	_ certmagic.LockLeaseRenewer = (*tracked)(nil)
)

func (t *tracked) enter() { t.mu.Lock(); t.inflight++; t.mu.Unlock() }

// leave ends a call (after an Unlock's release is counted) and wakes idle.
func (t *tracked) leave() {
	t.mu.Lock()
	t.inflight--
	if t.left != nil {
		close(t.left)
		t.left = nil
	}
	t.mu.Unlock()
}

func (t *tracked) Store(ctx context.Context, k string, v []byte) error {
	if err := t.enterWrite(); err != nil {
		return err
	}
	defer t.leave()
	return t.Storage.Store(ctx, k, v)
}

func (t *tracked) Load(ctx context.Context, k string) ([]byte, error) {
	t.enter()
	defer t.leave()
	return t.Storage.Load(ctx, k)
}

func (t *tracked) Delete(ctx context.Context, k string) error {
	t.enter()
	defer t.leave()
	return t.Storage.Delete(ctx, k)
}

func (t *tracked) Lock(ctx context.Context, name string) error {
	if err := t.enterWrite(); err != nil {
		return err
	}
	defer t.leave()
	err := t.Storage.Lock(ctx, name)
	if err == nil {
		t.mu.Lock()
		t.held++
		t.mu.Unlock()
	}
	return err
}

func (t *tracked) TryLock(ctx context.Context, name string) (bool, error) {
	if err := t.enterWrite(); err != nil {
		return false, err
	}
	defer t.leave()
	tl, ok := t.Storage.(certmagic.TryLocker)
	if !ok {
		return false, nil // CertMagic only checks for the interface on tracked
	}
	got, err := tl.TryLock(ctx, name)
	if got && err == nil {
		t.mu.Lock()
		t.held++
		t.mu.Unlock()
	}
	return got, err
}

func (t *tracked) Unlock(ctx context.Context, name string) error {
	t.enter()
	defer t.leave()
	err := t.Storage.Unlock(ctx, name)
	t.mu.Lock()
	t.held--
	t.mu.Unlock()
	return err
}

func (t *tracked) RenewLockLease(ctx context.Context, name string, d time.Duration) error {
	if r, ok := t.Storage.(certmagic.LockLeaseRenewer); ok {
		return r.RenewLockLease(ctx, name, d)
	}
	return nil
}

// idle waits until no call is in flight and no lock is held, or for d at most: it looks
// again each time a call returns (leave).
func (t *tracked) idle(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		if t.inflight == 0 && t.held <= 0 {
			t.mu.Unlock()
			return true
		}
		if t.left == nil {
			t.left = make(chan struct{})
		}
		left := t.left
		t.mu.Unlock()
		select {
		case <-left:
		case <-deadline.C:
			t.mu.Lock()
			defer t.mu.Unlock()
			return t.inflight == 0 && t.held <= 0
		}
	}
}
