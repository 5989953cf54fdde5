package probe

import (
	"slices"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// probeState is what the prober knows of one instance.
type probeState struct {
	target   probeTarget
	up       bool
	fails    int // consecutive failures
	oks      int // consecutive successes
	probes   int // probes of this target
	last     time.Time
	lastErr  string
	lastDur  time.Duration
	since    time.Time // when up last changed (or the target was set)
	inflight bool
	// slow: the last probe timed out; the next goes through the slow lane.
	slow bool
	// Flap damping: recoveries are the times the probes brought the instance back
	// (upAfter successes after being down) within flapWindow; penalty is the current
	// hold-down (0: none), heldUntil when the one in force ends.
	recoveries []time.Time
	penalty    time.Duration
	heldUntil  time.Time
	// counted: the recovery of this down spell was already counted (a port change
	// held down); the probes' own run of successes does not count it again.
	counted bool
	// released: when the instance was released (zero while it is set). A state down
	// when released is kept (gone) for probe.flapWindow from then, as a recovery
	// would be: setting it again is a recovery, damped like any other.
	released time.Time
}

// heldLocked reports whether st is held down at now (caller holds mu).
func (st *probeState) heldLocked(now time.Time) bool {
	return !st.up && now.Before(st.heldUntil)
}

// recoveredLocked applies flap damping to a recovery of st at now (upAfter successes
// after being down; caller holds mu): it reports the hold-down begun or extended (0 when
// none), and whether one began (rather than extended one in force).
func (p *Prober) recoveredLocked(st *probeState, now time.Time) (time.Duration, bool) {
	window := time.Duration(p.cfg.FlapWindow)
	if window <= 0 {
		return 0, false
	}
	if n := len(st.recoveries); n > 0 && st.penalty > 0 {
		// Decay: the penalty halves for every whole window without a recovery.
		for quiet := now.Sub(st.recoveries[n-1]); quiet >= window && st.penalty > 0; quiet -= window {
			st.penalty /= 2
		}
		if st.penalty < time.Duration(p.cfg.HoldDown) {
			st.penalty = 0
		}
	}
	kept := st.recoveries[:0]
	for _, t := range st.recoveries {
		if now.Sub(t) < window {
			kept = append(kept, t)
		}
	}
	st.recoveries = append(kept, now)
	if st.penalty == 0 && len(st.recoveries) < p.cfg.FlapUps {
		return 0, false // not flapping: published up at once
	}
	if st.penalty == 0 {
		st.penalty = time.Duration(p.cfg.HoldDown)
	} else {
		st.penalty = min(2*st.penalty, time.Duration(p.cfg.HoldDownMax))
	}
	began := !now.Before(st.heldUntil)
	st.heldUntil = now.Add(st.penalty)
	p.m.holdDowns.Inc()
	return st.penalty, began
}

// stateLocked is app's probe state for its instance inst (caller holds mu), made at the
// first sight of the instance, of its new port or of its new incarnation. Damping
// belongs to the instance of the incarnation, not to its port: a new port (or the
// instance set again after a release, see gone) keeps the recoveries and the hold-down,
// is probed afresh, and starts from the instance's verdict; a down instance put on a
// new port is a recovery (recoveredLocked), trusted up unless damping holds it down.
//
// A change is taken only when it is the registry's current instance: a caller's view
// read before a later write (a round's or a heartbeat's snapshot) must not move the
// state back to the port left, which would count a recovery per stale view. Then the
// current state is returned as it is (nil when there is none).
func (p *Prober) stateLocked(app string, inst fleet.Instance, now time.Time) *probeState {
	st := p.states[app]
	if st != nil && st.target.appID == inst.AppID && st.target.port == inst.Port {
		return st
	}
	if cur, ok := p.declared(app); !ok || cur.Port != inst.Port || cur.AppID != inst.AppID {
		return st // a stale view
	}
	prev := st
	if prev == nil {
		prev = p.gone[app]
	}
	delete(p.gone, app)
	tgt := probeTarget{app: app, appID: inst.AppID, port: inst.Port}
	st = &probeState{target: tgt, up: true, since: now}
	p.states[app] = st
	if prev == nil || prev.target.appID != inst.AppID {
		return st // a new instance or incarnation: trusted until probed
	}
	st.target.path = prev.target.path
	st.recoveries, st.penalty, st.heldUntil = slices.Clone(prev.recoveries), prev.penalty, prev.heldUntil
	if !prev.up {
		if d, began := p.recoveredLocked(st, now); now.Before(st.heldUntil) {
			st.up, st.counted = false, true
			if began {
				p.log.Warn("instance probe: flapping across ports, held down", "app", app, "port", inst.Port, "holdDown", d.String())
			}
		}
	}
	return st
}

// dampedLocked reports whether st's damping still counts at now: a hold-down in force,
// a recovery within probe.flapWindow, a penalty not yet decayed, or an instance down
// when released within probe.flapWindow (setting it again is a recovery: without this
// a dead instance released and set again, over and over, would start trusted up every
// time, one published up and down per cycle) (caller holds mu).
func (p *Prober) dampedLocked(st *probeState, now time.Time) bool {
	window := time.Duration(p.cfg.FlapWindow)
	if window <= 0 {
		return false
	}
	if now.Before(st.heldUntil) {
		return true
	}
	if !st.up && !st.released.IsZero() && now.Sub(st.released) < window {
		return true
	}
	n := len(st.recoveries)
	if n == 0 {
		return false
	}
	quiet := now.Sub(st.recoveries[n-1])
	if quiet < window {
		return true
	}
	pen := st.penalty
	for ; quiet >= window && pen > 0; quiet -= window {
		pen /= 2
	}
	return pen >= time.Duration(p.cfg.HoldDown) && pen > 0
}
