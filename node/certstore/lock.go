package certstore

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/scafo/ingress/node/store"
)

// Locks.
//
// A lock is one store object, LockPrefix + the escaped name, holding a lockRecord. Every
// transition is a conditional write, atomic on both backends:
//
//   - acquire a free name: create-only (If-None-Match: *);
//   - renew a held lock: compare-and-swap on the etag the holder last wrote (If-Match);
//     a renewal that loses means someone took the lock over (ErrLockLost);
//   - take over a lock whose lease ran out, or whose object is corrupt: compare-and-swap
//     on the etag that was read, so of several nodes that find it stale one wins;
//   - release: delete if the etag is still the holder's (on S3 the store's Delete
//     compares then deletes: a takeover that lands between the two, possible only once
//     the holder's lease has run out, is deleted with it; CertMagic tolerates such rare
//     mis-synchronisations, see certmagic.Locker).
//
// Leases are absolute times by the writer's clock: nodes' clocks must agree to well
// within a lease (NTP). A holder renews every Options.RenewInterval (LockLease/3), so a
// live holder never loses a lock to expiry while the store answers, and a dead one is
// taken over at most LockLease after its last renewal. No fencing tokens: a holder cut
// off from the store for longer than a lease can overlap with the next holder.

// Lock errors.
var (
	// ErrLockHeld: the lock is held by another owner whose lease has not run out. The
	// error is a *HeldError.
	ErrLockHeld = errors.New("certstore: lock held")
	// ErrNotLockOwner: a release by an owner that does not hold the lock.
	ErrNotLockOwner = errors.New("certstore: lock held by another owner")
	// ErrLockLost: a lock this holder took was taken over (its lease ran out) or
	// removed.
	ErrLockLost = errors.New("certstore: lock lost")
	// ErrInvalidLockRequest: a bad owner or lease.
	ErrInvalidLockRequest = errors.New("certstore: invalid lock request")
)

// Bounds of a lock request.
const (
	MinLockLease = time.Second
	MaxOwnerLen  = 256
)

// HeldError reports who holds a lock and until when. It never carries the holder's
// owner token (that token is what releases the lock).
type HeldError struct {
	Name    string
	Holder  string    // the node that wrote the lock
	Expires time.Time // zero when a race hid it
}

func (e *HeldError) Error() string {
	if e.Expires.IsZero() {
		return fmt.Sprintf("certstore: lock %q is held", e.Name)
	}
	return fmt.Sprintf("certstore: lock %q is held by %s until %s", e.Name, e.Holder, e.Expires.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLockHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrLockHeld }

// lockRecord is the content of a lock object.
type lockRecord struct {
	Name string `json:"name"`
	// Owner is the acquirer's token; only it renews or releases the lock.
	Owner    string    `json:"owner"`
	Holder   string    `json:"holder"`
	Acquired time.Time `json:"acquired"`
	Renewed  time.Time `json:"renewed"`
	Expires  time.Time `json:"expires"`
}

func parseLock(b []byte) (lockRecord, error) {
	var r lockRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return lockRecord{}, err
	}
	if r.Owner == "" || r.Expires.IsZero() {
		return lockRecord{}, errors.New("no owner or no expiry")
	}
	return r, nil
}

// Lease is a held lock.
type Lease struct {
	Name     string
	Holder   string
	Acquired time.Time
	Expires  time.Time
	etag     string
}

func checkOwner(owner string) error {
	if owner == "" || len(owner) > MaxOwnerLen {
		return fmt.Errorf("%w: owner must be 1 to %d bytes", ErrInvalidLockRequest, MaxOwnerLen)
	}
	for i := 0; i < len(owner); i++ {
		if c := owner[i]; c <= 0x20 || c >= 0x7f {
			return fmt.Errorf("%w: owner must be printable ASCII without spaces", ErrInvalidLockRequest)
		}
	}
	return nil
}

// AcquireLock makes one attempt to take lock name for owner for lease: it creates the
// lock if free, renews it if owner already holds it (the acquisition time is kept), takes
// it over if its lease ran out or its object is corrupt, and otherwise returns a
// *HeldError. It does not wait. Owner is the caller's secret token (printable ASCII, at
// most MaxOwnerLen bytes); lease is between MinLockLease and Options.MaxLockLease.
func (s *Storage) AcquireLock(ctx context.Context, name, owner string, lease time.Duration) (Lease, error) {
	lk, err := lockKey(name)
	if err != nil {
		return Lease{}, err
	}
	if err := checkOwner(owner); err != nil {
		return Lease{}, err
	}
	if lease < MinLockLease || lease > s.opts.MaxLockLease {
		return Lease{}, fmt.Errorf("%w: lease %s is outside [%s, %s]", ErrInvalidLockRequest, lease, MinLockLease, s.opts.MaxLockLease)
	}
	for range 3 {
		obj, err := s.st.Get(ctx, lk)
		now := s.opts.Now()
		acquired := now
		var cond store.Condition
		switch {
		case errors.Is(err, store.ErrNotFound):
			cond.IfNoneMatch = true
		case err != nil:
			return Lease{}, fmt.Errorf("certstore: lock %q: %w", name, err)
		default:
			cond.IfMatch = obj.ETag
			rec, perr := parseLock(obj.Value)
			switch {
			case perr != nil:
				s.opts.Logger.Warn("certstore: taking over a corrupt lock object", "lock", name, "error", perr)
			case rec.Owner == owner:
				acquired = rec.Acquired
			case now.Before(rec.Expires):
				return Lease{}, &HeldError{Name: name, Holder: rec.Holder, Expires: rec.Expires}
			default:
				s.opts.Logger.Info("certstore: taking over a stale lock", "lock", name, "holder", rec.Holder,
					"expired", rec.Expires.UTC().Format(time.RFC3339Nano))
			}
		}
		rec := lockRecord{Name: name, Owner: owner, Holder: s.opts.Owner, Acquired: acquired, Renewed: now, Expires: now.Add(lease)}
		b, _ := json.Marshal(rec)
		etag, err := s.st.Put(ctx, lk, b, cond)
		if errors.Is(err, store.ErrPreconditionFailed) {
			continue // someone wrote the lock since the read: read again
		}
		if err != nil {
			return Lease{}, fmt.Errorf("certstore: lock %q: %w", name, err)
		}
		return Lease{Name: name, Holder: rec.Holder, Acquired: acquired, Expires: rec.Expires, etag: etag}, nil
	}
	return Lease{}, &HeldError{Name: name}
}

// ReleaseLock releases lock name if owner holds it. A lock that does not exist is
// released already (nil); one held by another owner (or a corrupt lock object) is
// ErrNotLockOwner and stays.
func (s *Storage) ReleaseLock(ctx context.Context, name, owner string) error {
	lk, err := lockKey(name)
	if err != nil {
		return err
	}
	if err := checkOwner(owner); err != nil {
		return err
	}
	for range 3 {
		obj, err := s.st.Get(ctx, lk)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("certstore: unlock %q: %w", name, err)
		}
		rec, perr := parseLock(obj.Value)
		if perr != nil || rec.Owner != owner {
			return fmt.Errorf("%w: %q", ErrNotLockOwner, name)
		}
		err = s.st.Delete(ctx, lk, obj.ETag)
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound):
			return nil
		case errors.Is(err, store.ErrPreconditionFailed):
			continue // renewed or taken over since the read: look again
		default:
			return fmt.Errorf("certstore: unlock %q: %w", name, err)
		}
	}
	return fmt.Errorf("certstore: unlock %q: %w: the lock kept changing", name, store.ErrUnavailable)
}

// slot serialises this process's users of one lock name: CertMagic's Unlock names only
// the lock, so at most one caller in this process holds (or tries to take) a name.
type slot struct {
	sem  chan struct{}
	refs int
	held *held
}

// held is a lock this process took through Lock or TryLock.
type held struct {
	name  string
	owner string

	mu       sync.Mutex // guards etag, acquired
	etag     string
	acquired time.Time

	stop chan struct{}
	done chan struct{}
}

func (s *Storage) enter(ctx context.Context, name string, wait bool) (*slot, bool, error) {
	s.mu.Lock()
	sl := s.slots[name]
	if sl == nil {
		sl = &slot{sem: make(chan struct{}, 1)}
		s.slots[name] = sl
	}
	sl.refs++
	s.mu.Unlock()
	if wait {
		select {
		case sl.sem <- struct{}{}:
			return sl, true, nil
		case <-ctx.Done():
			s.leave(name, sl, false)
			return nil, false, ctx.Err()
		}
	}
	select {
	case sl.sem <- struct{}{}:
		return sl, true, nil
	default:
		s.leave(name, sl, false)
		return nil, false, nil
	}
}

func (s *Storage) leave(name string, sl *slot, release bool) {
	if release {
		<-sl.sem
	}
	s.mu.Lock()
	sl.refs--
	if sl.refs == 0 {
		delete(s.slots, name)
	}
	s.mu.Unlock()
}

// newOwnerToken mints the secret that identifies one acquisition.
func newOwnerToken() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Lock takes lock name, waiting (polling with backoff) while another holder has it,
// until ctx is done. The lock is renewed in the background until Unlock.
func (s *Storage) Lock(ctx context.Context, name string) error {
	if err := CheckLockName(name); err != nil {
		return err
	}
	sl, _, err := s.enter(ctx, name, true)
	if err != nil {
		return fmt.Errorf("certstore: lock %q: %w", name, err)
	}
	owner := newOwnerToken()
	wait := s.opts.PollMin
	for {
		lease, err := s.AcquireLock(ctx, name, owner, s.opts.LockLease)
		if err == nil {
			s.hold(sl, name, owner, lease)
			return nil
		}
		if !errors.Is(err, ErrLockHeld) {
			s.leave(name, sl, true)
			return err
		}
		// Jitter ±25% so waiters on several nodes do not poll in step.
		d := wait/2 + wait/4 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			s.leave(name, sl, true)
			return fmt.Errorf("certstore: lock %q: %w (%w)", name, ctx.Err(), err)
		}
		wait = min(wait*2, s.opts.PollMax)
	}
}

// TryLock makes one attempt at lock name: true if this caller now holds it, false if
// another holder (in this process or elsewhere) has it.
func (s *Storage) TryLock(ctx context.Context, name string) (bool, error) {
	if err := CheckLockName(name); err != nil {
		return false, err
	}
	sl, ok, _ := s.enter(ctx, name, false)
	if !ok {
		return false, nil
	}
	owner := newOwnerToken()
	lease, err := s.AcquireLock(ctx, name, owner, s.opts.LockLease)
	if err != nil {
		s.leave(name, sl, true)
		if errors.Is(err, ErrLockHeld) {
			return false, nil
		}
		return false, err
	}
	s.hold(sl, name, owner, lease)
	return true, nil
}

func (s *Storage) hold(sl *slot, name, owner string, lease Lease) {
	h := &held{name: name, owner: owner, etag: lease.etag, acquired: lease.Acquired,
		stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	sl.held = h
	s.mu.Unlock()
	go s.renewLoop(h)
}

func (s *Storage) renewLoop(h *held) {
	defer close(h.done)
	t := time.NewTicker(s.opts.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.RenewInterval)
		err := s.renew(ctx, h)
		cancel()
		switch {
		case errors.Is(err, ErrLockLost):
			s.opts.Logger.Error("certstore: lost a held lock (taken over after its lease ran out, or removed); no longer renewing", "lock", h.name)
			return
		case err != nil:
			s.opts.Logger.Warn("certstore: renewing a held lock failed; retrying", "lock", h.name, "error", err)
		}
	}
}

// renew extends h's lease by LockLease from now, if the lock object is still the one h
// last wrote.
func (s *Storage) renew(ctx context.Context, h *held) error {
	lk, err := lockKey(h.name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := s.opts.Now()
	rec := lockRecord{Name: h.name, Owner: h.owner, Holder: s.opts.Owner, Acquired: h.acquired, Renewed: now, Expires: now.Add(s.opts.LockLease)}
	b, _ := json.Marshal(rec)
	etag, err := s.st.Put(ctx, lk, b, store.Condition{IfMatch: h.etag})
	if errors.Is(err, store.ErrPreconditionFailed) {
		return fmt.Errorf("%w: %q", ErrLockLost, h.name)
	}
	if err != nil {
		return fmt.Errorf("certstore: renewing lock %q: %w", h.name, err)
	}
	h.etag = etag
	return nil
}

func (s *Storage) heldLock(name string) (*slot, *held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slots[name]
	if sl == nil || sl.held == nil {
		return nil, nil
	}
	return sl, sl.held
}

// RenewLockLease (certmagic.LockLeaseRenewer) renews a lock this process holds now and
// reports ErrLockLost if it was taken over. The lease stays Options.LockLease whatever
// leaseDuration asks: the background renewal keeps the lock for as long as it is held,
// and a longer lease would only delay a takeover after a crash.
func (s *Storage) RenewLockLease(ctx context.Context, name string, leaseDuration time.Duration) error {
	_, h := s.heldLock(name)
	if h == nil {
		return fmt.Errorf("%w: %q is not held by this process", ErrLockLost, name)
	}
	return s.renew(ctx, h)
}

// Unlock releases lock name, taken by Lock or TryLock in this process. It fails with
// ErrLockLost if the lock was taken over meanwhile (the other holder keeps it).
func (s *Storage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	sl := s.slots[name]
	var h *held
	if sl != nil {
		h = sl.held
		sl.held = nil
	}
	s.mu.Unlock()
	if h == nil {
		return fmt.Errorf("certstore: unlock %q: not locked by this process", name)
	}
	defer s.leave(name, sl, true)
	close(h.stop)
	<-h.done
	lk, err := lockKey(name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	etag := h.etag
	h.mu.Unlock()
	err = s.st.Delete(ctx, lk, etag)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		s.opts.Logger.Warn("certstore: a held lock was gone at unlock (taken over and released)", "lock", name)
		return nil
	case errors.Is(err, store.ErrPreconditionFailed):
		return fmt.Errorf("certstore: unlock %q: %w", name, ErrLockLost)
	default:
		return fmt.Errorf("certstore: unlock %q: %w", name, err)
	}
}
