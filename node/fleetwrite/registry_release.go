package fleetwrite

import (
	"github.com/scafo/ingress/render/fleet"
)

// Release removes app's instance and quarantines both ports of its pair.
func (r *Registry) Release(app string) error {
	return r.release(app, func(fleet.Instance) bool { return true })
}

// ReleaseIf releases app's instance only if it belongs to incarnation appID (the
// orphan sweep: a recreated application's new instance is never released on the old
// incarnation's account).
func (r *Registry) ReleaseIf(app, appID string) error {
	return r.release(app, func(i fleet.Instance) bool { return i.AppID == appID })
}

func (r *Registry) release(app string, match func(fleet.Instance) bool) error {
	_, err := r.releaseCharged(app, match, "", true)
	return err
}

// releaseCharged is release deciding, under the lock and with the write, whether it is
// a routing change (the instance is incarnation appID's and ready): one that is, when
// not charged, writes nothing and answers errUncharged. rerouted reports one.
func (r *Registry) releaseCharged(app string, match func(fleet.Instance) bool, appID string, charged bool) (rerouted bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.state.Instances[app]
	if !ok || !match(cur) {
		return false, ErrNoInstance
	}
	rerouted = routed(cur, cur.AppID == appID) != 0
	if rerouted && !charged {
		return false, errUncharged
	}
	prev := r.clone()
	r.drop(app)
	if err := r.save(); err != nil {
		r.state = prev
		return false, err
	}
	return rerouted, nil
}

// drop removes app's instance and pair, quarantining their ports for the instance's
// incarnation (caller holds mu and saves).
func (r *Registry) drop(app string) {
	cur, ok := r.state.Instances[app]
	if !ok {
		return
	}
	ports := r.portsOf(app)
	delete(r.state.Instances, app)
	delete(r.state.Pairs, app)
	until := r.now().Add(r.quarantine).UTC()
	for i, p := range ports {
		if i == 1 && p == ports[0] {
			break // unpaired: one port
		}
		r.dropQuarantine(p) // one entry per port
		r.state.Quarantine = append(r.state.Quarantine, quarantined{Port: p, App: app, AppID: cur.AppID, Until: until})
	}
}

// retire quarantines app's instance (both ports of its pair) when it belongs to an
// incarnation other than appID (caller holds mu and saves).
func (r *Registry) retire(app, appID string) {
	if cur, ok := r.state.Instances[app]; ok && cur.AppID != appID {
		r.drop(app)
	}
}
