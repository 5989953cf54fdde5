package httpapi

import (
	"slices"
	"sync"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/render/routing"
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
// when platform.groups maps a domain to it. An unknown group is 404: an ingress pointed
// at a typo must not receive a configuration without routes and withdraw them. A known
// group without routes yet answers the API apex alone and says so in
// X-Scafo-Group-Empty.

// Groups is what the node knows of groups beyond the document's routes.
type Groups struct {
	// configured are the groups of platform.groups (fixed at start).
	configured map[string]bool

	mu sync.Mutex
	// apps are the groups named by the applications of the last derivation (an
	// application whose group has no platform domain and no claim has no route).
	apps map[string]bool
}

// NewGroups is the group knowledge of a node whose platform.groups maps domains to the
// groups of domainGroups (domain → group).
func NewGroups(domainGroups map[string]string) *Groups {
	k := &Groups{configured: map[string]bool{}}
	for _, g := range domainGroups {
		k.configured[g] = true
	}
	return k
}

// SetApps replaces the application groups (the reconciler, after each derivation).
func (k *Groups) SetApps(groups map[string]bool) {
	k.mu.Lock()
	k.apps = groups
	k.mu.Unlock()
}

// known returns every known group of snap, sorted.
func (k *Groups) known(snap *publish.Snapshot) []string {
	set := map[string]bool{routing.DefaultGroup: true}
	for g := range k.configured {
		set[g] = true
	}
	k.mu.Lock()
	for g := range k.apps {
		set[g] = true
	}
	k.mu.Unlock()
	for _, g := range snap.Groups() {
		set[g] = true
	}
	out := make([]string, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// unknown returns the first of groups that is not known, or "".
func (k *Groups) unknown(snap *publish.Snapshot, groups []string) string {
	k.mu.Lock()
	apps := k.apps
	k.mu.Unlock()
	for _, g := range groups {
		if g != routing.DefaultGroup && !k.configured[g] && !apps[g] && snap.GroupRoutes(g) == 0 {
			return g
		}
	}
	return ""
}

// status is /v1/status's groups: every known group of snap, with its routes and revision.
func (k *Groups) status(snap *publish.Snapshot) []api.Group {
	out := []api.Group{}
	for _, g := range k.known(snap) {
		out = append(out, api.Group{Name: g, Routes: snap.GroupRoutes(g), Revision: snap.ForGroups([]string{g}).Revision})
	}
	return out
}
