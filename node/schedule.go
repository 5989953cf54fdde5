package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/store"
)

// The node's loops: each periodic activity is a step of the package that owns it, taking
// ctx and now (self.Record.Heartbeat, probe.Prober.Round, ingress.Book.Flush,
// fleetwrite.Writer.AuditSweep, reconcile.Reconciler.Pass through its Run); the root
// only schedules them, on tickers and kicks. A test (node/internal/fleetsim) calls the
// same steps on a virtual clock.

// kicks are the "now" signals: a reconcile pass (after a write through this node), a
// rewrite of this node's record (its instances changed), and a republish of the fleet
// certificates (their set changed: the root drains it into the publisher, built after
// the certificate manager). Each holds at most one pending kick.
type kicks struct {
	reconcile chan struct{}
	heartbeat chan struct{}
	certs     chan struct{}
}

func newKicks() *kicks {
	return &kicks{reconcile: make(chan struct{}, 1), heartbeat: make(chan struct{}, 1), certs: make(chan struct{}, 1)}
}

// Certs says the fleet certificates' set changed.
func (k *kicks) Certs() { kick(k.certs) }

// Reconcile asks for a pass now.
func (k *kicks) Reconcile() { kick(k.reconcile) }

// Heartbeat asks for this node's record to be rewritten now.
func (k *kicks) Heartbeat() { kick(k.heartbeat) }

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// schedule is when one step runs.
type schedule struct {
	every time.Duration   // a run every this long (0: on kicks alone)
	kick  <-chan struct{} // a run now (nil: none)
	// atStart: the first run is at once, not after every (or the first kick).
	atStart bool
	// bound is each run's deadline (0: none; a step that starts background work
	// under ctx, the prober's, must have none).
	bound time.Duration
	// clock is the step's now (nil: time.Now).
	clock func() time.Time
	// first (nil: none) is closed once the first run returned.
	first chan<- struct{}
	step  func(ctx context.Context, now time.Time)
}

// on is the loop that runs the step as scheduled until ctx ends.
func (s schedule) on(ctx context.Context) func() { return func() { s.run(ctx) } }

// run runs the step as scheduled until ctx ends.
func (s schedule) run(ctx context.Context) {
	var tick <-chan time.Time
	if s.every > 0 {
		t := time.NewTicker(s.every)
		defer t.Stop()
		tick = t.C
	}
	clock := s.clock
	if clock == nil {
		clock = time.Now
	}
	for first := true; ; first = false {
		if !first || !s.atStart {
			select {
			case <-ctx.Done():
				return
			case <-tick:
			case <-s.kick:
			}
		}
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if s.bound > 0 {
			sctx, cancel = context.WithTimeout(ctx, s.bound)
		}
		s.step(sctx, clock())
		cancel()
		if s.first != nil {
			close(s.first)
			s.first = nil
		}
	}
}

// ingressFlushEvery is how often the ingress book is flushed: an ingress's object is
// rewritten at most this often anyway.
const ingressFlushEvery = ingress.MinWriteGap

// orphanSweep is the heartbeat's sweep (self.Options.SweepOrphans): it announces the
// changes this node stored whose serial bump failed (fleetwrite.Writer.AnnouncePending),
// and releases this node's instances of deleted or recreated applications, once the
// reconcile loop has a view of the applications to compare with.
func orphanSweep(rec func() *reconcile.Reconciler, id *store.Identity, w func() *fleetwrite.Writer, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		_ = w().AnnouncePending(ctx) // a failure is logged there, and retried at the next beat
		apps := rec().KnownApps()
		if apps == nil || id.Foreign() {
			return // no view yet, or a store that is not ours: release nothing on its word
		}
		known := make(map[string]string, len(apps))
		for _, a := range apps {
			known[a.Name] = a.ID
		}
		if _, err := w().SweepOrphans(ctx, known); err != nil && ctx.Err() == nil {
			log.Warn("sweeping orphaned instances", "err", err)
		}
	}
}

// Steps are the node's periodic steps, each run at a given now: what Run schedules on
// tickers and kicks. A test drives a node with them on a virtual clock, with no loop
// running (node/internal/fleetsim).
type Steps struct {
	// Heartbeat writes this node's record (self.Record.Heartbeat).
	Heartbeat func(ctx context.Context, now time.Time)
	// Reconcile is one pass (reconcile.Reconciler.Pass); full re-reads every object.
	Reconcile func(ctx context.Context, now time.Time, full bool) error
	// FlushIngresses writes the ingress reports this node received (ingress.Book.Flush).
	FlushIngresses func(ctx context.Context, now time.Time)
	// AuditSweep deletes the audit records past audit.retention (fleetwrite.Writer.AuditSweep).
	AuditSweep func(ctx context.Context, now time.Time)
	// ProbeRound probes this node's instances (probe.Prober.Round); nil with probing off.
	ProbeRound func(ctx context.Context, now time.Time)
	// SaveServed writes served.json as the last pass handed it over
	// (reconcile.Reconciler.SaveServed; Run's saver writes it at once).
	SaveServed func()
}

// Steps returns the node's steps.
func (s *Server) Steps() Steps {
	st := Steps{Heartbeat: s.self.Heartbeat, Reconcile: s.rec.Pass, FlushIngresses: s.ingresses.Flush, AuditSweep: s.writer.AuditSweep,
		SaveServed: s.rec.SaveServed}
	if s.probes != nil {
		st.ProbeRound = s.probes.Round
	}
	return st
}
