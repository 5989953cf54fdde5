package fleetwrite

import (
	"context"
	"fmt"

	"github.com/scafo/ingress/render/fleet"
)

// Instance is one of this node's instances as the API answers it.
type Instance struct {
	App   string `json:"app"`
	Node  string `json:"node"`
	Port  int    `json:"port"`
	Ready bool   `json:"ready"`
}

// instanceApp loads app and checks who may manage its instances.
func (w *Writer) instanceApp(ctx context.Context, who Actor, app string) error {
	a, _, err := w.App(ctx, app)
	if err != nil {
		return err
	}
	return who.authorize(a, fleet.RoleInstance)
}

func (w *Writer) answer(app string, i fleet.Instance) Instance {
	return Instance{App: app, Node: w.cfg.Node, Port: i.Port, Ready: i.Ready}
}

func (w *Writer) instancesChanged() {
	if w.cfg.OnInstances != nil {
		w.cfg.OnInstances()
	}
}

// Instances lists this node's instances, sorted by application.
func (w *Writer) Instances() []Instance {
	recs := w.inst.Records()
	out := make([]Instance, 0, len(recs))
	for _, app := range sortedKeys(recs) {
		out = append(out, w.answer(app, recs[app]))
	}
	return out
}

// AllocateInstance returns app's stable port on this node, choosing one on first use
// (created is true then).
func (w *Writer) AllocateInstance(ctx context.Context, who Actor, app string) (Instance, bool, error) {
	if err := w.instanceApp(ctx, who, app); err != nil {
		return Instance{}, false, err
	}
	inst, created, err := w.inst.Allocate(app)
	if err != nil {
		return Instance{}, false, err
	}
	if created {
		w.instancesChanged()
	}
	return w.answer(app, inst), created, nil
}

// SetInstance records app's port (nil: the allocated one) and readiness on this node.
// An application token may only name a port from the node's allocation range: any
// other port could point the app's public hostname at a node-local service (a
// database, SSH, this API). The admin may set any port.
func (w *Writer) SetInstance(ctx context.Context, who Actor, app string, port *int, ready bool) (Instance, error) {
	if port != nil && (*port < 1 || *port > 65535) {
		return Instance{}, invalid("invalid port", "port", fmt.Errorf("port %d: must be 1..65535", *port))
	}
	if err := w.instanceApp(ctx, who, app); err != nil {
		return Instance{}, err
	}
	if p := port; p != nil && !who.Admin {
		lo, hi := w.inst.Range()
		if *p < lo || *p > hi || (w.cfg.APIPort != nil && *p == w.cfg.APIPort()) {
			return Instance{}, &ErrForbidden{What: "port outside the allocation range",
				Detail: fmt.Sprintf("port %d: application tokens may only use ports %d..%d (POST allocates one)", *p, lo, hi)}
		}
	}
	inst, changed, err := w.inst.Set(app, port, ready)
	if err != nil {
		return Instance{}, err
	}
	if changed {
		w.instancesChanged()
	}
	return w.answer(app, inst), nil
}

// ReleaseInstance drops app's instance on this node; its port is quarantined.
func (w *Writer) ReleaseInstance(ctx context.Context, who Actor, app string) error {
	if err := w.instanceApp(ctx, who, app); err != nil {
		return err
	}
	if err := w.inst.Release(app); err != nil {
		return err
	}
	w.instancesChanged()
	return nil
}
