package fleetwrite

import (
	"context"
	"fmt"

	"github.com/scafo/ingress/render/fleet"
)

// PortChecker checks that a port of this node serves, once and bounded in time
// (node/probe's Checker: the application's health path, or a TCP connect, on
// node.address). nil when it does; the error says what failed.
type PortChecker interface {
	CheckPort(ctx context.Context, port int, healthPath string) error
}

// A move is a write that changes the port of an instance this node already has (of
// the same incarnation) and declares it ready: the traffic of the instance goes to the
// new port at once. Before anything is written, the new port must serve (Config.Ports):
// otherwise the move is refused (409 "port not serving", naming the port and what
// failed) and nothing changes. Force skips the check, for an operator who means it;
// the admin and the application's own instance-role token alike may force, since a
// forced move can only harm the application's own traffic. Not checked: a write that
// declares the instance not ready (no traffic goes there), one that keeps the port (a
// readiness change: the probes judge it), and the first declaration of an instance
// (nothing that served is replaced; the probes judge it). A move that takes effect is
// audited ("instance.move": actor, app, node, from and to ports, forced), without a
// serial bump: an instance is announced by this node's record, not by the store's
// serial (TestAMoveToAPortThatDoesNotServeIsRefused, TestEveryMoveIsAudited).

// checkMove refuses a move of app (incarnation a) from cur to port that the port
// checker finds not serving. Called once who is authorized and port is in who's range.
//
// The port is one the write could take (PutInstance refused another application's
// first). What failed is told whole to the admin; an application token is told only
// that the port does not serve, with the node's log holding the rest: the probe's words
// (a status code, the first bytes of a foreign service's answer) would describe a
// process on the port that is not the application's.
func (w *Writer) checkMove(ctx context.Context, who Actor, app string, a fleet.App, cur fleet.Instance, had bool, port *int, ready, force bool) (checked bool, err error) {
	if w.cfg.Ports == nil || force || !ready || port == nil || !had || cur.AppID != a.ID || cur.Port == *port {
		return false, nil
	}
	path := ""
	if a.Health != nil {
		path = a.Health.Path
	}
	if err := w.cfg.Ports.CheckPort(ctx, *port, path); err != nil {
		why := err.Error()
		if !who.Admin {
			w.log.Info("instance move refused: the new port does not serve", "app", app, "from", cur.Port, "to", *port, "err", err)
			why = "it does not serve (nothing listens, no answer, or the health path did not answer 2xx: the node's log says which)"
		}
		return false, &ErrConflict{What: "port not serving", Holder: app,
			Detail: fmt.Sprintf("%s's instance was not moved from port %d to port %d: %s; start the release there first, or force the move (?force=true, --force)",
				app, cur.Port, *port, why)}
	}
	return true, nil
}

// auditInstance records an instance write of app that took effect: a move
// ("instance.move": from 0, the instance had no port on this node) or, on the same port,
// a change of readiness ("instance.ready"), which routes or unroutes the instance.
func (w *Writer) auditInstance(ctx context.Context, who Actor, a fleet.App, app string, cur, next fleet.Instance, forced, checked bool) {
	ready := next.Ready
	rec := AuditRecord{Action: "instance.move", Account: a.Account, App: app, FromPort: cur.Port, ToPort: next.Port,
		Forced: forced, Checked: checked, Ready: &ready}
	switch {
	case cur.Port != next.Port:
	case cur.Ready != next.Ready:
		rec.Action, rec.FromPort, rec.Forced, rec.Checked = "instance.ready", 0, false, false
	default:
		return
	}
	w.appendAudit(ctx, who, rec)
}
