package fleetcerts

import (
	"context"
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
}

var (
	_ certmagic.TryLocker        = (*tracked)(nil)
	_ certmagic.LockLeaseRenewer = (*tracked)(nil)
)

func (t *tracked) enter() { t.mu.Lock(); t.inflight++; t.mu.Unlock() }
func (t *tracked) leave() { t.mu.Lock(); t.inflight--; t.mu.Unlock() }

func (t *tracked) Store(ctx context.Context, k string, v []byte) error {
	t.enter()
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
	t.enter()
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
	t.enter()
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

// idle waits until no call is in flight and no lock is held, or the deadline.
func (t *tracked) idle(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		t.mu.Lock()
		done := t.inflight == 0 && t.held <= 0
		t.mu.Unlock()
		if done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
