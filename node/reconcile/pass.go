package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// Pass runs one reconcile step at now (Run calls it every tick; a test drives it with
// its own clock). full forces a re-list of every object.
//
// Its seams: observe the serial; then, by what moved, re-derive for time alone
// (nothing written), read the keys one bump named, or read everything; and record the
// outcome (status, logs, metrics) whatever happened.
func (r *Reconciler) Pass(ctx context.Context, now time.Time, full bool) (err error) {
	start := time.Now()
	skippedCount := -1 // no derivation this pass
	// Read before an adoption clears it.
	wasForeign := r.id.Foreign()
	r.checkAdopt()
	defer func() { r.recordOutcome(now, start, err, skippedCount) }()

	obs, err := r.id.Observe(ctx, r.st)
	if err != nil {
		return err
	}
	if r.objects == nil || r.lastFull.IsZero() {
		full = true
	}
	switch {
	case !obs.Changed && !full:
		skippedCount, err = r.timeOnly(ctx, now)
	case obs.OneStep && !full && !wasForeign && !r.adopting:
		skippedCount, err = r.readNamed(ctx, now, obs)
	default:
		skippedCount, err = r.readAll(ctx, now, obs, full, wasForeign)
	}
	return err
}

// recordOutcome records how a pass ended: the status (last pass, last error, since
// when the store is unreachable), the logs of a change of reachability, the document
// remembered in the state dir when the store is foreign and nothing is published yet,
// and the pass metrics. skippedCount is -1 when the pass derived nothing.
func (r *Reconciler) recordOutcome(now, start time.Time, err error, skippedCount int) {
	foreign := errors.Is(err, store.ErrForeign)
	if foreign && r.remembered != nil && r.pub.Current() == nil {
		// A restart on a foreign store: serve what this node served, not nothing
		// (503 forever) and never what that store holds.
		r.pub.PublishNamed(r.remembered, nil, namedGroups(r.opts(), nil), now)
		r.mu.Lock()
		r.status.Remembered = true
		r.mu.Unlock()
		r.log.Warn("serving the routing document remembered in the state dir", "revision", r.remembered.Revision)
	}
	r.mu.Lock()
	if err != nil {
		r.status.LastError = err.Error()
		if r.status.UnreachableSince.IsZero() {
			r.status.UnreachableSince = now
			if foreign {
				r.log.Error("the store is not the one this node served: serving the last good document, refusing writes; "+
					"if this store is meant to be the fleet's, run `scafo-node store adopt` on this node",
					"err", err, "stateDir", r.stateDir)
			} else {
				r.log.Warn("store unreachable: serving the last good document", "err", err)
			}
		}
	} else {
		if !r.status.UnreachableSince.IsZero() {
			r.log.Info("store reachable again", "down_for", now.Sub(r.status.UnreachableSince).Round(time.Millisecond))
		}
		r.status.LastError = ""
		r.status.UnreachableSince = time.Time{}
		r.status.LastPass = now
	}
	r.mu.Unlock()
	r.metrics.observe(time.Since(start), err, skippedCount)
}

// timeOnly is a pass that found nothing written. It returns the derivation's skipped
// count (-1: no derivation).
func (r *Reconciler) timeOnly(ctx context.Context, now time.Time) (int, error) {
	// Nothing was written. The document can still move by time alone, when a node
	// crosses the TTL (or comes back by heartbeat); re-derive only then.
	live, listed, err := r.liveness(ctx, now)
	if err != nil {
		return -1, err
	}
	if listed {
		r.mergeLive(live, now)
	}
	if stale := r.staleKey(now); stale == r.lastStale && !listed {
		return -1, nil
	}
	return r.derive(now, []string{}), nil // no object changed: only time and heartbeats moved
}

// readNamed is a pass one bump past the committed serial whose bump names what it
// changed. It returns the derivation's skipped count (-1: no derivation).
func (r *Reconciler) readNamed(ctx context.Context, now time.Time, obs store.Observation) (int, error) {
	// One bump since the committed serial, and it names what it changed: read those
	// keys alone. Absent means deleted (a bump follows the write it names). The
	// cache is changed in place, and only once every read succeeded: a change costs
	// its own reads, not a copy of the fleet's objects.
	read := make(map[string]*cachedObject, len(obs.Names)) // nil: deleted
	absent := false
	for _, k := range obs.Names {
		if !tracked(k) {
			continue
		}
		o, err := r.st.Get(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			read[k] = nil
			absent = true
			continue
		}
		if errors.Is(err, store.ErrTooLarge) {
			c := r.skip(k, "", err)
			read[k] = &c
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("reading %s: %w", k, err)
		}
		c := r.decode(o)
		read[k] = &c
	}
	live, listed, err := r.liveness(ctx, now)
	if err != nil {
		return -1, err
	}
	// An absence may be a store swapped (wiped, unmounted) since the serial read,
	// not a delete: confirm the serial before deleting what the bump named. Reads
	// that found their keys cost nothing more.
	if absent {
		if err := r.id.Recheck(ctx, r.st, obs); err != nil {
			return -1, err
		}
	}
	if listed {
		r.mergeLive(live, now)
	}
	for k, c := range read {
		if c == nil {
			delete(r.objects, k)
		} else {
			r.objects[k] = *c
		}
	}
	r.id.Commit(obs)
	changed := make([]string, 0, len(read))
	for k := range read {
		changed = append(changed, k)
	}
	return r.derive(now, changed), nil
}

// readAll is a pass that lists the store and reads the keys whose etag moved (every
// key when full): this node missed a bump, the store is in another epoch, the bump
// named nothing, or a full pass is due. It returns the derivation's skipped count (-1:
// no derivation).
func (r *Reconciler) readAll(ctx context.Context, now time.Time, obs store.Observation, full, wasForeign bool) (int, error) {
	var entries []store.Entry
	for _, p := range []string{fleet.PrefixApps, fleet.PrefixDomains, fleet.PrefixNodes} {
		es, err := r.st.List(ctx, p)
		if err != nil {
			return -1, fmt.Errorf("listing %s: %w", p, err)
		}
		entries = append(entries, es...)
	}
	next := make(map[string]cachedObject, len(entries))
	for _, e := range entries {
		if !tracked(e.Key) {
			continue
		}
		if old, ok := r.objects[e.Key]; ok && old.etag == e.ETag && !full {
			next[e.Key] = old
			continue
		}
		o, err := r.st.Get(ctx, e.Key)
		if errors.Is(err, store.ErrTooLarge) {
			next[e.Key] = r.skip(e.Key, e.ETag, err)
			continue
		}
		if errors.Is(err, store.ErrNotFound) {
			// Deleted between list and get, or a store whose reads lag its listings: keep
			// what we had; a real delete also moved the serial, so the next pass
			// confirms it.
			if old, ok := r.objects[e.Key]; ok {
				next[e.Key] = old
			}
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("reading %s: %w", e.Key, err)
		}
		next[e.Key] = r.decode(o)
	}
	// A store swapped (wiped, unmounted, replaced) between the serial read and the
	// listing answered with its own, possibly empty, contents under the old serial:
	// discard the pass, never derive from it (docs/design.md §5/§6).
	if err := r.id.Recheck(ctx, r.st, obs); err != nil {
		return -1, err
	}
	if r.adopting {
		// An adopted store behind what this node served (a backup restored): its serial
		// moves past it before anything is labelled with it, so no serial this node
		// serves goes back (ingresses keep the highest they hold; ?wait=applied compares
		// serials). What was read is the state at the advanced serial.
		var err error
		if obs, err = r.id.Advance(ctx, r.st, obs, r.adoptPast.epoch, r.adoptPast.serial); err != nil {
			return -1, err
		}
	}
	// Commit only a complete read: a failure above returned with r.objects untouched.
	r.objects = next
	r.setLive(entries, now)
	r.id.Commit(obs)
	if full {
		r.lastFull = now
	}
	if wasForeign {
		r.log.Info("store accepted", "epoch", obs.Epoch, "serial", obs.Serial)
		if r.onAccepted != nil {
			r.onAccepted()
		}
	}
	skippedCount := r.derive(now, nil) // a full read: what changed is not known
	if r.adopting {
		r.adopting = false
		os.Remove(filepath.Join(r.stateDir, AdoptFile))
		r.log.Warn("adopted the store as it is (operator request)", "epoch", obs.Epoch, "serial", obs.Serial)
	}
	return skippedCount, nil
}

// checkAdopt acts on the operator's adopt request (<stateDir>/store-adopt): while the
// store is foreign (or not yet checked against what this node remembers), forget the
// remembered identity, so this pass accepts the store as it is; otherwise there is
// nothing to adopt and the request is dropped. A request is never left lying around to
// adopt some later, unrelated store silently.
func (r *Reconciler) checkAdopt() {
	if r.stateDir == "" || r.adopting || !AdoptRequested(r.stateDir) {
		return
	}
	if !r.id.Foreign() {
		os.Remove(filepath.Join(r.stateDir, AdoptFile))
		r.log.Info("store adopt requested, but the store is the one this node serves: nothing to adopt")
		return
	}
	r.log.Warn("adopting the store as it is (operator request): forgetting the store this node served",
		"epoch", r.id.Epoch(), "serial", r.id.Serial(), "reason", r.id.ForeignReason())
	// The last serial this node served: an adopted store of that epoch behind it (a
	// restored backup) has its serial advanced past it (readAll).
	r.adoptPast.serial, r.adoptPast.epoch = r.id.Mark()
	if cur := r.pub.Current(); cur != nil {
		if n, e, ok := cur.Mark(); ok && e == r.adoptPast.epoch && n > r.adoptPast.serial {
			r.adoptPast.serial = n
		}
	}
	// Writes stay refused until this adoption's pass commits (its serial advanced).
	r.id.Adopt()
	r.objects, r.lastFull = nil, time.Time{} // read everything
	r.adopting = true
}
