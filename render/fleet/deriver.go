package fleet

import (
	"maps"
	"slices"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

// Deriver derives documents one store change after another: the same documents and
// reports as Derive, byte for byte, for a cost that follows the change rather than the
// fleet when the change is of the common kind.
//
// A change patches the last document when it can only move upstream lists and health
// paths: the objects it names are application records whose account, group and
// passthrough fields did not move, and node records whose name, address and API port did not move, while no
// node's staleness did either. Each application such a change touches is derived
// again on its own (its placement, health path, instances); its routes get the new
// upstreams and health path, and the revision re-hashes their blocks alone
// (routing.Blocks.Reseal). Everything else is known to be as it was: the hosts
// (platform hosts depend on names and groups; claims and path maps on claims, accounts
// and which applications are routed), the API section (node addresses and staleness),
// and the report.
//
// Anything else derives the whole state again, as Derive does: a claim or an unknown
// object changed; an application or node appeared, left, or moved its account, group,
// address or API port; a node's staleness moved; the options changed; an application
// the change touches has anything reported against it (a skipped entry, no ready
// instance: its report would have to be rewritten) or would go from routed to not
// routed or back (path maps and claims' reports follow that); the caller does not know
// what changed (changed nil). The patch is checked against Derive by
// TestDeriverEqualsDeriveAfterRandomChanges.
//
// A Deriver is not safe for concurrent use.
type Deriver struct {
	last *derivation
}

// derivation is what a Deriver keeps of its last result.
type derivation struct {
	opt       Options // Now aside
	st        State
	doc       *routing.Document
	skipped   []Skipped
	blocks    routing.Blocks // doc's
	nodes     map[string]*nodeInfo
	domains   []string
	domainGrp map[string]string
	// ascending: st.Apps is in store-key order (the node lists it so), so an
	// application is found by binary search and keeps its index from pass to pass.
	ascending bool
	// claimRoutes are the indices in doc.Routes of each application's claimed hosts
	// (its platform hosts are found by name).
	claimRoutes map[string][]int32
}

// Derive returns Derive(st, opt) and, when it patched the last document, how the new
// one differs from it (nil when it derived the whole state, or when nothing moved: the
// document returned is then the last one itself, whichever way it was derived).
//
// changed names the store keys ("apps/web.json", "nodes/vps-a.json") of the objects of
// st that differ from the State of the previous call: added, rewritten or removed, in
// any order; nil when the caller does not know (the first call, a full store read). A
// key names the object whose name field it holds (the node skips an object whose name
// does not match its key).
// Every object it does not name must be equal to the previous call's, apart from node
// records' Seen. The objects of st are read, never modified, and must not be modified
// by the caller afterwards (a changed object is a new value); the returned documents
// and reports are shared with later calls and must not be modified either.
func (x *Deriver) Derive(st State, opt Options, changed []string) (*routing.Document, []Skipped, *routing.Delta) {
	if l := x.last; l != nil && changed != nil {
		if doc, delta, ok := l.patch(st, opt, changed); ok {
			return doc, l.skipped, delta
		}
	}
	dv := derive(st, opt)
	doc := dv.document()
	blocks := routing.SealBlocks(doc)
	if x.last != nil && x.last.doc.Revision == doc.Revision {
		// The same content (a full read that found nothing new): the last document
		// itself, so that what the caller published and rendered stays the base of the
		// next patch.
		doc = x.last.doc
	}
	l := &derivation{opt: opt, st: st, doc: doc, skipped: dv.skippedSorted(), blocks: blocks, nodes: dv.nodes,
		domains: dv.domains, domainGrp: dv.domainGroup, ascending: dv.apps == nil, claimRoutes: map[string][]int32{}}
	for j, h := range dv.routeHolders {
		if h.claim != nil && h.ai != nil {
			l.claimRoutes[h.ai.app.Name] = append(l.claimRoutes[h.ai.app.Name], int32(j))
		}
	}
	x.last = l
	return doc, l.skipped, nil
}

// sameOptions reports whether a and b are equal apart from Now.
func sameOptions(a, b Options) bool {
	return slices.Equal(a.PlatformDomains, b.PlatformDomains) && a.APIPublic == b.APIPublic && a.NodeTTL == b.NodeTTL &&
		maps.Equal(a.DomainGroups, b.DomainGroups)
}

// routeChange is the new upstreams and health path of an application's routes.
type routeChange struct {
	idx    []int
	ups    []routing.Upstream
	health string
}

// patch derives st from l when the change allows it (see Deriver), and on success
// makes st the last state. ok false: derive the whole state; l is untouched.
func (l *derivation) patch(st State, opt Options, changed []string) (doc *routing.Document, delta *routing.Delta, ok bool) {
	if !l.ascending || !sameOptions(l.opt, opt) || len(st.Apps) != len(l.st.Apps) || len(st.Claims) != len(l.st.Claims) ||
		len(st.Nodes) != len(l.st.Nodes) || !slices.Equal(st.UnreadableClaims, l.st.UnreadableClaims) {
		return nil, nil, false
	}
	// The nodes: the same valid ones, none gone stale or fresh. A stale node's report
	// names its heartbeat time, so that must not move either.
	nodes := make(map[string]*nodeInfo, len(l.nodes))
	for i := range st.Nodes {
		rec, was := &st.Nodes[i], &l.st.Nodes[i]
		if rec.Name != was.Name {
			return nil, nil, false
		}
		old := l.nodes[rec.Name]
		if old == nil {
			continue // skipped (invalid name, duplicate, address): still, it is the same name
		}
		stale := opt.stale(rec.Seen)
		if stale != old.stale || (stale && !rec.Seen.Equal(was.Seen)) {
			return nil, nil, false
		}
		nodes[rec.Name] = &nodeInfo{rec: rec, stale: stale, hostPort: old.hostPort}
	}
	// The objects named: which applications they touch.
	touched := map[string]bool{}
	for _, k := range changed {
		switch {
		case strings.HasPrefix(k, PrefixApps) && strings.HasSuffix(k, ".json"):
			name := strings.TrimSuffix(strings.TrimPrefix(k, PrefixApps), ".json")
			i, found := l.appIndex(st.Apps, name)
			if !found {
				return nil, nil, false // added or removed
			}
			a, b := &l.st.Apps[i], &st.Apps[i]
			if a.Account != b.Account || a.GroupOf() != b.GroupOf() || a.Passthrough != b.Passthrough || a.ProxyProtocol != b.ProxyProtocol ||
				!slices.Equal(a.Middlewares, b.Middlewares) {
				// Middlewares too: they move routers of other applications (the path
				// routers that select this one), which a delta of this one's routes
				// does not name.
				return nil, nil, false
			}
			touched[name] = true
		case strings.HasPrefix(k, PrefixNodes) && strings.HasSuffix(k, ".json"):
			name := strings.TrimSuffix(strings.TrimPrefix(k, PrefixNodes), ".json")
			i := slices.IndexFunc(st.Nodes, func(r NodeRecord) bool { return r.Name == name })
			if i < 0 {
				return nil, nil, false
			}
			rec, was := &st.Nodes[i], &l.st.Nodes[i]
			if rec.Address != was.Address || rec.APIPort != was.APIPort {
				return nil, nil, false
			}
			if nodes[name] == nil {
				continue // a node no upstream comes from, before and after
			}
			if !instancesTouched(was.Instances, rec.Instances, touched) {
				return nil, nil, false // an invalid port is reported: derive it all
			}
		default:
			return nil, nil, false
		}
	}
	// Each touched application, derived again on its own.
	dv := &deriver{opt: opt, domains: l.domains, domainGroup: l.domainGrp, nodes: nodes}
	var changes []routeChange
	for _, name := range slices.Sorted(maps.Keys(touched)) {
		i, found := l.appIndex(st.Apps, name)
		if !found {
			continue // instances of no application: they route nothing
		}
		if l.reported(AppKey(name)) {
			return nil, nil, false
		}
		var ai appInfo
		if !dv.indexApp(&st.Apps[i], &ai, 1) || len(dv.skipped) > 0 {
			return nil, nil, false
		}
		idx, found := l.routesOf(&ai)
		if !found {
			return nil, nil, false
		}
		if len(idx) == 0 {
			continue
		}
		r := &l.doc.Routes[idx[0]]
		if r.HealthPath == ai.healthPath && slices.Equal(r.Upstreams, ai.upstreams) {
			continue
		}
		changes = append(changes, routeChange{idx: idx, ups: ai.upstreams, health: ai.healthPath})
	}
	l.st, l.nodes = st, nodes
	if len(changes) == 0 {
		return l.doc, nil, true
	}
	routes := slices.Clone(l.doc.Routes)
	var idx []int
	for _, c := range changes {
		for _, i := range c.idx {
			routes[i].Upstreams, routes[i].HealthPath = c.ups, c.health
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	base := l.doc
	doc = &routing.Document{V: routing.Version, Routes: routes, API: base.API}
	l.blocks = l.blocks.Reseal(doc, idx)
	l.doc = doc
	return doc, &routing.Delta{Base: base, Changed: idx}, true
}

// appIndex finds the application called name in apps, which has the names of the last
// state at the same indices (checked by the caller: the same length, the names named
// as changed looked up in both).
func (l *derivation) appIndex(apps []App, name string) (int, bool) {
	i, ok := slices.BinarySearchFunc(apps, name, func(a App, name string) int { return CompareAsKeys(a.Name, name) })
	if !ok || l.st.Apps[i].Name != name {
		return 0, false
	}
	return i, true
}

// reported reports whether the last report names object.
func (l *derivation) reported(object string) bool {
	_, found := slices.BinarySearchFunc(l.skipped, object, func(s Skipped, o string) int { return strings.Compare(s.Object, o) })
	return found
}

// routesOf returns the indices of ai's routes in the last document: its platform hosts
// and its claims. found false when a platform host is not where the rules put it (it
// cannot happen for an application without a report).
func (l *derivation) routesOf(ai *appInfo) ([]int, bool) {
	var idx []int
	name := ai.app.Name
	for _, d := range l.domains {
		if l.domainGrp[d] != ai.group {
			continue
		}
		host := name + "." + d
		i, ok := routing.RouteIndex(l.doc.Routes, host)
		if !ok || l.doc.Routes[i].Application != name {
			return nil, false
		}
		idx = append(idx, i)
	}
	for _, i := range l.claimRoutes[name] {
		idx = append(idx, int(i))
	}
	return idx, true
}

// instancesTouched adds to touched the applications whose instance differs between
// two versions of a node record's instances, and reports false when a differing
// instance is ready with an invalid port (the report names it).
func instancesTouched(was, now map[string]Instance, touched map[string]bool) bool {
	bad := func(in Instance) bool { return in.Ready && (in.Port < 1 || in.Port > 65535) }
	found := 0
	for app, in := range now {
		old, ok := was[app]
		if ok {
			found++
		}
		if !ok || old != in {
			if bad(in) || (ok && bad(old)) {
				return false
			}
			touched[app] = true
		}
	}
	if found == len(was) {
		return true // every old instance is still there: none was removed
	}
	for app, old := range was {
		if _, ok := now[app]; !ok {
			if bad(old) {
				return false
			}
			touched[app] = true
		}
	}
	return true
}
