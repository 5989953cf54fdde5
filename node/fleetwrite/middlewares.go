package fleetwrite

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// An application's middlewares (fleet.App.Middlewares, docs/design.md §2) reference
// Traefik middlewares the operator defined in their ingresses and declared in the node
// configuration (traefik.middlewares): the fleet defines none. Each refusal is a 400
// naming the field:
//
//   - a reference that is not name@provider, or one listed twice: middlewares[i];
//   - a name the configuration does not declare: middlewares[i]. Traefik disables a
//     router that references a middleware it does not have, and every router of the
//     application references the list: it would answer 404 on every host;
//   - any middleware on a passthrough application: middlewares (a middleware is HTTP;
//     its hosts are routed at layer 4).
//
// The field is the admin's, as the rest of the application object is: the route that
// writes it (PUT /v1/apps/{app}) is admin-only, so an application token cannot set or
// change it (403, TestEveryRouteAnswersEachCredentialAsItsRoleAllows).

// validateMiddlewares checks a's middlewares against the rules above.
func (w *Writer) validateMiddlewares(a *fleet.App) error {
	if len(a.Middlewares) == 0 {
		return nil
	}
	if a.Passthrough {
		return invalid("invalid application", "middlewares", errors.New("middlewares: application terminates TLS itself (passthrough) and is routed at layer 4; a middleware is HTTP"))
	}
	if err := routing.ValidateMiddlewares("middlewares", a.Middlewares); err != nil {
		field, _ := routing.InvalidField(err)
		return invalid("invalid application", field, err)
	}
	for i, m := range a.Middlewares {
		if !slices.Contains(w.cfg.Middlewares, m) {
			field := fmt.Sprintf("middlewares[%d]", i)
			return invalid("invalid application", field, fmt.Errorf("%s %q: not a middleware this node's configuration declares (traefik.middlewares: %s); a Traefik router that references a middleware its ingress does not have is disabled, and the application would answer 404 on every host", field, m, declared(w.cfg.Middlewares)))
		}
	}
	return nil
}

func declared(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
