package certstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/scafo/ingress/node/store"
)

// Locks.
//
// A lock is one store object, LockPrefix + the escaped name, holding a lockRecord. Every
// transition is a conditional write, atomic on both backends:
//
//   - acquire a free name: create-only (If-None-Match: *);
//   - renew a held lock: read it, check the owner, compare-and-swap on the etag read
//     (If-Match); a lock gone or held by another owner is ErrLockLost;
//   - take over a lock whose lease ran out, whose object is corrupt, or whose expiry lies
//     beyond any lease (lockHorizon: a corrupt object, or a clock far ahead): compare-and-swap
//     on the etag that was read, so of several nodes that find it stale one wins;
//   - release: read it, check the owner, delete if the etag is still the one read (on S3 the store's Delete
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
	Name     string    `json:"name"`
	Holder   string    `json:"holder"` // the node that wrote the lock
	Acquired time.Time `json:"acquired"`
	Expires  time.Time `json:"expires"`
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
	lk, err := s.checkLockRequest(name, owner, lease)
	if err != nil {
		return Lease{}, err
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
			case rec.Expires.After(now.Add(s.lockHorizon())):
				// No holder can have taken a lease reaching that far: a corrupt object,
				// or a writer whose clock is far ahead. Respecting it would block the
				// name (its certificate, its renewals) until an operator deletes it.
				s.opts.Logger.Warn("certstore: taking over a lock that expires beyond any lease", "lock", name,
					"holder", rec.Holder, "expires", rec.Expires.UTC().Format(time.RFC3339Nano))
			case now.Before(rec.Expires):
				return Lease{}, &HeldError{Name: name, Holder: rec.Holder, Expires: rec.Expires}
			default:
				s.opts.Logger.Info("certstore: taking over a stale lock", "lock", name, "holder", rec.Holder,
					"expired", rec.Expires.UTC().Format(time.RFC3339Nano))
			}
		}
		rec := lockRecord{Name: name, Owner: owner, Holder: s.opts.Owner, Acquired: acquired, Renewed: now, Expires: now.Add(lease)}
		b, _ := json.Marshal(rec)
		_, err = s.st.Put(ctx, lk, b, cond)
		if errors.Is(err, store.ErrPreconditionFailed) {
			continue // someone wrote the lock since the read: read again
		}
		if err != nil {
			return Lease{}, fmt.Errorf("certstore: lock %q: %w", name, err)
		}
		return Lease{Name: name, Holder: rec.Holder, Acquired: acquired, Expires: rec.Expires}, nil
	}
	return Lease{}, &HeldError{Name: name}
}

// lockHorizon is how far ahead of this node's clock a held lock may expire: the longest
// lease a holder may take (this Storage's MaxLockLease, and never less than
// DefaultMaxLockLease, which /v1/storage grants) plus as much again for clock skew and
// a peer configured with a longer lease. A lock expiring later is taken over.
func (s *Storage) lockHorizon() time.Duration {
	return 2 * max(s.opts.MaxLockLease, DefaultMaxLockLease)
}

func (s *Storage) checkLockRequest(name, owner string, lease time.Duration) (string, error) {
	lk, err := lockKey(name)
	if err != nil {
		return "", err
	}
	if err := checkOwner(owner); err != nil {
		return "", err
	}
	if lease < MinLockLease || lease > s.opts.MaxLockLease {
		return "", fmt.Errorf("%w: lease %s is outside [%s, %s]", ErrInvalidLockRequest, lease, MinLockLease, s.opts.MaxLockLease)
	}
	return lk, nil
}

// RenewLock extends lock name, which owner must hold, to lease from now. Unlike
// AcquireLock it never takes a free lock: a lock that is gone, or held by another owner,
// is ErrLockLost (a holder that lost its lock must not silently get it back: someone
// else may have done the work meanwhile).
func (s *Storage) RenewLock(ctx context.Context, name, owner string, lease time.Duration) (Lease, error) {
	lk, err := s.checkLockRequest(name, owner, lease)
	if err != nil {
		return Lease{}, err
	}
	for range 3 {
		obj, err := s.st.Get(ctx, lk)
		if errors.Is(err, store.ErrNotFound) {
			return Lease{}, fmt.Errorf("%w: %q is not held", ErrLockLost, name)
		}
		if err != nil {
			return Lease{}, fmt.Errorf("certstore: renewing lock %q: %w", name, err)
		}
		rec, perr := parseLock(obj.Value)
		if perr != nil || rec.Owner != owner {
			return Lease{}, fmt.Errorf("%w: %q is held by another owner", ErrLockLost, name)
		}
		now := s.opts.Now()
		rec.Holder, rec.Renewed, rec.Expires = s.opts.Owner, now, now.Add(lease)
		b, _ := json.Marshal(rec)
		_, err = s.st.Put(ctx, lk, b, store.Condition{IfMatch: obj.ETag})
		if errors.Is(err, store.ErrPreconditionFailed) {
			continue
		}
		if err != nil {
			return Lease{}, fmt.Errorf("certstore: renewing lock %q: %w", name, err)
		}
		return Lease{Name: name, Holder: rec.Holder, Acquired: rec.Acquired, Expires: rec.Expires}, nil
	}
	return Lease{}, fmt.Errorf("certstore: renewing lock %q: %w: the lock kept changing", name, store.ErrUnavailable)
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
