package httpapi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

// middlewareWarnings are /v1/status's warnings about applications' middlewares
// (routing.Route.Middlewares): an application listing a middleware this node's
// configuration does not declare (traefik.middlewares). The write refused it then; the
// configuration changed since. Derivation keeps the list as the admin wrote it (the
// document never depends on one node's configuration, and an application is never
// served without the middlewares its admin listed: one may be its authentication), so
// its routers still reference the middleware, and a Traefik that does not define it
// disables them (docs/design.md §2, docs/traefik.md). One warning per application,
// naming the undeclared middlewares.
func middlewareWarnings(doc *routing.Document, declared []string) []string {
	if doc == nil {
		return nil
	}
	var warn []string
	seen := map[string]bool{}
	for i := range doc.Routes {
		r := &doc.Routes[i]
		if len(r.Middlewares) == 0 || seen[r.Application] {
			continue
		}
		seen[r.Application] = true
		var missing []string
		for _, m := range r.Middlewares {
			if !slices.Contains(declared, m) {
				missing = append(missing, m)
			}
		}
		if len(missing) > 0 {
			warn = append(warn, fmt.Sprintf("application %s lists %s, which traefik.middlewares does not declare (the configuration changed since it was written): its routers still reference them, and a Traefik that does not define them disables those routers (the application answers 404); declare them again, or PUT the application without them",
				r.Application, strings.Join(missing, ", ")))
		}
	}
	return warn
}
