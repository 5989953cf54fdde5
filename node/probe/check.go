package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// probeTarget is what is probed: app's instance on port, over TCP or GET path.
type probeTarget struct {
	app, appID string
	port       int
	path       string // "" → TCP connect
}

func (t probeTarget) kind() string {
	if t.path == "" {
		return "tcp"
	}
	return "http"
}

// probe runs one probe (once a slot is free) and records it.
func (p *Prober) probe(ctx context.Context, st *probeState, tgt probeTarget, slow bool) {
	sem := p.sem
	if slow {
		sem = p.slowSem
	}
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		p.mu.Lock()
		st.inflight = false
		p.mu.Unlock()
		return
	}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, p.cfg.EffectiveTimeout())
	err := p.check(pctx, tgt)
	cancel()
	<-sem
	if ctx.Err() != nil {
		p.mu.Lock()
		st.inflight = false
		p.mu.Unlock()
		return // shutting down: a cancelled probe says nothing of the instance
	}
	p.record(st, tgt, err, time.Since(start))
}

// check probes tgt once: nil is up.
func (p *Prober) check(ctx context.Context, tgt probeTarget) error {
	addr := netip.AddrPortFrom(p.addr, uint16(tgt.port)).String()
	if tgt.path == "" {
		c, err := p.dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST on close: no TIME_WAIT for every probe
		}
		return c.Close()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+tgt.path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "scafo-node-probe")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close() // never read: the status is the verdict
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("health path %s answered %d", tgt.path, resp.StatusCode)
	}
	return nil
}

// record applies one probe's result with hysteresis.
func (p *Prober) record(st *probeState, tgt probeTarget, err error, d time.Duration) {
	result := "up"
	if err != nil {
		result = "down"
	}
	p.m.results.WithLabelValues(tgt.kind(), result).Inc()
	p.m.duration.WithLabelValues(tgt.kind()).Observe(d.Seconds())

	p.mu.Lock()
	st.inflight = false
	if p.states[tgt.app] != st || st.target != tgt {
		p.mu.Unlock()
		return // the instance changed meanwhile: this result is about something else
	}
	now := p.now()
	st.probes++
	st.last, st.lastDur = now, d
	st.slow = err != nil && probeErrText(err) == "timeout"
	changed := false
	var heldFor time.Duration
	held := false // a hold-down begun (logged once)
	if err == nil {
		st.lastErr = ""
		st.oks++
		st.fails = 0
		if !st.up && st.oks == p.cfg.UpAfter && !st.counted {
			heldFor, held = p.recoveredLocked(st, now)
		}
		if !st.up && st.oks >= p.cfg.UpAfter && !now.Before(st.heldUntil) {
			st.up, st.since, changed, st.counted = true, now, true, false
		}
	} else {
		st.lastErr = probeErrText(err)
		st.fails++
		st.oks = 0
		st.counted = false
		if st.up && st.fails >= p.cfg.DownAfter {
			st.up, st.since, changed = false, now, true
		}
	}
	up, lastErr := st.up, st.lastErr
	p.mu.Unlock()
	if held {
		p.log.Warn("instance probe: flapping, held down", "app", tgt.app, "port", tgt.port, "holdDown", heldFor.String())
	}
	if !changed {
		return
	}
	to := "down"
	if up {
		to = "up"
	}
	p.m.transitions.WithLabelValues(to).Inc()
	p.log.Info("instance probe: "+to, "app", tgt.app, "port", tgt.port, "kind", tgt.kind(), "err", lastErr)
	if inst, ok := p.declared(tgt.app); ok && inst.Ready && inst.Port == tgt.port {
		p.onChange()
	}
}

// probeErrText is a probe failure for status and logs: the error class, never anything
// the instance sent.
func probeErrText(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return err.Error()
	}
}
