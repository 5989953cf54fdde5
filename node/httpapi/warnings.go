package httpapi

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// statusWarnings are /v1/status's warnings (api.Status.Warnings): what serves badly or
// not at all, each in one sentence. doc is the published document (nil before the
// first pass: nothing is said of applications), iv the fleet's ingresses.
//   - An application whose routes have no upstream: nothing of it is ready, its hosts
//     answer 503. (The hosts of scafo-unowned are the skipped claims', said there.)
//   - An ingress behind (it holds an older configuration than the one published), lost
//     (not heard from for ingresses.lostAfter) or refused (its last poll was, and why).
//   - No ingress polls the fleet: none is current or behind. Not said when the reports
//     could not be read (the view then holds only this node's own ingresses, and
//     ingressesError says so).
func statusWarnings(doc *routing.Document, iv ingress.View) []string {
	warn := []string{}
	if doc != nil {
		hosts := map[string][]string{} // application → its hosts, when it has no upstream
		for _, rt := range doc.Routes {
			if len(rt.Upstreams) == 0 && rt.Application != routing.UnownedApplication {
				hosts[rt.Application] = append(hosts[rt.Application], rt.Host)
			}
		}
		for _, app := range slices.Sorted(maps.Keys(hosts)) {
			warn = append(warn, fmt.Sprintf("application %s has no ready instance: %s answer 503", app, someHosts(hosts[app])))
		}
	}
	live, lost := 0, 0
	for _, in := range iv.Ingresses {
		switch in.State {
		case "behind":
			warn = append(warn, fmt.Sprintf("ingress %s (polling %s) is behind: it holds a configuration %d serials older than the one published", in.Name, in.Node, in.Behind))
		case "lost":
			warn = append(warn, fmt.Sprintf("ingress %s (polling %s) is lost: not heard from for %s", in.Name, in.Node, (time.Duration(in.Age)*time.Second).String()))
			lost++
			continue
		case "refused":
			// It polls, but is not served what it asks for (or not heard as an ingress):
			// not counted among the ingresses that poll the fleet.
			warn = append(warn, fmt.Sprintf("ingress %s (polling %s) is refused: %s", in.Name, in.Node, in.Refused))
			continue
		}
		live++
	}
	if live == 0 && iv.Error == "" {
		w := "no ingress polls this fleet: no route is served until a Traefik or Caddy polls a node"
		if lost > 0 {
			w += fmt.Sprintf(" (%d lost)", lost)
		}
		warn = append(warn, w)
	}
	return warn
}

// someHosts names the first three hosts, and how many more.
func someHosts(hosts []string) string {
	if len(hosts) <= 3 {
		return "its hosts " + strings.Join(hosts, ", ")
	}
	return fmt.Sprintf("its hosts %s and %d more", strings.Join(hosts[:3], ", "), len(hosts)-3)
}

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
