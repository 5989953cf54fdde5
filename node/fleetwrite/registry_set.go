package fleetwrite

import (
	"errors"
	"fmt"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// Allocate returns the port of app's incarnation appID and its pair, choosing the lowest
// two free ports on first use. An instance left by another incarnation of the name (the
// application was deleted and recreated) is released first: its ports stay
// quarantined, so the new incarnation never inherits the old owner's process. An
// unpaired instance (a file written before pairs, or a node that had no second port
// free) gets its second port now, when one is free.
func (r *Registry) Allocate(app, appID string) (inst fleet.Instance, ports [2]int, created bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unread {
		return fleet.Instance{}, [2]int{}, false, errLastRecordUnread
	}
	r.expire()
	if i, ok := r.state.Instances[app]; ok && i.AppID == appID {
		if _, paired := r.pairOf(app); !paired {
			if second := r.lowestFree(app, appID, i.Port); second != 0 {
				prev := r.clone()
				r.state.Pairs[app] = newPair(appID, i.Port, second)
				r.dropQuarantine(second)
				if err := r.save(); err != nil {
					r.state = prev
					return fleet.Instance{}, [2]int{}, false, err
				}
			}
		}
		return i, r.portsOf(app), false, nil
	}
	p := r.lowestFree(app, appID)
	if p == 0 {
		return fleet.Instance{}, [2]int{}, false, ErrNoFreePort
	}
	second := r.lowestFree(app, appID, p)
	prev := r.clone()
	r.retire(app, appID)
	r.state.Instances[app] = fleet.Instance{Port: p, AppID: appID}
	r.dropQuarantine(p)
	if second != 0 {
		r.state.Pairs[app] = newPair(appID, p, second)
		r.dropQuarantine(second)
	}
	if err := r.save(); err != nil {
		r.state = prev
		return fleet.Instance{}, [2]int{}, false, err
	}
	return r.state.Instances[app], r.portsOf(app), true, nil
}

// Set records the port (explicit, or the allocated one when port is nil) and readiness
// of app's incarnation appID; changed reports a change of the instance (its port or
// readiness: what the node's record publishes). See Registry for the rules of pairs.
func (r *Registry) Set(app, appID string, port *int, ready bool) (inst fleet.Instance, ports [2]int, changed bool, err error) {
	inst, ports, ch, err := r.set(app, appID, port, ready, true)
	return inst, ports, ch != unchanged, err
}

// change is what a write did to an instance.
type change int

const (
	unchanged change = iota
	// changedUnrouted: the instance changed, what it routes did not (a move of a
	// not-ready instance).
	changedUnrouted
	// rerouted: what the instance routes changed (a ready instance's port, its
	// readiness, its release while ready): a routing change.
	rerouted
)

// errUncharged is a write that would change what an instance routes, made as one that
// would not (uncharged): nothing was written. The writer charges it and writes again.
var errUncharged = errors.New("instance write would change a route and was not charged")

// set is Set deciding, under the lock and with the write, whether it is a routing
// change: one that is, when not charged, writes nothing and answers errUncharged.
func (r *Registry) set(app, appID string, port *int, ready, charged bool) (inst fleet.Instance, ports [2]int, ch change, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unread {
		return fleet.Instance{}, [2]int{}, unchanged, errLastRecordUnread
	}
	r.expire()
	cur, had := r.state.Instances[app]
	if had && cur.AppID != appID {
		cur, had = fleet.Instance{}, false // another incarnation's: never inherited
	}
	pr, paired := pair{}, false
	if had {
		pr, paired = r.pairOf(app)
	}
	p := cur.Port
	if port != nil {
		p = *port
	}
	if p == 0 {
		return fleet.Instance{}, [2]int{}, unchanged, ErrNoInstance
	}
	if p < 1 || p > 65535 {
		return fleet.Instance{}, [2]int{}, unchanged, ErrPortOutOfRange
	}
	if h, hid, why := r.holder(p); h != "" && (h != app || hid != appID) {
		if h == app {
			why += " an earlier incarnation of"
		}
		return fleet.Instance{}, [2]int{}, unchanged, &portTakenError{Port: p, App: h, AppID: hid, Why: why}
	}
	next := fleet.Instance{Port: p, Ready: ready, AppID: appID}
	if had && paired && cur == next {
		return cur, pr.Ports, unchanged, nil
	}
	if had && !paired {
		// Unpaired (a file written before pairs): the lowest free port becomes the
		// second; then the move, if any, is judged against that pair.
		if second := r.lowestFree(app, appID, cur.Port); second != 0 {
			pr, paired = newPair(appID, cur.Port, second), true
		} else if cur == next {
			return cur, r.portsOf(app), unchanged, nil // no second port free yet
		}
	}
	var newPr pair // the pair after this write (zero: unpaired)
	left := 0      // the port this write leaves (quarantined)
	switch {
	case had && (cur.Port == p || paired && pr.has(p)):
		if paired {
			newPr = pr // within the pair: costs nothing
		}
	case had:
		left = cur.Port
		if paired {
			newPr = newPair(appID, p, pr.other(cur.Port))
		} else if second := r.lowestFree(app, appID, p, cur.Port); second != 0 {
			newPr = newPair(appID, p, second)
		}
	default: // a new instance: its second port, one it left before if any
		second := r.ownQuarantined(app, appID, p)
		if second == 0 {
			second = r.lowestFree(app, appID, p)
		}
		if second != 0 {
			newPr = newPair(appID, p, second)
		}
	}
	if !had || left != 0 {
		// A new port outside the pair: the one left (now, or by a release before) stays
		// quarantined; the ports of the new pair leave the quarantine.
		n, first := r.quarantinedBy(app, appID, newPr.Ports[0], newPr.Ports[1], p)
		if left != 0 {
			n++
		}
		if n > MaxQuarantinedPorts {
			held := n
			if left != 0 {
				held--
			}
			return fleet.Instance{}, [2]int{}, unchanged, fmt.Errorf("%w: %s already leaves %d ports quarantined (at most %d; the first frees at %s); use one of them or the ports it holds, or wait",
				ErrPortChurn, app, held, MaxQuarantinedPorts, first.Format(time.RFC3339))
		}
	}
	reroutes := routed(cur, had) != routed(next, true)
	if reroutes && !charged {
		return fleet.Instance{}, [2]int{}, unchanged, errUncharged
	}
	prev := r.clone()
	r.retire(app, appID)
	if left != 0 {
		r.state.Quarantine = append(r.state.Quarantine, quarantined{Port: left, App: app, AppID: appID, Until: r.now().Add(r.quarantine).UTC()})
	}
	r.state.Instances[app] = next
	r.dropQuarantine(p)
	if newPr.Ports[0] != 0 {
		r.state.Pairs[app] = newPr
		r.dropQuarantine(newPr.Ports[0])
		r.dropQuarantine(newPr.Ports[1])
	} else {
		delete(r.state.Pairs, app)
	}
	if err := r.save(); err != nil {
		r.state = prev
		return fleet.Instance{}, [2]int{}, unchanged, err
	}
	switch {
	case reroutes:
		ch = rerouted
	case !had || cur != next:
		ch = changedUnrouted
	}
	return next, r.portsOf(app), ch, nil
}
