package node

import (
	"fmt"
	"maps"
	"slices"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// pathWarnings lists the targets of c's path map that do not (yet) resolve to a ready
// route of the same account in the published document; the reconcile pass is the gate,
// so they are accepted but the publisher is told.
func (s *Server) pathWarnings(c fleet.Claim) []string {
	routes := map[string]routing.Route{}
	if snap := s.pub.cur.Load(); snap != nil {
		for _, rt := range snap.doc.Routes {
			routes[rt.Host] = rt
		}
	}
	accounts := s.rec.appAccounts()
	var warn []string
	for _, k := range slices.Sorted(maps.Keys(c.Paths)) {
		t := c.Paths[k]
		rt, ok := routes[t]
		switch {
		case t == c.Host:
			warn = append(warn, fmt.Sprintf("%s: target %s is this host itself", k, t))
		case !ok:
			warn = append(warn, fmt.Sprintf("%s: target %s is not a ready route yet; it routes nothing until it is", k, t))
		case accounts[rt.Application] != c.Account:
			warn = append(warn, fmt.Sprintf("%s: target %s belongs to another account; it will never route", k, t))
		}
	}
	return warn
}
