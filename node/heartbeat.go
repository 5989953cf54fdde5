package node

import (
	"context"
	"time"

	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/render/fleet"
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
		s.writeOwnRecord(wctx)
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

// writeOwnRecord writes nodes/<name>.json (this node is its only writer: a write by
// anyone else in between is noticed and reported, see putOwnRecord). It bumps the
// serial, naming the record, only when something but its `seen` time changed since the
// last announced version (instances, address, settings, boot), or when peers may hold
// another version: a heartbeat alone costs peers nothing but their periodic LIST of
// nodes/ (liveness, see reconciler.liveness).
func (s *Server) writeOwnRecord(ctx context.Context) {
	if s.identity.Foreign() {
		// Never into a store this node does not recognise (a wrong bucket is another
		// fleet's); the record is written as soon as the store is accepted.
		s.log.Debug("not writing own node record: the store is foreign", "reason", s.identity.ForeignReason())
		s.announce.fail("the store is foreign: " + s.identity.ForeignReason())
		return
	}
	gen := s.announce.current() // before the registry is read: the record holds every change up to gen
	set := s.settings()
	rec := fleet.NodeRecord{
		Name:      s.cfg.Node.Name,
		Address:   s.cfg.Node.Address,
		APIPort:   s.cfg.Node.APIPort,
		Instances: s.probes.Publish(s.instances.Records()), // declared AND probe up (probe.go)
		Seen:      time.Now().UTC().Truncate(time.Millisecond),
		Settings:  &set,
		Boot:      s.boot(),
	}
	body, err := jsonx.Marshal(rec)
	unseen := rec
	unseen.Seen = time.Time{}
	content, _ := jsonx.Marshal(unseen)
	key := fleet.NodeKey(rec.Name)
	replaced := false
	if err == nil {
		replaced, err = s.putOwnRecord(ctx, key, body)
	}
	bump := err == nil && (replaced || string(content) != s.announced)
	if bump {
		s.announced = "" // until the bump succeeds
		var n uint64
		if n, err = s.identity.Bump(ctx, s.st, key); err == nil {
			s.announced, s.announcedSerial = string(content), n
		}
	}
	s.heartbeatErr.Store(errText(err))
	if err != nil {
		s.announce.fail(err.Error())
		if ctx.Err() == nil {
			s.log.Warn("writing own node record", "err", err)
		}
		return
	}
	// The content is announced: by this bump, or by the earlier one of the same content.
	s.announce.done(gen, s.announcedSerial, rec.Instances)
	if bump {
		s.kickReconcile()
	}
}

func errText(err error) *string {
	if err == nil {
		return nil
	}
	t := err.Error()
	return &t
}
