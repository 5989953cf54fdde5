package node

import (
	"context"
	"time"

	"github.com/scafo/ingress/node/reconcile"
)

// heartbeatLoop rewrites this node's record every heartbeat and whenever instances change.
func (s *Server) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(time.Duration(s.cfg.Reconcile.Heartbeat))
	defer t.Stop()
	for {
		// The first write happens at once (asynchronously to serving, so a hung store
		// never delays /v1/healthz or SIGTERM), then every heartbeat and on change.
		wctx, cancel := context.WithTimeout(ctx, reconcile.PassTimeout)
		s.sweepOrphans(wctx)
		s.self.Write(wctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.beat:
		}
	}
}

// auditSweepLoop deletes audit records past the retention, at start and daily.
func (s *Server) auditSweepLoop(ctx context.Context) {
	t := time.NewTicker(24 * time.Hour)
	defer t.Stop()
	for {
		if n, err := s.writer.SweepAudit(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("sweeping the audit log", "err", err)
		} else if n > 0 {
			s.log.Info("swept the audit log", "deleted", n, "retention", time.Duration(s.cfg.Audit.Retention))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepOrphans releases this node's instances of deleted or recreated applications
// (once the reconcile loop has a view of the applications to compare with).
func (s *Server) sweepOrphans(ctx context.Context) {
	apps := s.rec.KnownApps()
	if apps == nil || s.identity.Foreign() {
		return // no view yet, or a store that is not ours: release nothing on its word
	}
	known := make(map[string]string, len(apps))
	for _, a := range apps {
		known[a.Name] = a.ID
	}
	if _, err := s.writer.SweepOrphans(ctx, known); err != nil && ctx.Err() == nil {
		s.log.Warn("sweeping orphaned instances", "err", err)
	}
}
