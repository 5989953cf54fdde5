// Package reconcile is the node's reconcile loop (docs/design.md §5/§6): it reads the
// store (one conditional read of the serial a tick, the keys a bump names, a full read
// when due), folds what it read into the fleet state, derives the routing document and
// publishes it: the only caller of Publish. It remembers what it served in the state
// dir (served.json), so a restart on a foreign store serves that document instead.
package reconcile

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	saved struct {
		epoch, revision string
		serial          uint64
	}
	// adopting: the operator's adopt request was acted on (the identity reset); the
	// request is removed once a pass has accepted the store. adoptPast is the last serial
	// (and its epoch) this node served before: an adopted store of that epoch behind it
	// has its serial advanced past it (pass.go).
	adopting  bool
	adoptPast struct {
		serial uint64
		epoch  string
	}
	// onAccepted runs when a store that was foreign (or not yet checked) is accepted.
	onAccepted func()
	// onOwnRecord sees this node's own record (nodes/<selfName>.json) at every
	// derivation, so a record written by another node of the same name is noticed.
	selfName    string
	onOwnRecord func(fleet.NodeRecord)
	// known is where every derivation's apps are stored for readers built earlier (nil:
	// none).
	known *Apps

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
	// lastAhead fingerprints the last logged set of records dated beyond the TTL ahead.
	lastAhead string
	// lastSkipped fingerprints the last logged set of derivation drops.
	lastSkipped string
	// lastPublish is when the revision last moved (see run's publish window).
	lastPublish time.Time

	mu     sync.Mutex
	status Status
	apps   AppView // the applications of the last derivation (nil before one)
	// metrics observe every pass (nil: none).
	metrics *passMetrics
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
	// Metrics, when set, is where the pass series are registered (metrics.go).
	Metrics prometheus.Registerer
	// OnAccepted runs when a store that was foreign (or not yet checked) is accepted;
	// OnOwnRecord sees this node's own record. Each may be nil.
	OnAccepted  func()
	OnOwnRecord func(fleet.NodeRecord)
	// Apps, when set, is told every derivation's applications (KnownApps).
	Apps *Apps
}

// New builds a reconciler; nothing runs until Run (and RunSaver).
func New(o Options) *Reconciler {
	r := &Reconciler{
		st: o.Store, pub: o.Publisher, log: o.Log, id: o.Identity,
		self: o.Self, opts: o.FleetOptions,
		metrics:     newPassMetrics(o.Metrics),
		heartbeat:   o.Heartbeat,
		stateDir:    o.StateDir,
		saver:       newServedSaver(o.StateDir, o.Log),
		onAccepted:  o.OnAccepted,
		selfName:    o.SelfName,
		onOwnRecord: o.OnOwnRecord,
		known:       o.Apps,
	}
	if o.Memory != nil {
		// A restart: the store must be the one this node served (see served.go).
		r.remembered = o.MemoryDoc
		r.saved.epoch, r.saved.revision, r.saved.serial = o.Memory.Epoch, o.Memory.Revision, o.Memory.Serial
	}
	return r
}

// RunSaver writes served.json as passes hand it over, until ctx ends, and then what is
// pending: run it beside Run and stop it after Run returned.
func (r *Reconciler) RunSaver(ctx context.Context) { r.saver.run(ctx) }

// SaveServed writes served.json as the last pass handed it over, if not yet written: one
// step of the saver (RunSaver runs it whenever a pass hands one over).
func (r *Reconciler) SaveServed() { r.saver.flush() }

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
