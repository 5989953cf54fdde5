package fleetwrite

import (
	"context"

	"github.com/scafo/ingress/render/fleet"
)

// AuthorizePaths checks that who may read or publish app's path maps, as Paths and
// PublishPaths do before anything else of theirs: ErrForbidden when not, the error of
// reading the application when it cannot be read (ErrNotFound, a store failure). The
// path-map door asks it before answering a malformed request, so a caller refused on
// app (an application token on the control-plane application, or on another
// application) gets that one refusal whatever the host's or the body's shape.
func (w *Writer) AuthorizePaths(ctx context.Context, who Actor, app string) error {
	_, err := w.authorizedApp(ctx, who, app, fleet.RolePublish, fleet.RoleInstance)
	return err
}

// authorizedApp reads app and checks that who may act on it with one of roles. An
// application token is checked against its own scope before anything is read, so the
// answer cannot tell whether another tenant's application exists.
func (w *Writer) authorizedApp(ctx context.Context, who Actor, app string, roles ...string) (fleet.App, error) {
	if err := who.scopedTo(app); err != nil {
		return fleet.App{}, err
	}
	a, _, err := w.App(ctx, app)
	if err != nil {
		return fleet.App{}, err
	}
	return a, who.authorize(a, roles...)
}
