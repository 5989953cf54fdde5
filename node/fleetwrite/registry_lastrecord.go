package fleetwrite

import (
	"fmt"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// The ports of this node's last record (docs/design.md §13, sticky ports).
//
// A node restarted without its state dir (a new disk, a wiped /var/lib) starts with an
// empty registry, while its last record in the store still publishes its instances'
// ports: peers route to them, and ingresses on older documents do, until this node's
// new record is announced and read, and beyond (fail static keeps a stale record's
// upstreams). A port given again to another application in that time sends one
// tenant's traffic to another's process. So:
//
//   - RequireLastRecord (the node, at construction): when the registry's file was absent
//     at open, no port is issued (store.ErrUnavailable, 503) until HoldLastRecord ran.
//   - HoldLastRecord (the node's first read of its own record in this process,
//     node/self): each port that record publishes and nobody holds here is quarantined
//     for the application and incarnation it published, pending: it does not expire.
//   - RecordAnnounced (each serial bump that announced a record of this process): the
//     pending holds start their ports.quarantine now, as a released port's does.
//
// HoldLastRecord also runs over a registry that has its file: a port released while
// the record could not be written may still be published there.

// errLastRecordUnread: a registry that started empty issues no port before the node
// read its own last record.
var errLastRecordUnread = fmt.Errorf("%w: this node started without its instances file and has not read its own last record yet "+
	"(the ports that record publishes may still be routed to by peers); retry", store.ErrUnavailable)

// RequireLastRecord makes a registry whose file was absent at open issue no port until
// HoldLastRecord; call it once, at construction.
func (r *Registry) RequireLastRecord() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unread = r.fresh
}

// HoldLastRecord quarantines, pending this node's next announced record, each port of
// insts (this node's last record as the store held it; nil when absent) that nobody
// holds in the registry, and lets ports be issued.
func (r *Registry) HoldLastRecord(insts map[string]fleet.Instance) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire()
	prev := r.clone()
	held := false
	for _, app := range sortedKeys(insts) {
		i := insts[app]
		if i.Port < 1 || i.Port > 65535 {
			continue
		}
		if h, _, _ := r.holder(i.Port); h != "" {
			continue // held here: the registry knows better than the record
		}
		r.state.Quarantine = append(r.state.Quarantine, quarantined{Port: i.Port, App: app, AppID: i.AppID,
			Until: r.now().Add(r.quarantine).UTC(), Pending: true})
		held = true
	}
	if held {
		if err := r.save(); err != nil {
			r.state = prev
			return err
		}
	}
	r.unread = false
	return nil
}

// RecordAnnounced starts the pending holds' ports.quarantine now: a record of this
// process, which does not publish them, is announced.
func (r *Registry) RecordAnnounced() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.clone()
	moved := false
	for i, q := range r.state.Quarantine {
		if q.Pending {
			r.state.Quarantine[i].Pending = false
			r.state.Quarantine[i].Until = r.now().Add(r.quarantine).UTC()
			moved = true
		}
	}
	if !moved {
		return nil
	}
	if err := r.save(); err != nil {
		r.state = prev
		return err
	}
	return nil
}
