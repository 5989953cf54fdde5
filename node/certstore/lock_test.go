package certstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/certstore/certstoretest"
	"github.com/scafo/ingress/node/store"
)

func fastLocks(owner string) Options {
	return quietOpts(Options{Owner: owner, LockLease: 2 * time.Second, RenewInterval: 300 * time.Millisecond,
		PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond})
}

// TestLockMutualExclusion: goroutines on two nodes (two store clients on one store)
// increment one counter under one lock; no increment is lost (certstoretest.Locks).
func TestLockMutualExclusion(t *testing.T) {
	st, open := dirStore(t)
	ctx := t.Context()
	certstoretest.Locks(t, "counter", "issue_cert_example.com", 4, 5, New(st, fastLocks("a")), New(open(t), fastLocks("b")))
	// Every lock was released: the namespace holds no lock object.
	es, err := st.List(ctx, LockPrefix)
	if err != nil || len(es) != 0 {
		t.Fatalf("lock objects left: %v, %v", es, err)
	}
}

// TestDeadHolderIsTakenOverAfterItsLease: a holder that stops renewing (it died) keeps
// the lock until its lease runs out, and not one poll longer than needed after.
func TestDeadHolderIsTakenOverAfterItsLease(t *testing.T) {
	st, open := dirStore(t)
	ctx := t.Context()
	dead := New(st, fastLocks("dead"))
	live := New(open(t), fastLocks("live"))
	// AcquireLock alone is a holder with no renewal: a process that died.
	lease, err := dead.AcquireLock(ctx, "l", "dead-owner-token", 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := live.TryLock(ctx, "l"); ok || err != nil {
		t.Fatalf("TryLock on a live lease = %v, %v; want false", ok, err)
	}
	start := time.Now()
	if err := live.Lock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	if got.Before(lease.Expires) {
		t.Fatalf("lock taken at %s, before the dead holder's lease ran out at %s", got, lease.Expires)
	}
	if waited := got.Sub(start); waited > 5*time.Second {
		t.Fatalf("takeover took %s after a 1.5s lease", waited)
	}
	// The dead holder's token no longer releases it.
	if err := dead.ReleaseLock(ctx, "l", "dead-owner-token"); !errors.Is(err, ErrNotLockOwner) {
		t.Fatalf("release by the previous holder = %v, want ErrNotLockOwner", err)
	}
	if err := live.Unlock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
}

// TestLiveHolderKeepsItsLockPastTheLease: background renewal keeps a held lock well past
// LockLease; once it is released another node takes it at once.
func TestLiveHolderKeepsItsLockPastTheLease(t *testing.T) {
	st, open := dirStore(t)
	ctx := t.Context()
	opts := fastLocks("a")
	// Renewal every 250ms of a 2s lease: a renewal may be slow for 1.75s on a loaded
	// machine (a MinIO write under -race took longer than the 750ms a 1s lease left,
	// and the lock changed hands). The watch lasts 2.5 leases, so it still proves the
	// renewal: without it the lease would have run out twice.
	opts.LockLease, opts.RenewInterval = 2*time.Second, 250*time.Millisecond
	// Both nodes read the test's clock: it moves 2.5 leases on, half a second at a
	// time, each step once the holder has renewed at the time it shows.
	clock := &testClock{now: time.Now()}
	opts.Now = clock.Now
	bOpts := fastLocks("b")
	bOpts.Now = clock.Now
	a := New(st, opts)
	b := New(open(t), bOpts)
	if err := a.Lock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		now := clock.add(500 * time.Millisecond)
		nodetest.WaitFor(t, 30*time.Second, "the holder's renewal at "+now.Format(time.StampMilli), func() bool {
			return renewedAt(t, st, "l", now)
		})
		if ok, err := b.TryLock(ctx, "l"); ok || err != nil {
			t.Fatalf("another node took a renewed lock: %v, %v", ok, err)
		}
	}
	if err := a.RenewLockLease(ctx, "l", time.Hour); err != nil {
		t.Fatalf("RenewLockLease on a held lock: %v", err)
	}
	if err := a.Unlock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryLock(ctx, "l"); !ok || err != nil {
		t.Fatalf("TryLock after release = %v, %v", ok, err)
	}
	if err := b.Unlock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
}

// TestLockInOneProcessIsExclusive: two goroutines of one Storage never hold a name at
// once (CertMagic's Unlock names only the lock).
func TestLockInOneProcessIsExclusive(t *testing.T) {
	st, _ := dirStore(t)
	ctx := t.Context()
	s := New(st, fastLocks("a"))
	if err := s.Lock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.TryLock(ctx, "l"); ok || err != nil {
		t.Fatalf("second TryLock in one process = %v, %v", ok, err)
	}
	got := make(chan error, 1)
	go func() { got <- s.Lock(ctx, "l") }()
	select {
	case err := <-got:
		t.Fatalf("second Lock returned while the first holds: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := s.Unlock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, "l"); err == nil {
		t.Fatal("Unlock of a lock this process does not hold succeeded")
	}
}

func TestLockHonoursContext(t *testing.T) {
	st, open := dirStore(t)
	a := New(st, fastLocks("a"))
	b := New(open(t), fastLocks("b"))
	if err := a.Lock(t.Context(), "l"); err != nil {
		t.Fatal(err)
	}
	defer a.Unlock(context.Background(), "l")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := b.Lock(ctx, "l")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrLockHeld) {
		t.Fatalf("Lock on a held name with a short context = %v", err)
	}
}

// TestReleaseOnlyByOwner: a release by any other owner token fails and leaves the lock.
func TestReleaseOnlyByOwner(t *testing.T) {
	st, _ := dirStore(t)
	ctx := t.Context()
	opts := fastLocks("a")
	clock := &testClock{now: time.Now()}
	opts.Now = clock.Now
	s := New(st, opts)
	if _, err := s.AcquireLock(ctx, "l", "owner-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLock(ctx, "l", "owner-2"); !errors.Is(err, ErrNotLockOwner) {
		t.Fatalf("release by another owner = %v", err)
	}
	var held *HeldError
	if _, err := s.AcquireLock(ctx, "l", "owner-2", time.Minute); !errors.As(err, &held) || held.Holder != "a" {
		t.Fatalf("acquire by another owner = %v", err)
	}
	// The same owner renews (acquisition time kept).
	l1, _ := s.AcquireLock(ctx, "l", "owner-1", time.Minute)
	clock.add(5 * time.Millisecond)
	l2, err := s.AcquireLock(ctx, "l", "owner-1", 2*time.Minute)
	if err != nil || !l2.Acquired.Equal(l1.Acquired) || !l2.Expires.After(l1.Expires) {
		t.Fatalf("renewal by the owner: %+v, %v (first %+v)", l2, err, l1)
	}
	if err := s.ReleaseLock(ctx, "l", "owner-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLock(ctx, "l", "owner-1"); err != nil {
		t.Fatalf("releasing a released lock = %v, want nil", err)
	}
	for _, c := range []struct {
		owner string
		lease time.Duration
	}{{"", time.Minute}, {"has space", time.Minute}, {string(make([]byte, MaxOwnerLen+1)), time.Minute},
		{"ok", time.Millisecond}, {"ok", 2 * time.Hour}} {
		if _, err := s.AcquireLock(ctx, "l", c.owner, c.lease); !errors.Is(err, ErrInvalidLockRequest) {
			t.Errorf("AcquireLock(owner %.10q, lease %s) = %v, want ErrInvalidLockRequest", c.owner, c.lease, err)
		}
	}
}

// TestCorruptLockIsTakenOver: a lock object that does not parse (or names no owner or
// expiry) would otherwise block its name forever; it is taken over. So is one whose
// expiry lies further ahead than any lease a holder can take (a corrupt object, or one
// written by a node whose clock ran years ahead), while one within the longest lease
// (MaxLockLease, 1h by default: a live holder's) is respected.
func TestCorruptLockIsTakenOver(t *testing.T) {
	st, _ := dirStore(t)
	ctx := t.Context()
	s := New(st, fastLocks("a"))
	lk, _ := lockKey("l")
	now := time.Now().UTC()
	expiring := func(expires time.Time) string {
		return fmt.Sprintf(`{"name":"l","owner":"someone","holder":"vps-z","acquired":%q,"renewed":%q,"expires":%q}`,
			now.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), expires.Format(time.RFC3339Nano))
	}
	if _, err := st.Put(ctx, lk, []byte(expiring(now.Add(50*time.Minute))), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLock(ctx, "l", "mine", 2*time.Second); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("lock held by a live holder for 50m: %v, want ErrLockHeld", err)
	}
	for _, junk := range []string{"not json", `{"owner":"x"}`, `{"expires":"2999-01-01T00:00:00Z"}`, "",
		expiring(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC))} {
		if _, err := st.Put(ctx, lk, []byte(junk), store.Condition{}); err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.Lock(c, "l")
		cancel()
		if err != nil {
			t.Fatalf("lock over corrupt object %q: %v", junk, err)
		}
		if obj, err := st.Get(ctx, lk); err != nil {
			t.Fatal(err)
		} else if rec, err := parseLock(obj.Value); err != nil || rec.Expires.After(time.Now().Add(time.Minute)) {
			t.Errorf("lock over corrupt object %q: %+v %v, want a lease of the 2s asked for", junk, rec, err)
		}
		// A corrupt lock object is not anyone's to release by owner.
		if err := s.Unlock(ctx, "l"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRenewNeverRetakesALostLock: when another holder took the lock over (here: it was
// overwritten), renewal and Unlock report ErrLockLost and Unlock leaves the new lock;
// a renewal of a lock that is gone, or that another owner holds, fails and does not
// take the lock again.
func TestRenewNeverRetakesALostLock(t *testing.T) {
	st, _ := dirStore(t)
	ctx := t.Context()
	s := New(st, fastLocks("a"))
	if err := s.Lock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	lk, _ := lockKey("l")
	other := fmt.Sprintf(`{"name":"l","owner":"thief","holder":"b","expires":%q}`, time.Now().Add(time.Hour).Format(time.RFC3339Nano))
	if _, err := st.Put(ctx, lk, []byte(other), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLockLease(ctx, "l", time.Minute); !errors.Is(err, ErrLockLost) {
		t.Fatalf("RenewLockLease after a takeover = %v, want ErrLockLost", err)
	}
	if err := s.Unlock(ctx, "l"); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock after a takeover = %v, want ErrLockLost", err)
	}
	obj, err := st.Get(ctx, lk)
	if err != nil || string(obj.Value) != other {
		t.Fatalf("the new holder's lock was touched: %q, %v", obj.Value, err)
	}
	if _, err := s.RenewLock(ctx, "l", "me", time.Minute); !errors.Is(err, ErrLockLost) {
		t.Fatalf("renewing another owner's lock = %v, want ErrLockLost", err)
	}
	if l, err := s.RenewLock(ctx, "l", "thief", time.Minute); err != nil || l.Holder != "a" {
		t.Fatalf("renewal by the owner: %+v, %v", l, err)
	}
	if err := st.Delete(ctx, lk, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RenewLock(ctx, "l", "me", time.Minute); !errors.Is(err, ErrLockLost) {
		t.Fatalf("renewing an absent lock = %v, want ErrLockLost", err)
	}
	if _, err := st.Get(ctx, lk); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renewing an absent lock created it: %v", err)
	}
}

// testClock is a clock the test moves (Options.Now).
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// add moves the clock on by d and returns the new time.
func (c *testClock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// renewedAt reports whether lock name's object in st was renewed at now or later.
func renewedAt(t *testing.T, st store.Store, name string, now time.Time) bool {
	t.Helper()
	key, err := lockKey(name)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := st.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := parseLock(obj.Value)
	if err != nil {
		t.Fatal(err)
	}
	return !rec.Renewed.Before(now)
}
