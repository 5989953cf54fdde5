package httpapi

import (
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/publish"
)

// Ingress groups on the routing endpoints (issue 17).
//
// ?group=a,b serves the part of the document the ingresses of groups a and b load
// (routing.ForGroups: their routes, the API apex, the routes their prefixes target in
// other groups) with its own revision, so a change in another group leaves the body,
// the ETag and X-Scafo-Revision as they were; X-Scafo-Serial still carries the store
// serial. Anything fleet-wide (the API apex today, an ACME challenge router tomorrow)
// is in every group: it lives outside Document.Routes, which is all ForGroups filters.
//
// A group is known when an application names it, when it is routing.DefaultGroup, or
// when platform.groups maps a domain to it: the published snapshot carries them
// (publish.Snapshot.KnownGroups). An unknown group is 404: an ingress pointed
// at a typo must not receive a configuration without routes and withdraw them. A known
// group without routes yet answers the API apex alone and says so in
// X-Scafo-Group-Empty.

// groupsStatus is /v1/status's groups: every known group of snap, with its routes and
// revision.
func groupsStatus(snap *publish.Snapshot) []api.Group {
	out := []api.Group{}
	for _, g := range snap.KnownGroups() {
		out = append(out, api.Group{Name: g, Routes: snap.GroupRoutes(g), Revision: snap.ForGroups([]string{g}).Revision})
	}
	return out
}
