package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
)

// ErrForeign: the store does not look like the one this node served: its serial
// vanished, went backwards, or changed epoch (wiped, replaced or restored). Nothing is
// published from it and nothing is written to it until an operator adopts it (Reset;
// `scafo-node store adopt`). A restart does not adopt it: the node seeds its identity
// from what it remembers in its state dir (Seed).
var ErrForeign = errors.New("store: not the store this node served (serial vanished, went backwards or changed epoch)")

// Identity is the one owner of what a node knows about its store's identity: the
// serial it last accepted, the epoch that names the store, and whether the store it
// sees now is foreign. The reconcile loop calls Observe (read and check) and Commit
// (after a complete read); writers call Bump; the write guard calls Foreign. Nothing
// else reads its fields. Safe for concurrent use.
//
// Rules: one store, one epoch, a serial that only grows. Once a node has accepted a
// serial, a missing serial, another epoch or a smaller counter make the store foreign:
// publishing what is there would withdraw every route (an unmounted disk, a wrong
// bucket), and bumping it would make every other node accept it as the fleet's.
//
// A restarted node keeps those rules: Seed starts the identity from the epoch and
// serial remembered in the state dir, foreign until a read of the store matches them.
type Identity struct {
	mu      sync.Mutex
	seen    bool   // a serial has been accepted (or remembered: Seed)
	serial  uint64 // the last accepted counter
	epoch   string // the accepted epoch
	etag    string // the accepted serial object's etag ("" when the store had none, or seeded)
	foreign bool
	reason  string // why the store is foreign (when foreign)
}

// Observation is one read of the serial, checked against the identity. Commit it once
// everything it announces has been read.
type Observation struct {
	// Changed is false when the serial object's etag has not moved since the last
	// commit (a 304 on S3): nothing was written.
	Changed bool
	Serial  uint64
	Epoch   string
	// OneStep: the serial moved by exactly one from the committed one (read in this run,
	// same epoch) and its bump named what it changed (Names): reading those keys
	// completes the state. Otherwise a changed serial calls for a full read.
	OneStep bool
	Names   []string
	etag    string
}

// Observe reads the serial conditionally and checks it against what was committed. A
// store that turned foreign is reported as an error wrapping ErrForeign and
// ErrUnavailable (the last good document stays published) and marks the identity
// foreign until the next Commit.
func (id *Identity) Observe(ctx context.Context, st Store) (Observation, error) {
	id.mu.Lock()
	etag, seen, serial, epoch := id.etag, id.seen, id.serial, id.epoch
	id.mu.Unlock()

	obj, changed, err := st.GetIfChanged(ctx, SerialKey, etag)
	switch {
	case errors.Is(err, ErrNotFound) && (etag != "" || seen):
		// A healthy store never loses its serial.
		return Observation{}, id.lose(fmt.Sprintf("reading serial: it is missing, this node served serial %d of epoch %q (store wiped, unmounted or another one?)", serial, epoch))
	case errors.Is(err, ErrNotFound):
		return Observation{Changed: true, Serial: serial, Epoch: epoch}, nil
	case err != nil:
		return Observation{}, fmt.Errorf("reading serial: %w", err)
	case !changed:
		return Observation{Serial: serial, Epoch: epoch, etag: etag}, nil
	}
	n, e, names, err := ParseSerialNames(obj.Value)
	if err != nil {
		return Observation{}, fmt.Errorf("reading serial: %w: %w", err, ErrUnavailable)
	}
	if seen && e != epoch {
		return Observation{}, id.lose(fmt.Sprintf("reading serial: the store's epoch changed from %q to %q (store wiped or replaced?)", epoch, e))
	}
	if n < serial {
		return Observation{}, id.lose(fmt.Sprintf("reading serial: it went backwards from %d to %d (store restored from an old copy?)", serial, n))
	}
	oneStep := etag != "" && seen && e == epoch && n == serial+1 && names != nil
	return Observation{Changed: true, Serial: n, Epoch: e, OneStep: oneStep, Names: names, etag: obj.ETag}, nil
}

func (id *Identity) lose(why string) error {
	id.mu.Lock()
	id.foreign = true
	id.reason = why
	id.mu.Unlock()
	return fmt.Errorf("%s: %w: %w", why, ErrForeign, ErrUnavailable)
}

// Commit accepts o after a complete read of the state it announced.
func (id *Identity) Commit(o Observation) {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.foreign = false
	id.reason = ""
	id.etag = o.etag
	id.serial = o.Serial
	if o.etag != "" {
		id.epoch = o.Epoch
		id.seen = true
	}
}

// Foreign reports whether the store currently looks foreign (writes are refused).
func (id *Identity) Foreign() bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.foreign
}

// ForeignReason says why the store is foreign ("" when it is not).
func (id *Identity) ForeignReason() string {
	id.mu.Lock()
	defer id.mu.Unlock()
	if !id.foreign {
		return ""
	}
	return id.reason
}

// Seed starts an identity that has accepted nothing yet from what a previous run of
// the node accepted (remembered in its state dir): serial n of epoch. The store counts
// as foreign (writes refused) until an Observe finds that epoch with a serial of at
// least n, and is committed; a missing serial, another epoch or a smaller one keep it
// foreign. Seed a bare counter's store (written before epochs) with the empty epoch.
func (id *Identity) Seed(n uint64, epoch string) {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.seen, id.serial, id.epoch, id.etag = true, n, epoch, ""
	id.foreign = true
	id.reason = fmt.Sprintf("not yet checked: this node served serial %d of epoch %q", n, epoch)
}

// Reset forgets every serial and epoch accepted or seeded, and writes are accepted at
// once: the next Observe accepts the store as it is. The node adopts with Adopt, which
// keeps writes refused until the adopting pass commits; Reset is the bare form.
func (id *Identity) Reset() {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.forget()
	id.foreign, id.reason = false, ""
}

// forget drops every serial and epoch accepted or seeded (id.mu held).
func (id *Identity) forget() {
	id.seen, id.serial, id.epoch, id.etag = false, 0, "", ""
}

// Adopt is Reset for the operator's adoption of a foreign store: it forgets every serial
// and epoch accepted or seeded, and the store stays foreign (writes refused) until a
// pass commits it as it is, with its serial advanced past the last one this node served
// (Advance). Writes accepted before that commit would be announced on the adopted
// store's own serial, at or below one this node served: ?wait=applied would count
// ingresses that hold the pre-adopt document as holding them.
func (id *Identity) Adopt() {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.forget()
	id.foreign = true
	id.reason = "adopting the store as it is (operator request): writes wait for the pass that accepts it"
}

// Epoch is the accepted (or seeded) epoch ("" before any, or for a bare counter).
func (id *Identity) Epoch() string {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.epoch
}

// Serial is the last committed serial (0 before any).
func (id *Identity) Serial() uint64 {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.serial
}

// Mark is the last committed serial and the epoch, read together.
func (id *Identity) Mark() (uint64, string) {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.serial, id.epoch
}

// Bump increments the store's serial after a write that changed something and returns
// the new value. Before any serial was committed it creates one (minting the epoch);
// after, it never recreates a missing serial, never bumps another epoch and never
// bumps a serial behind the committed one: those are ErrForeign.
//
// names are the keys the announced write changed; a reader one step behind reads just
// those. Pass none when unsure: readers then read everything.
func (id *Identity) Bump(ctx context.Context, st Store, names ...string) (uint64, error) {
	id.mu.Lock()
	seen, serial, epoch := id.seen, id.serial, id.epoch
	id.mu.Unlock()
	if !seen {
		// This node created (or first bumped) the serial before its reconcile loop
		// committed one: the store now has an identity, and this node knows it. Remember
		// the epoch at once, so that a store wiped before the next pass reads as foreign
		// (a missing serial), never as a fresh store to derive an empty fleet from.
		n, err := BumpSerial(ctx, st, names...)
		if err == nil {
			id.noteBumped(ctx, st)
		}
		return n, err
	}
	next, _, err := Update(ctx, st, SerialKey, func(cur []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, fmt.Errorf("the serial is missing: %w", ErrForeign)
		}
		n, e, err := ParseSerialEpoch(cur)
		if err != nil {
			return nil, err
		}
		if e != epoch {
			return nil, fmt.Errorf("the store's epoch is %q, this node served %q: %w", e, epoch, ErrForeign)
		}
		if n < serial {
			return nil, fmt.Errorf("the store's serial %d is behind the %d this node saw: %w", n, serial, ErrForeign)
		}
		next, err := nextSerial(n)
		if err != nil {
			return nil, err
		}
		return FormatSerialNames(next, e, names), nil
	})
	if err != nil {
		return 0, fmt.Errorf("bumping serial: %w", err)
	}
	return ParseSerial(next)
}

// noteBumped records the epoch of the serial this identity's first bump wrote, unless
// a serial was accepted meanwhile. The counter and etag stay the reconcile loop's (its
// conditional read and one-step reads are unchanged).
func (id *Identity) noteBumped(ctx context.Context, st Store) {
	obj, err := st.Get(ctx, SerialKey)
	if err != nil {
		return // the next Observe decides
	}
	_, e, err := ParseSerialEpoch(obj.Value)
	if err != nil {
		return
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if !id.seen {
		id.seen, id.epoch = true, e
	}
}

// Recheck confirms, after a pass read the objects o announced, that the serial is still
// the one o observed: present if it was, in the same epoch, not behind. A store
// swapped (wiped, unmounted, replaced) between the serial read and the object reads
// answers those reads from another store: the pass is discarded (ErrForeign, like
// Observe) instead of committed. A serial that moved ahead is a concurrent write: the
// pass stands and the next one reads it. Costs one conditional read of the serial.
func (id *Identity) Recheck(ctx context.Context, st Store, o Observation) error {
	id.mu.Lock()
	seen, epoch := id.seen, id.epoch
	id.mu.Unlock()
	present := o.etag != ""
	if present {
		seen, epoch = true, o.Epoch
	}
	obj, changed, err := st.GetIfChanged(ctx, SerialKey, o.etag)
	switch {
	case errors.Is(err, ErrNotFound) && seen:
		return id.lose(fmt.Sprintf("re-reading serial after the pass's reads: it vanished, the pass read serial %d of epoch %q (store wiped, unmounted or another one?)", o.Serial, epoch))
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("re-reading serial: %w", err)
	case !changed:
		return nil
	}
	n, e, err := ParseSerialEpoch(obj.Value)
	if err != nil {
		return fmt.Errorf("re-reading serial: %w: %w", err, ErrUnavailable)
	}
	if seen && e != epoch {
		return id.lose(fmt.Sprintf("re-reading serial after the pass's reads: the store's epoch changed from %q to %q (store wiped or replaced?)", epoch, e))
	}
	if n < o.Serial {
		return id.lose(fmt.Sprintf("re-reading serial after the pass's reads: it went backwards from %d to %d (store restored from an old copy?)", o.Serial, n))
	}
	return nil
}

// Advance moves the store's serial observed in o to past+1 when o is of epoch and not
// past it (a store adopted behind what this node served: a restored backup), so that
// every serial this node labels a document with from then on is above every one it
// labelled before (ingresses keep the highest serial of an epoch they hold, and
// ?wait=applied compares serials). It writes only if the serial is still o's
// (If-Match), naming no key (readers read in full); the state is o's, so a pass that
// read everything o announced commits the observation returned. o is returned unchanged
// when there is nothing to do; an error (the serial moved meanwhile: ErrPreconditionFailed)
// leaves the store to a later pass.
func (id *Identity) Advance(ctx context.Context, st Store, o Observation, epoch string, past uint64) (Observation, error) {
	if o.etag == "" || o.Epoch != epoch || o.Serial > past {
		return o, nil
	}
	next, err := nextSerial(past)
	if err != nil {
		return o, fmt.Errorf("advancing the adopted store's serial past %d, the last this node served (<stateDir>/served-serial or served.json corrupt?): %w", past, err)
	}
	etag, err := st.Put(ctx, SerialKey, FormatSerial(next, o.Epoch), Condition{IfMatch: o.etag})
	if err != nil {
		return o, fmt.Errorf("advancing the adopted store's serial from %d past %d, the last this node served: %w", o.Serial, past, err)
	}
	return Observation{Changed: true, Serial: next, Epoch: o.Epoch, etag: etag}, nil
}

// nextSerial is n+1, refused at the counter's last value: a serial that wrapped to 0
// would read, on every node that saw it, as a store restored from an old copy (foreign
// fleet-wide). No store counts that far; a serial there is corrupt.
func nextSerial(n uint64) (uint64, error) {
	if n == math.MaxUint64 {
		return 0, fmt.Errorf("serial %d is the counter's last value and cannot grow (a corrupt serial): %w", n, ErrUnavailable)
	}
	return n + 1, nil
}
