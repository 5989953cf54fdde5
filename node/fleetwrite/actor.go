package fleetwrite

import (
	"fmt"
	"slices"
	"strings"

	"github.com/scafo/ingress/render/fleet"
)

// Actor is who asks for a write: the admin, or an application token.
type Actor struct {
	Admin bool
	// Token is the application token's record (zero for the admin).
	Token fleet.TokenRecord
}

// Name is the actor as the audit log records it.
func (a Actor) Name() string {
	switch {
	case a.Admin:
		return "admin"
	case a.Token.ID != "":
		return "token:" + a.Token.ID
	default:
		return "anonymous"
	}
}

// scopedTo refuses an application token for any application but its own before
// anything is read, so the answer cannot tell whether another tenant's application
// exists.
func (a Actor) scopedTo(app string) error {
	if a.Admin || a.Token.App == app {
		return nil
	}
	return &ErrForbidden{What: "forbidden", Detail: fmt.Sprintf("token %s is scoped to application %s", a.Token.ID, a.Token.App)}
}

// authorize lets the admin through, and an application token only for its own
// application, with one of roles, and never on the control-plane application (its
// hostname must never be path-routed by a CI or router credential).
func (a Actor) authorize(app fleet.App, roles ...string) error {
	if a.Admin {
		return nil
	}
	t := a.Token
	switch {
	case app.ControlPlane:
		return &ErrForbidden{What: "control plane", Detail: "application tokens are refused on the control-plane application " + app.Name}
	case t.App != app.Name || t.Account != app.Account:
		return &ErrForbidden{What: "forbidden", Detail: fmt.Sprintf("token %s is scoped to application %s (account %s), not %s", t.ID, t.App, t.Account, app.Name)}
	case t.AppID != app.ID:
		// The application was deleted and recreated: a token of the old incarnation
		// never acts for the new one, whoever owns it now.
		return &ErrForbidden{What: "forbidden", Detail: fmt.Sprintf("token %s was issued for an earlier application named %s", t.ID, app.Name)}
	case !hasAnyRole(t.Roles, roles):
		return &ErrForbidden{What: "forbidden", Detail: fmt.Sprintf("token %s lacks a role for this (needs one of %s)", t.ID, strings.Join(roles, ", "))}
	}
	return nil
}

func hasAnyRole(have, want []string) bool {
	for _, w := range want {
		if slices.Contains(have, w) {
			return true
		}
	}
	return false
}
