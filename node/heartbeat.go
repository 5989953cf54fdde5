package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/node/store"
)

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

// heartbeat rewrites this node's record every interval and whenever instances change,
// releasing first this node's instances of deleted or recreated applications.
type heartbeat struct {
	self     *self.Record
	rec      *reconcile.Reconciler
	identity *store.Identity
	writer   *fleetwrite.Writer
	log      *slog.Logger
	every    time.Duration
	now      <-chan struct{} // kicks.heartbeat
}

// run is the heartbeat loop.
//
// first is closed once the first write has been tried (written or failed): the
// reconciler's first pass waits for it (up to ownRecordWait), so the first document a node serves after
// ready already has this node's own record (its API upstream) in it, even on a
// brand-new store.
func (h *heartbeat) run(ctx context.Context, first chan<- struct{}) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		// The first write happens at once (asynchronously to serving, so a hung store
		// never delays /v1/healthz or SIGTERM), then every heartbeat and on change.
		wctx, cancel := context.WithTimeout(ctx, reconcile.PassTimeout)
		h.sweepOrphans(wctx)
		h.self.Write(wctx)
		cancel()
		// The last pass's view of the fleet: another live node on this node's address,
		// or a loopback address among several nodes (node/self/address.go).
		h.self.ObserveFleet(h.rec.Status().Nodes, time.Now())
		if first != nil {
			close(first)
			first = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.now:
		}
	}
}

// sweepOrphans releases this node's instances of deleted or recreated applications
// (once the reconcile loop has a view of the applications to compare with).
func (h *heartbeat) sweepOrphans(ctx context.Context) {
	apps := h.rec.KnownApps()
	if apps == nil || h.identity.Foreign() {
		return // no view yet, or a store that is not ours: release nothing on its word
	}
	known := make(map[string]string, len(apps))
	for _, a := range apps {
		known[a.Name] = a.ID
	}
	if _, err := h.writer.SweepOrphans(ctx, known); err != nil && ctx.Err() == nil {
		h.log.Warn("sweeping orphaned instances", "err", err)
	}
}

// auditSweepLoop deletes audit records past the retention, at start and daily.
func auditSweepLoop(ctx context.Context, w *fleetwrite.Writer, log *slog.Logger, retention time.Duration) {
	t := time.NewTicker(24 * time.Hour)
	defer t.Stop()
	for {
		if n, err := w.SweepAudit(ctx); err != nil && ctx.Err() == nil {
			log.Warn("sweeping the audit log", "err", err)
		} else if n > 0 {
			log.Info("swept the audit log", "deleted", n, "retention", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
