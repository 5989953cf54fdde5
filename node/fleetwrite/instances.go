package fleetwrite

import (
	"context"
	"errors"
	"fmt"

	"github.com/scafo/ingress/render/fleet"
)

// Instance is one of this node's instances as the API answers it.
type Instance struct {
	App  string `json:"app"`
	Node string `json:"node"`
	// Port is the port the instance is routed to now.
	Port  int  `json:"port"`
	Ready bool `json:"ready"`
	// Ports is the pair of ports the application owns on this node, ascending, one of
	// them Port (docs/design.md §13). A deploy starts the new release on the member that is not
	// Port, then PUTs the instance with that port: a move within the pair quarantines
	// nothing and can repeat forever. Both members are Port while the node had no
	// second port free (the pair is completed at the next allocation or PUT).
	Ports [2]int `json:"ports"`
}

func (w *Writer) answer(app string, i fleet.Instance, ports [2]int) Instance {
	return Instance{App: app, Node: w.cfg.Node, Port: i.Port, Ports: ports, Ready: i.Ready}
}

func (w *Writer) instancesChanged() {
	if w.cfg.OnInstances != nil {
		w.cfg.OnInstances()
	}
}

// SweepOrphans releases (quarantines) this node's instances whose application no
// longer exists or was recreated (another incarnation), so that a deleted application's
// instances are released on every node. known is the reconcile loop's view of the
// applications (name to ID); a candidate is confirmed with a read of the store before
// it is released, so a stale view never releases a live instance. It returns the
// applications released.
func (w *Writer) SweepOrphans(ctx context.Context, known map[string]string) ([]string, error) {
	var released []string
	for _, app := range sortedKeys(w.inst.Records()) {
		inst, _ := w.inst.Get(app)
		if id, ok := known[app]; ok && id == inst.AppID {
			continue
		}
		a, _, err := load[fleet.App](ctx, w.st, fleet.AppKey(app))
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return released, err // unreadable: release nothing on a guess
		case a.ID == inst.AppID:
			continue
		}
		if err := w.inst.ReleaseIf(app, inst.AppID); errors.Is(err, ErrNoInstance) {
			continue // released, or replaced by a new incarnation's, meanwhile
		} else if err != nil {
			return released, err
		}
		w.log.Info("released an orphaned instance", "app", app, "port", inst.Port)
		released = append(released, app)
	}
	if len(released) > 0 {
		w.instancesChanged()
	}
	return released, nil
}

// Instances lists this node's instances, sorted by application.
func (w *Writer) Instances() []Instance {
	recs, ports := w.inst.RecordsAndPorts()
	out := make([]Instance, 0, len(recs))
	for _, app := range sortedKeys(recs) {
		out = append(out, w.answer(app, recs[app], ports[app]))
	}
	return out
}

// AllocateInstance returns app's stable port on this node, choosing one on first use
// (created is true then).
func (w *Writer) AllocateInstance(ctx context.Context, who Actor, app string) (Instance, bool, error) {
	a, err := w.authorizedApp(ctx, who, app, fleet.RoleInstance)
	if err != nil {
		return Instance{}, false, err
	}
	inst, ports, created, err := w.inst.Allocate(app, a.ID)
	if err != nil {
		return Instance{}, false, err
	}
	if created {
		w.instancesChanged()
	}
	return w.answer(app, inst, ports), created, nil
}

// SetInstance records app's port (nil: the allocated one) and readiness on this node.
// An application token may only name a port from the node's allocation range: any
// other port could point the app's public hostname at a node-local service (a
// database, SSH, this API). The admin may set any port.
func (w *Writer) SetInstance(ctx context.Context, who Actor, app string, port *int, ready bool) (Instance, error) {
	return w.PutInstance(ctx, who, app, port, ready, false)
}

// PutInstance is SetInstance; a move (the instance's port changed, declared ready) is
// refused unless its new port serves, or force is set, and audited (instancemove.go).
func (w *Writer) PutInstance(ctx context.Context, who Actor, app string, port *int, ready, force bool) (Instance, error) {
	if port != nil && (*port < 1 || *port > 65535) {
		return Instance{}, invalid("invalid port", "port", fmt.Errorf("port %d: must be 1..65535", *port))
	}
	a, err := w.authorizedApp(ctx, who, app, fleet.RoleInstance)
	if err != nil {
		return Instance{}, err
	}
	if p := port; p != nil && !who.Admin {
		lo, hi := w.inst.Range()
		if *p < lo || *p > hi || (w.cfg.APIPort != 0 && *p == w.cfg.APIPort) {
			return Instance{}, &ErrForbidden{What: "port outside the allocation range",
				Detail: fmt.Sprintf("port %d: application tokens may only use ports %d..%d (POST allocates one)", *p, lo, hi)}
		}
	}
	if port != nil {
		// Another application's port is refused before anything is done with it: the
		// move's serving check below never probes another tenant's release.
		if err := w.inst.takenFor(app, a.ID, *port); err != nil {
			return Instance{}, w.portTakenFor(ctx, who, a, err)
		}
	}
	checked := false
	if cur, had := w.inst.Get(app); had {
		if checked, err = w.checkMove(ctx, who, app, a, cur, had, port, ready, force); err != nil {
			return Instance{}, err
		}
	}
	// A change of what is routed (a ready instance's port, or its readiness) spends
	// one of the account's routing changes; anything else is free. Whether a write is
	// one is decided by the registry under its lock, with the write: the read here
	// only charges up front what looks like one. A write read as free that the
	// registry finds is a routing change after all (another write changed the instance
	// meanwhile) writes nothing: it is charged then and written again, charged. A
	// charge whose write changes nothing routed is refunded.
	cur, had := w.inst.Get(app)
	if !had || cur.AppID != a.ID {
		cur, had = fleet.Instance{}, false // none, or another incarnation's: not inherited
	}
	if w.afterInstanceRead != nil {
		w.afterInstanceRead()
	}
	next := fleet.Instance{Port: cur.Port, Ready: ready}
	if port != nil {
		next.Port = *port
	}
	charged, refund := false, func() {}
	if routed(cur, had) != routed(next, next.Port != 0) {
		if refund, err = w.chargeRoute(ctx, who, a.Account, "instance"); err != nil {
			return Instance{}, err
		}
		charged = true
	}
	inst, ports, ch, err := w.inst.set(app, a.ID, port, ready, charged)
	if errors.Is(err, errUncharged) {
		if refund, err = w.chargeRoute(ctx, who, a.Account, "instance"); err != nil {
			return Instance{}, err
		}
		inst, ports, ch, err = w.inst.set(app, a.ID, port, ready, true)
	}
	if err != nil || ch != rerouted {
		refund() // no routing change was written after all
	}
	if err != nil {
		return Instance{}, w.portTakenFor(ctx, who, a, err)
	}
	if ch != unchanged {
		w.instancesChanged()
	}
	if ch != unchanged {
		w.auditInstance(ctx, who, a, app, cur, inst, force, checked)
	}
	return w.answer(app, inst, ports), nil
}

// portTakenFor is err as who may read it. A port taken names its holder to the admin
// and to a token of the holder's own account; to any other token it is a bare "port
// taken": stepping a token through the port range must not list the applications of
// other accounts on the node (TestPortTakenNamesNoOtherAccountsApplication). The holder
// counts as the caller's account's only while the incarnation holding the port is the
// current application of that name, in a's account (an earlier incarnation's account is
// not known any more).
func (w *Writer) portTakenFor(ctx context.Context, who Actor, a fleet.App, err error) error {
	var taken *portTakenError
	if who.Admin || !errors.As(err, &taken) {
		return err
	}
	if h, _, herr := w.App(ctx, taken.App); herr == nil && h.ID == taken.AppID && h.Account == a.Account {
		return err
	}
	return fmt.Errorf("%w: port %d", ErrPortTaken, taken.Port)
}

// ReleaseInstance drops app's instance on this node; both ports of its pair are
// quarantined. The admin
// may also release an orphan: the instance of an application that no longer exists.
func (w *Writer) ReleaseInstance(ctx context.Context, who Actor, app string) error {
	a, err := w.authorizedApp(ctx, who, app, fleet.RoleInstance)
	if err != nil && !(who.Admin && errors.Is(err, ErrNotFound)) {
		return err
	}
	// Releasing a ready instance withdraws its route: one routing change, decided by
	// the registry with the write (as for SetInstance).
	charged, refund := false, func() {}
	cur, had := w.inst.Get(app)
	if w.afterInstanceRead != nil {
		w.afterInstanceRead()
	}
	if routed(cur, had && cur.AppID == a.ID) != 0 {
		if refund, err = w.chargeRoute(ctx, who, a.Account, "instance"); err != nil {
			return err
		}
		charged = true
	}
	anyIncarnation := func(fleet.Instance) bool { return true }
	rerouted, err := w.inst.releaseCharged(app, anyIncarnation, a.ID, charged)
	if errors.Is(err, errUncharged) {
		if refund, err = w.chargeRoute(ctx, who, a.Account, "instance"); err != nil {
			return err
		}
		rerouted, err = w.inst.releaseCharged(app, anyIncarnation, a.ID, true)
	}
	if err != nil || !rerouted {
		refund() // no routing change was written after all
	}
	if err != nil {
		return err
	}
	w.instancesChanged()
	return nil
}
