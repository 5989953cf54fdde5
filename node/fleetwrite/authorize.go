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
	if err := who.scopedTo(app); err != nil {
		return err // before any read: the answer must not tell whether app exists
	}
	a, _, err := w.App(ctx, app)
	if err != nil {
		return err
	}
	return who.authorize(a, fleet.RolePublish, fleet.RoleInstance)
}
