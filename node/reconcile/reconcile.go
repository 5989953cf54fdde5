// Package reconcile is the node's reconcile loop (docs/design.md §5/§6): it reads the
// store (one conditional read of the serial a tick, the keys a bump names, a full read
// when due), folds what it read into the fleet state, derives the routing document and
// publishes it: the only caller of Publish. It remembers what it served in the state
// dir (served.json), so a restart on a foreign store serves that document instead.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// Reconciler folds the store into published snapshots. One goroutine runs it; the
// status fields are read by handlers under mu.
//
// Cost, flat in the fleet's size: every tick is one conditional read of the serial.
// When it moved by one and its bump named what changed, the pass GETs those keys and
// nothing else (one changed object: two requests). A full read ends with one more
// conditional read of the serial, and so does a one-step read that found a named key
// absent: a store swapped (wiped, unmounted) between the serial read and the object
// reads is discarded, never derived from (Identity.Recheck). Liveness listings are not
// re-checked (that would cost a read per heartbeat interval): they only add entries
// (mergeLive). When it moved further (this node
// missed a bump), in another epoch, without names, or when a full pass is due, it lists
// the store and GETs the keys whose etag moved. Heartbeats do not move the serial:
// liveness comes from one LIST of nodes/ per heartbeat interval, whose modification
// times say which records were rewritten (see liveness).
type Reconciler struct {
	st   store.Store
	pub  *publish.Publisher
	log  *slog.Logger
	opts func() fleet.Options // Now is filled per pass
	self fleet.NodeSettings

	// id owns the store's serial and epoch (read here, bumped by writers).
	id *store.Identity

	// stateDir holds served.json (what this node served, from which store) and the
	// operator's store-adopt request; "" keeps nothing (see served.go).
	stateDir string
	// remembered is the document of served.json, published when the store turns out
	// foreign before this run published anything; dropped after the first derivation.
	remembered *routing.Document
	// saver writes served.json; saved names what it was last handed.
	saver *servedSaver
	saved struct{ epoch, revision string }
	// adopting: the operator's adopt request was acted on (the identity reset); the
	// request is removed once a pass has accepted the store.
	adopting bool
	// onAccepted runs when a store that was foreign (or not yet checked) is accepted.
	onAccepted func()
	// onOwnRecord sees this node's own record (nodes/<selfName>.json) at every
	// derivation, so a record written by another node of the same name is noticed.
	selfName    string
	onOwnRecord func(fleet.NodeRecord)

	objects  map[string]cachedObject
	lastFull time.Time
	// fold is objects as the fleet state, kept across passes; deriver derives from it,
	// patching its last document when a pass names what changed (fleet.Deriver).
	fold    *fold
	deriver fleet.Deriver
	// heartbeat is how often nodes rewrite their records, and how often the pass lists
	// nodes/ for liveness (0: never, apart from full reads); live is that list, by key,
	// from lastLive.
	heartbeat time.Duration
	live      map[string]store.Entry
	lastLive  time.Time
	lastStale string
	// lastSkipped fingerprints the last logged set of derivation drops.
	lastSkipped string
	// lastPublish is when the revision last moved (see run's publish window).
	lastPublish time.Time

	mu     sync.Mutex
	status Status
	apps   AppView // the applications of the last derivation (nil before one)
	// onPass observes every pass (metrics); may be nil.
	onPass func(d time.Duration, err error, skipped int)

	// onGroups learns the ingress groups applications name, after each derivation
	// (nil in tests).
	onGroups func(named map[string]bool)
}

// Options is what a reconciler is built from.
type Options struct {
	Store     store.Store
	Publisher *publish.Publisher
	Log       *slog.Logger
	// Identity owns the store's serial and epoch (read here, bumped by writers).
	Identity *store.Identity
	// Self is this node's fleet settings (records naming others are reported);
	// SelfName its name, whose record OnOwnRecord sees at every derivation.
	Self     fleet.NodeSettings
	SelfName string
	// FleetOptions are the derivation's options (Now is filled per pass).
	FleetOptions func() fleet.Options
	// Heartbeat is how often nodes rewrite their records, and how often a pass lists
	// nodes/ for liveness.
	Heartbeat time.Duration
	// StateDir holds served.json and the operator's adopt request ("": nothing kept);
	// Memory and MemoryDoc are what it held at start (LoadServed; nil: nothing).
	StateDir  string
	Memory    *Memory
	MemoryDoc *routing.Document
	// OnPass observes every pass (metrics); OnAccepted runs when a store that was
	// foreign (or not yet checked) is accepted; OnOwnRecord sees this node's own
	// record; OnGroups the groups applications name. Each may be nil.
	OnPass      func(d time.Duration, err error, skipped int)
	OnAccepted  func()
	OnOwnRecord func(fleet.NodeRecord)
	OnGroups    func(named map[string]bool)
}

// New builds a reconciler; nothing runs until Run (and RunSaver).
func New(o Options) *Reconciler {
	r := &Reconciler{
		st: o.Store, pub: o.Publisher, log: o.Log, id: o.Identity,
		self: o.Self, opts: o.FleetOptions,
		onPass:      o.OnPass,
		heartbeat:   o.Heartbeat,
		stateDir:    o.StateDir,
		saver:       newServedSaver(o.StateDir, o.Log),
		onAccepted:  o.OnAccepted,
		selfName:    o.SelfName,
		onGroups:    o.OnGroups,
		onOwnRecord: o.OnOwnRecord,
	}
	if o.Memory != nil {
		// A restart: the store must be the one this node served (see served.go).
		r.remembered = o.MemoryDoc
		r.saved.epoch, r.saved.revision = o.Memory.Epoch, o.Memory.Revision
	}
	return r
}

// RunSaver writes served.json as passes hand it over, until ctx ends, and then what is
// pending: run it beside Run and stop it after Run returned.
func (r *Reconciler) RunSaver(ctx context.Context) { r.saver.run(ctx) }

type cachedObject struct {
	etag  string
	value any // fleet.App, fleet.Claim, fleet.NodeRecord
	// bad is the reason the stored version is malformed (value is then nil).
	bad string
}

type Status struct {
	LastPass         time.Time
	LastError        string
	UnreachableSince time.Time
	Skipped          []fleet.Skipped
	Nodes            []fleet.NodeRecord
	Mismatched       []string

	// Remembered: the published document is the one remembered in the state dir (the
	// store is foreign and nothing was derived in this run).
	Remembered bool
}

// Pass runs one reconcile step at now (Run calls it every tick; a test drives it with
// its own clock). full forces a re-list of every object.
func (r *Reconciler) Pass(ctx context.Context, now time.Time, full bool) (err error) {
	start := time.Now()
	skippedCount := -1 // no derivation this pass
	// Read before an adoption clears it.
	wasForeign := r.id.Foreign()
	r.checkAdopt()
	defer func() {
		foreign := errors.Is(err, store.ErrForeign)
		if foreign && r.remembered != nil && r.pub.Current() == nil {
			// A restart on a foreign store: serve what this node served, not nothing
			// (503 forever) and never what that store holds.
			r.pub.Publish(r.remembered, now)
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
		if r.onPass != nil {
			r.onPass(time.Since(start), err, skippedCount)
		}
	}()

	obs, err := r.id.Observe(ctx, r.st)
	if err != nil {
		return err
	}
	if r.objects == nil || r.lastFull.IsZero() {
		full = true
	}
	if !obs.Changed && !full {
		// Nothing was written. The document can still move by time alone, when a node
		// crosses the TTL (or comes back by heartbeat); re-derive only then.
		live, listed, err := r.liveness(ctx, now)
		if err != nil {
			return err
		}
		if listed {
			r.mergeLive(live, now)
		}
		if stale := r.staleKey(now); stale == r.lastStale && !listed {
			return nil
		}
		skippedCount = r.derive(now, []string{}) // no object changed: only time and heartbeats moved
		return nil
	}

	if obs.OneStep && !full && !wasForeign && !r.adopting {
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
				return fmt.Errorf("reading %s: %w", k, err)
			}
			c := r.decode(o)
			read[k] = &c
		}
		live, listed, err := r.liveness(ctx, now)
		if err != nil {
			return err
		}
		// An absence may be a store swapped (wiped, unmounted) since the serial read,
		// not a delete: confirm the serial before deleting what the bump named. Reads
		// that found their keys cost nothing more.
		if absent {
			if err := r.id.Recheck(ctx, r.st, obs); err != nil {
				return err
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
		skippedCount = r.derive(now, changed)
		return nil
	}

	var entries []store.Entry
	for _, p := range []string{fleet.PrefixApps, fleet.PrefixDomains, fleet.PrefixNodes} {
		es, err := r.st.List(ctx, p)
		if err != nil {
			return fmt.Errorf("listing %s: %w", p, err)
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
			return fmt.Errorf("reading %s: %w", e.Key, err)
		}
		next[e.Key] = r.decode(o)
	}
	// A store swapped (wiped, unmounted, replaced) between the serial read and the
	// listing answered with its own, possibly empty, contents under the old serial:
	// discard the pass, never derive from it (docs/design.md §5/§6).
	if err := r.id.Recheck(ctx, r.st, obs); err != nil {
		return err
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
	skippedCount = r.derive(now, nil) // a full read: what changed is not known
	if r.adopting {
		r.adopting = false
		os.Remove(filepath.Join(r.stateDir, AdoptFile))
		r.log.Warn("adopted the store as it is (operator request)", "epoch", obs.Epoch, "serial", obs.Serial)
	}
	return nil
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
	r.id.Reset()
	r.objects, r.lastFull = nil, time.Time{} // read everything
	r.adopting = true
}

// PassTimeout bounds one reconcile pass, so a hung store cannot stall shutdown.
const PassTimeout = 20 * time.Second

// Run ticks until ctx ends. kick forces an immediate (non-full) pass, e.g. after a write
// through this node's own API. Publishing is leading-edge and bounded: a kick after a
// quiet spell runs at once (a lone flip stays fast), while a kick within window of the
// last publish waits for the window's end, so a burst of changes (readiness churn)
// reloads every Traefik at most once per window; kicks that arrive meanwhile coalesce.
func (r *Reconciler) Run(ctx context.Context, interval, fullInterval, window time.Duration, kick <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		now := time.Now()
		full := r.lastFull.IsZero() || now.Sub(r.lastFull) >= fullInterval
		pctx, cancel := context.WithTimeout(ctx, PassTimeout)
		err := r.Pass(pctx, now, full)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.log.Debug("reconcile pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
			if wait := time.Until(r.lastPublish.Add(window)); wait > 0 {
				wt := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					wt.Stop()
					return
				case <-wt.C:
				}
			}
		}
	}
}

// KnownApps maps application name → application, from the last derivation (nil
// before one). Read-only: a derivation replaces the map, never changes it.
func (r *Reconciler) KnownApps() AppView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.apps
}

func skippedKey(sk []fleet.Skipped) string {
	var b strings.Builder
	for _, s := range sk {
		b.WriteString(s.Object)
		b.WriteByte(0)
		b.WriteString(s.Reason)
		b.WriteByte(0)
	}
	return b.String()
}
