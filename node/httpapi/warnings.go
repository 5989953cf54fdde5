package httpapi

import (
	"fmt"
	"maps"
	"slices"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// pathWarnings lists the targets of c's path map that do not (yet) resolve to a ready
// route of the same account in the published document; the reconcile pass is the gate,
// so they are accepted but the publisher is told. Every such target gets the same
// message: a warning must not tell a tenant what another tenant holds.
func (h *appsHandler) pathWarnings(c fleet.Claim) []string {
	routes := map[string]routing.Route{}
	if snap := h.pub.Current(); snap != nil {
		for _, rt := range snap.Doc().Routes {
			routes[rt.Host] = rt
		}
	}
	apps := h.rec.KnownApps()
	var warn []string
	for _, k := range slices.Sorted(maps.Keys(c.Paths)) {
		t := c.Paths[k]
		rt, ok := routes[t]
		switch {
		case t == c.Host:
			warn = append(warn, fmt.Sprintf("%s: target %s is this host itself", k, t))
		case !ok || apps.Account(rt.Application) != c.Account || len(rt.Upstreams) == 0:
			// One message whatever the reason: whether a name is another account's, or
			// exists at all, is not this publisher's business.
			warn = append(warn, fmt.Sprintf("%s: target %s is not a ready route of this account; it routes nothing until it is", k, t))
		}
	}
	return warn
}

// placementWarnings name the nodes of a's placement that no node record names (a typo,
// or a node that has not started yet): nothing runs the application there, and an
// application none of whose nodes has a record routes nothing. Like a group without a
// platform domain (fleetwrite.AppWarnings), the write is accepted and its writer told.
// The records are those of the last reconcile pass, plus this node's own; before the
// first pass nothing is said.
func (h *appsHandler) placementWarnings(a fleet.App) []string {
	st := h.rec.Status()
	if st.LastPass.IsZero() {
		return nil
	}
	known := map[string]bool{h.nodeName: true}
	for _, n := range st.Nodes {
		known[n.Name] = true
	}
	var warn []string
	for _, n := range a.Placement {
		if !known[n] {
			warn = append(warn, fmt.Sprintf("placement names node %q, which no node record names (a typo, or a node not started yet): application %s runs on none there until a node of that name starts", n, a.Name))
		}
	}
	return warn
}
