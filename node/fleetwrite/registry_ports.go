package fleetwrite

import (
	"slices"
	"time"
)

// holder names who holds port p: an app (and incarnation) with an instance on it, one
// whose released port is still quarantined, or one with the idle port of its pair
// there. Pairs come last: a pair never overrides an instance or a quarantine (the
// registry never writes a pair over either; a corrupt file could, and then the
// application left by the port must keep it).
// takenFor is the error set would answer for a write of app (incarnation appID) to port
// p held by another application (a *portTakenError), or nil: a check before anything is
// done with p (a move's serving check probes only a port the write could take).
func (r *Registry) takenFor(app, appID string, p int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire()
	if h, hid, why := r.holder(p); h != "" && (h != app || hid != appID) {
		if h == app {
			why += " an earlier incarnation of"
		}
		return &portTakenError{Port: p, App: h, AppID: hid, Why: why}
	}
	return nil
}

func (r *Registry) holder(p int) (app, appID, why string) {
	for a, i := range r.state.Instances {
		if i.Port == p {
			return a, i.AppID, "is held by"
		}
	}
	for _, q := range r.state.Quarantine {
		if q.Port == p && q.Pending {
			return q.App, q.AppID, "is quarantined until this node's new record is announced (its last record, written before a restart, still publishes it), published for"
		}
		if q.Port == p {
			return q.App, q.AppID, "is quarantined until " + q.Until.Format(time.RFC3339) + ", released by"
		}
	}
	for a, pr := range r.state.Pairs {
		if pr.has(p) {
			return a, pr.AppID, "is the idle port of the pair of"
		}
	}
	return "", "", ""
}

// lowestFree is the lowest port of the range, other than except and the API port,
// that nobody holds or that app's incarnation appID holds or left (0: none; caller
// holds mu).
func (r *Registry) lowestFree(app, appID string, except ...int) int {
	for p := r.min; p <= r.max; p++ {
		if p == r.reserved || slices.Contains(except, p) {
			continue
		}
		if h, hid, _ := r.holder(p); h != "" && (h != app || hid != appID) {
			continue
		}
		return p
	}
	return 0
}

// ownQuarantined is the lowest port of the range (not the API port, not except) that
// app's incarnation appID left and is still quarantined (0: none; caller holds mu).
func (r *Registry) ownQuarantined(app, appID string, except int) int {
	best := 0
	for _, q := range r.state.Quarantine {
		if q.App == app && q.AppID == appID && q.Port != except && q.Port != r.reserved &&
			q.Port >= r.min && q.Port <= r.max && (best == 0 || q.Port < best) {
			if h, hid, _ := r.holder(q.Port); h == app && hid == appID {
				best = q.Port
			}
		}
	}
	return best
}

// quarantinedBy counts the quarantined ports released by app's incarnation appID, but
// the ports except, and returns when the first of them frees (caller holds mu).
func (r *Registry) quarantinedBy(app, appID string, except ...int) (n int, first time.Time) {
	for _, q := range r.state.Quarantine {
		if q.App == app && q.AppID == appID && !slices.Contains(except, q.Port) {
			if n++; first.IsZero() || q.Until.Before(first) {
				first = q.Until
			}
		}
	}
	return n, first
}

func (r *Registry) expire() {
	now := r.now()
	kept := r.state.Quarantine[:0]
	for _, q := range r.state.Quarantine {
		if q.Pending || now.Before(q.Until) {
			kept = append(kept, q)
		}
	}
	r.state.Quarantine = kept
}

func (r *Registry) dropQuarantine(p int) {
	kept := r.state.Quarantine[:0]
	for _, q := range r.state.Quarantine {
		if q.Port != p {
			kept = append(kept, q)
		}
	}
	r.state.Quarantine = kept
}
