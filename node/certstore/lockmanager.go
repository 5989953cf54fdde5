package certstore

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// LeaseOps are the one-shot lock operations a LockManager drives: Storage implements
// them over the store, the HTTP client over /v1/storage/locks.
type LeaseOps interface {
	// AcquireLock takes a free or expired lock for owner, or renews owner's own; a
	// lock held by another owner is a *HeldError (errors.Is ErrLockHeld).
	AcquireLock(ctx context.Context, name, owner string, lease time.Duration) (Lease, error)
	// RenewLock extends a lock owner holds; ErrLockLost if it does not hold it.
	RenewLock(ctx context.Context, name, owner string, lease time.Duration) (Lease, error)
	// ReleaseLock releases a lock owner holds; nil if it is free already;
	// ErrNotLockOwner if another owner holds it.
	ReleaseLock(ctx context.Context, name, owner string) error
}

// LockOptions configure a LockManager.
type LockOptions struct {
	// Lease is each lock's lease (default 2m); RenewInterval how often a held lock is
	// renewed (default Lease/3).
	Lease, RenewInterval time.Duration
	// PollMin and PollMax bound the backoff of a blocked Lock (defaults 100ms, 2s).
	PollMin, PollMax time.Duration
	Logger           *slog.Logger
}

func (o LockOptions) withDefaults() LockOptions {
	if o.Lease <= 0 {
		o.Lease = DefaultLockLease
	}
	if o.RenewInterval <= 0 {
		o.RenewInterval = o.Lease / 3
	}
	if o.PollMin <= 0 {
		o.PollMin = 100 * time.Millisecond
	}
	if o.PollMax <= 0 {
		o.PollMax = 2 * time.Second
	}
	if o.PollMax < o.PollMin {
		o.PollMax = o.PollMin
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// LockManager gives LeaseOps CertMagic's Locker semantics: Lock blocks (polling with
// jittered backoff) until the lock is taken or ctx is done; a held lock is renewed in the
// background until Unlock; each acquisition has its own random owner token, so only the
// acquirer releases it; at most one caller in this process holds (or tries to take) a
// name at a time, since CertMagic's Unlock names only the lock. Safe for concurrent use.
type LockManager struct {
	ops  LeaseOps
	opts LockOptions

	mu    sync.Mutex
	slots map[string]*slot
}

// NewLockManager drives ops.
func NewLockManager(ops LeaseOps, opts LockOptions) *LockManager {
	return &LockManager{ops: ops, opts: opts.withDefaults(), slots: map[string]*slot{}}
}

// slot serialises this process's users of one lock name.
type slot struct {
	sem  chan struct{}
	refs int
	held *held
}

// held is a lock this manager took.
type held struct {
	name, owner string
	stop, done  chan struct{}
}

func (m *LockManager) enter(ctx context.Context, name string, wait bool) (*slot, bool, error) {
	m.mu.Lock()
	sl := m.slots[name]
	if sl == nil {
		sl = &slot{sem: make(chan struct{}, 1)}
		m.slots[name] = sl
	}
	sl.refs++
	m.mu.Unlock()
	if !wait {
		select {
		case sl.sem <- struct{}{}:
			return sl, true, nil
		default:
			m.leave(name, sl, false)
			return nil, false, nil
		}
	}
	select {
	case sl.sem <- struct{}{}:
		return sl, true, nil
	case <-ctx.Done():
		m.leave(name, sl, false)
		return nil, false, ctx.Err()
	}
}

func (m *LockManager) leave(name string, sl *slot, release bool) {
	if release {
		<-sl.sem
	}
	m.mu.Lock()
	sl.refs--
	if sl.refs == 0 {
		delete(m.slots, name)
	}
	m.mu.Unlock()
}

// newOwnerToken mints the secret that identifies one acquisition.
func newOwnerToken() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Lock takes lock name, waiting while another holder has it, until ctx is done.
func (m *LockManager) Lock(ctx context.Context, name string) error {
	sl, _, err := m.enter(ctx, name, true)
	if err != nil {
		return fmt.Errorf("certstore: lock %q: %w", name, err)
	}
	owner := newOwnerToken()
	wait := m.opts.PollMin
	var lastHeld error
	for {
		_, err := m.ops.AcquireLock(ctx, name, owner, m.opts.Lease)
		if err == nil {
			m.hold(sl, name, owner)
			return nil
		}
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, ErrLockHeld) && lastHeld != nil {
			// The context ran out during an attempt: the answer is that the lock
			// stayed held until then.
			m.leave(name, sl, true)
			return fmt.Errorf("certstore: lock %q: %w (%w)", name, cerr, lastHeld)
		}
		if !errors.Is(err, ErrLockHeld) {
			m.leave(name, sl, true)
			return err
		}
		lastHeld = err
		// Jitter ±25% so waiters on several nodes do not poll in step.
		d := wait/2 + wait/4 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			m.leave(name, sl, true)
			return fmt.Errorf("certstore: lock %q: %w (%w)", name, ctx.Err(), err)
		}
		wait = min(wait*2, m.opts.PollMax)
	}
}

// TryLock makes one attempt at lock name: true if this caller now holds it, false if
// another holder (in this process or elsewhere) has it.
func (m *LockManager) TryLock(ctx context.Context, name string) (bool, error) {
	sl, ok, _ := m.enter(ctx, name, false)
	if !ok {
		return false, nil
	}
	owner := newOwnerToken()
	if _, err := m.ops.AcquireLock(ctx, name, owner, m.opts.Lease); err != nil {
		m.leave(name, sl, true)
		if errors.Is(err, ErrLockHeld) {
			return false, nil
		}
		return false, err
	}
	m.hold(sl, name, owner)
	return true, nil
}

func (m *LockManager) hold(sl *slot, name, owner string) {
	h := &held{name: name, owner: owner, stop: make(chan struct{}), done: make(chan struct{})}
	m.mu.Lock()
	sl.held = h
	m.mu.Unlock()
	go m.renewLoop(h)
}

func (m *LockManager) renewLoop(h *held) {
	defer close(h.done)
	t := time.NewTicker(m.opts.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		// A slow renewal may take up to half the lease: the next tick waits for it, and
		// the lease still has the other half to run.
		ctx, cancel := context.WithTimeout(context.Background(), max(m.opts.RenewInterval, m.opts.Lease/2))
		_, err := m.ops.RenewLock(ctx, h.name, h.owner, m.opts.Lease)
		cancel()
		switch {
		case errors.Is(err, ErrLockLost):
			m.opts.Logger.Error("certstore: lost a held lock (taken over after its lease ran out, or removed); no longer renewing", "lock", h.name)
			return
		case err != nil:
			m.opts.Logger.Warn("certstore: renewing a held lock failed; retrying", "lock", h.name, "error", err)
		}
	}
}

func (m *LockManager) heldLock(name string) *held {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sl := m.slots[name]; sl != nil {
		return sl.held
	}
	return nil
}

// RenewLockLease renews a lock this manager holds now; ErrLockLost if it was taken
// over. The lease stays LockOptions.Lease whatever leaseDuration asks: the background
// renewal keeps the lock for as long as it is held, and a longer lease would only delay
// a takeover after a crash.
func (m *LockManager) RenewLockLease(ctx context.Context, name string, _ time.Duration) error {
	h := m.heldLock(name)
	if h == nil {
		return fmt.Errorf("%w: %q is not held by this process", ErrLockLost, name)
	}
	_, err := m.ops.RenewLock(ctx, name, h.owner, m.opts.Lease)
	return err
}

// Unlock releases lock name, taken by Lock or TryLock through this manager. It fails
// with ErrLockLost if another holder took the lock over meanwhile (that holder keeps
// it). A failed release leaves the lock to expire after its lease.
func (m *LockManager) Unlock(ctx context.Context, name string) error {
	m.mu.Lock()
	sl := m.slots[name]
	var h *held
	if sl != nil {
		h = sl.held
		sl.held = nil
	}
	m.mu.Unlock()
	if h == nil {
		return fmt.Errorf("certstore: unlock %q: not locked by this process", name)
	}
	defer m.leave(name, sl, true)
	close(h.stop)
	<-h.done
	err := m.ops.ReleaseLock(ctx, name, h.owner)
	if errors.Is(err, ErrNotLockOwner) {
		return fmt.Errorf("certstore: unlock %q: %w (%w)", name, ErrLockLost, err)
	}
	return err
}
