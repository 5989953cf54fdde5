package fleet

import (
	"slices"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

func (dv *deriver) buildRoutes() {
	// Order does not matter here: routes are sorted at the end, and no two objects can
	// compete for one host (see below).
	n := dv.nApps*len(dv.domains) + len(dv.claims) + len(dv.unowned)
	dv.held = make(map[string]*holder, len(dv.claims)+len(dv.unowned))
	// The routes are made once they are in host order: until then, order[i] is a held
	// host and holders[i] its holder (ai set for an application's).
	order := make([]hostAt, 0, n)
	holders := make([]holder, 0, n) // one allocation; never grows, so pointers stay valid
	add := func(host string, ai *appInfo, claim *Claim) {
		holders = append(holders, holder{account: ai.app.Account, app: ai.app.Name, routed: len(ai.upstreams) > 0, claim: claim, ai: ai})
		if claim != nil {
			dv.held[host] = &holders[len(holders)-1]
		}
		order = append(order, hostAt{host, int32(len(order))})
	}
	// Platform hosts never collide: an application name is one label, so
	// "<name>.<domain>" determines both name and domain; names are unique. They are made
	// domain by domain, so that each domain's hosts form one run in application input
	// order (usually sorted already: the store lists names in order).
	var runs []int // where each run of routes ends; sorted and merged at the end
	for _, d := range dv.domains {
		for i := range dv.appList {
			ai := &dv.appList[i]
			if !ai.ok || dv.domainGroup[d] != ai.group {
				continue // another group's domain: its wildcard points at other ingresses
			}
			name := ai.app.Name
			if len(name)+1+len(d) > routing.MaxHostLen {
				dv.skip(AppKey(name), "platform host under %q would be longer than %d bytes; not routed there", d, routing.MaxHostLen)
				continue
			}
			add(name+"."+d, ai, nil)
		}
		runs = append(runs, len(order))
	}
	dv.skipGroupsWithoutDomain()
	// Nor do claims: hosts are unique among claims (and claims without a holder), and a
	// claim the platform owns was refused. The checks below are defence in depth.
	var wildcards []*Claim
	for _, c := range dv.claims {
		if routing.IsWildcard(c.Host) {
			if ai := dv.appByName(c.App); ai != nil && ai.passthrough {
				// A TLS server name selects one server by its exact name: a wildcard
				// would give the application names it never listed (the API refuses
				// the claim; this is the store written by hand or a race).
				dv.skip(ClaimKey(c.Host), "wildcard claim of passthrough application %q; not routed (passthrough hosts are exact names)", c.App)
				continue
			}
			wildcards = append(wildcards, c) // once every exact name is held
			continue
		}
		if prev := dv.holderOf(c.Host); prev != nil {
			dv.skip(ClaimKey(c.Host), "host is also held by application %q; claim ignored", prev.app)
			continue
		}
		ai := dv.appByName(c.App)
		add(c.Host, ai, c)
		if len(ai.upstreams) == 0 {
			dv.skip(ClaimKey(c.Host), "application %q has no ready instance; routed to no upstream (503, fail closed)", c.App)
		}
	}
	runs = append(runs, len(order))
	for _, h := range dv.unowned {
		if prev := dv.holderOf(h); prev != nil {
			continue // cannot happen (counted with the claims); the holder keeps it
		}
		holders = append(holders, holder{app: routing.UnownedApplication})
		dv.held[h] = &holders[len(holders)-1]
		order = append(order, hostAt{h, int32(len(order))})
	}
	runs = append(runs, len(order))
	for _, c := range dv.coverFree(wildcards, order, holders) {
		ai := dv.appByName(c.App)
		add(c.Host, ai, c)
		if len(ai.upstreams) == 0 {
			dv.skip(ClaimKey(c.Host), "application %q has no ready instance; routed to no upstream (503, fail closed)", c.App)
		}
	}
	runs = append(runs, len(order))
	// Each run is sorted on its own (linear when it is in order already) and the runs
	// are merged: a fleet listed in name order costs no n log n sort. Only then are the
	// routes (~100 bytes each) made, once, in host order; routeHolders keeps each
	// route's holder for buildPaths. Hosts are unique, so the order is total.
	order = sortRuns(order, runs)
	dv.routes = make([]routing.Route, len(order))
	dv.routeHolders = make([]*holder, len(order))
	for j, o := range order {
		h := &holders[o.i]
		dv.routeHolders[j] = h
		if h.ai == nil {
			dv.routes[j] = routing.Route{Host: o.host, Application: routing.UnownedApplication, Upstreams: []routing.Upstream{}}
			continue
		}
		dv.routes[j] = routing.Route{
			Host:        o.host,
			Application: h.ai.app.Name,
			Upstreams:   h.ai.upstreams, // shared by every host of the app; read-only; [] when nothing is ready
			HealthPath:  h.ai.healthPath,
			Group:       h.ai.group,
			// Passthrough and ProxyProtocol: the application's, on every host of it.
			Passthrough:   h.ai.passthrough,
			ProxyProtocol: h.ai.proxyProtocol,
			// Middlewares: the application's, on every host of it (and so on every
			// path router that selects one of them).
			Middlewares: h.ai.middlewares,
		}
	}
}

// holderOf returns the holder of host in this document, or nil: a claim's (or a claim
// without a holder's), or an application's platform host. Platform hosts are not
// entered in a fleet-sized map: "<name>.<domain>" is held exactly when name is a valid
// application of the domain's group and the host is not too long (buildRoutes).
func (dv *deriver) holderOf(host string) *holder {
	if h := dv.held[host]; h != nil {
		return h
	}
	name, d, ok := strings.Cut(host, ".")
	if !ok {
		return nil
	}
	g, ok := dv.domainGroup[d]
	if !ok || len(host) > routing.MaxHostLen {
		return nil
	}
	if ai := dv.appByName(name); ai != nil && ai.group == g {
		return &ai.platform
	}
	return nil
}

// hostAt is a held host and the index of its holder.
type hostAt struct {
	host string
	i    int32
}

func compareHostAt(a, b hostAt) int { return strings.Compare(a.host, b.host) }

// sortRuns sorts order, made of consecutive runs ending at the indices in ends (the
// last is len(order)), by host: each run is sorted, then the runs are merged. Hosts
// must be unique.
func sortRuns(order []hostAt, ends []int) []hostAt {
	var runs [][]hostAt
	start := 0
	for _, end := range ends {
		if end > start {
			run := order[start:end]
			if !slices.IsSortedFunc(run, compareHostAt) {
				slices.SortFunc(run, compareHostAt)
			}
			runs = append(runs, run)
		}
		start = end
	}
	if len(runs) == 1 {
		return runs[0]
	}
	out := make([]hostAt, 0, len(order))
	for len(runs) > 0 {
		best := 0
		for k := 1; k < len(runs); k++ {
			if runs[k][0].host < runs[best][0].host {
				best = k
			}
		}
		// Take every head of the best run that sorts before the other runs' heads.
		next := ""
		hasNext := false
		for k := range runs {
			if k != best && (!hasNext || runs[k][0].host < next) {
				next, hasNext = runs[k][0].host, true
			}
		}
		r := runs[best]
		j := 1
		if hasNext {
			for j < len(r) && r[j].host < next {
				j++
			}
		} else {
			j = len(r)
		}
		out = append(out, r[:j]...)
		if j == len(r) {
			runs = slices.Delete(runs, best, best+1)
		} else {
			runs[best] = r[j:]
		}
	}
	return out
}
