package fleet

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/scafo/ingress/render/routing"
)

func (dv *deriver) indexDomains() {
	seen := make(map[string]bool, len(dv.opt.PlatformDomains))
	for _, d := range dv.opt.PlatformDomains {
		if err := routing.ValidateHost("platform domain", d); err != nil {
			dv.skip("platform.domains", "%v; domain ignored", err)
			continue
		}
		if !seen[d] {
			seen[d] = true
			dv.domains = append(dv.domains, d)
		}
	}
	slices.Sort(dv.domains)
	dv.domainGroup = make(map[string]string, len(dv.domains))
	for _, d := range dv.domains {
		dv.domainGroup[d] = ""
	}
	for _, d := range slices.Sorted(maps.Keys(dv.opt.DomainGroups)) {
		g := dv.opt.DomainGroups[d]
		if _, ok := dv.domainGroup[d]; !ok {
			dv.skip("platform.groups", "%q is not a platform domain; mapping to group %q ignored", d, g)
			continue
		}
		if err := routing.ValidateGroup("platform.groups", g); err != nil {
			dv.skip("platform.groups", "domain %q: %v; its hosts are not routed", d, err)
			dv.domainGroup[d] = "\x00invalid" // matches no application's group
			continue
		}
		if g != routing.DefaultGroup {
			dv.domainGroup[d] = g
		}
	}
}

// countNames returns how many times each name occurs.
func countNames[T any](items []T, name func(*T) string) map[string]int {
	n := make(map[string]int, len(items))
	for i := range items {
		n[name(&items[i])]++
	}
	return n
}

func (dv *deriver) indexNodes(recs []NodeRecord) {
	dv.nodes = make(map[string]*nodeInfo, len(recs))
	counts := countNames(recs, func(r *NodeRecord) string { return r.Name })
	for i := range recs {
		rec := &recs[i]
		key := NodeKey(rec.Name)
		if err := routing.ValidateLabel("node name", rec.Name); err != nil {
			dv.skip(key, "%v; node ignored", err)
			continue
		}
		if n := counts[rec.Name]; n > 1 {
			dv.skip(key, "%d records name node %q; all ignored", n, rec.Name)
			continue
		}
		addr, err := netip.ParseAddr(rec.Address)
		if err != nil || addr.Zone() != "" || !addr.IsValid() {
			dv.skip(key, "address %q is not an IP address without zone; node ignored", rec.Address)
			continue
		}
		if rec.APIPort < 1 || rec.APIPort > 65535 {
			dv.skip(key, "apiPort %d is not 1..65535; node ignored", rec.APIPort)
			continue
		}
		for app, inst := range rec.Instances {
			if inst.Ready && (inst.Port < 1 || inst.Port > 65535) {
				dv.skip(key, "instance %q: port %d is not 1..65535; instance ignored", app, inst.Port)
			}
		}
		stale := dv.opt.stale(rec.Seen)
		if ahead, _ := NodeAhead(rec.Seen, dv.opt.Now, dv.opt.NodeTTL); ahead {
			// The reason names seen, not the skew: it stays one string while time passes.
			dv.skip(key, "heartbeat dated more than the node TTL %s ahead of this node's clock (seen %s: a clock ahead, or a planted record); dropped from upstream lists, except lists whose every ready upstream is stale (fail static)",
				dv.opt.NodeTTL, rec.Seen.UTC().Format(time.RFC3339))
		} else if stale {
			dv.skip(key, "heartbeat older than the node TTL %s (seen %s); dropped from upstream lists, except lists whose every ready upstream is stale (fail static)",
				dv.opt.NodeTTL, rec.Seen.UTC().Format(time.RFC3339))
		}
		hostPort := addr.String() + ":"
		if addr.Is6() {
			hostPort = "[" + addr.String() + "]:"
		}
		dv.nodes[rec.Name] = &nodeInfo{rec: rec, stale: stale, hostPort: hostPort}
	}
}

func (dv *deriver) indexApps(apps []App) {
	dv.appIn = apps
	dv.appList = make([]appInfo, len(apps)) // appList[i] belongs to apps[i]; ok marks the valid ones
	// The store lists names in key order: then no name repeats, and appByName finds one by
	// binary search, without a fleet-sized map. Otherwise one map does both jobs: every
	// name is entered first (a name entered twice is counted in extra), and an
	// application that is then skipped leaves it again.
	var extra map[string]int // name → occurrences beyond the first
	if !namesAscending(apps) {
		dv.apps = make(map[string]*appInfo, len(apps))
		for i := range apps {
			n := len(dv.apps)
			dv.apps[apps[i].Name] = &dv.appList[i]
			if len(dv.apps) == n {
				if extra == nil {
					extra = map[string]int{}
				}
				extra[apps[i].Name]++
			}
		}
	}
	for i := range apps {
		app := &apps[i]
		if !dv.indexApp(app, &dv.appList[i], extra[app.Name]+1) && dv.apps != nil {
			delete(dv.apps, app.Name)
		}
	}
}

// namesAscending reports whether the applications are in strictly ascending order of
// CompareAsKeys: the order of their store keys, which is how the node lists them.
func namesAscending(apps []App) bool {
	for i := 1; i < len(apps); i++ {
		if CompareAsKeys(apps[i-1].Name, apps[i].Name) >= 0 {
			return false
		}
	}
	return true
}

// CompareAsKeys orders names as their store keys under one prefix ("apps/<name>.json",
// "domains/<host>.json") order them: "app-2" before "app", and "app.a" before "app" (a
// name with a dot is invalid, but a corrupt store may hold one, and binary search must
// still find every name). The node keeps its objects in that order too.
func CompareAsKeys(a, b string) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 || len(a) == len(b) {
		return c
	}
	if len(a) < len(b) {
		return -compareTail(b[n:])
	}
	return compareTail(a[n:])
}

// compareTail compares rest+".json" with ".json", rest not empty.
func compareTail(rest string) int {
	const sfx = ".json"
	for i := range len(sfx) {
		c := byte(0)
		if i < len(rest) {
			c = rest[i]
		} else {
			c = sfx[i-len(rest)]
		}
		if c != sfx[i] {
			if c < sfx[i] {
				return -1
			}
			return 1
		}
	}
	return 1 // ".json" is a proper prefix of rest+".json"
}

// appByName returns the valid application called name, or nil.
func (dv *deriver) appByName(name string) *appInfo {
	if dv.apps != nil {
		return dv.apps[name]
	}
	i, ok := slices.BinarySearchFunc(dv.appIn, name, func(a App, name string) int { return CompareAsKeys(a.Name, name) })
	if !ok || !dv.appList[i].ok {
		return nil
	}
	return &dv.appList[i]
}

// indexApp validates one application of count objects sharing its name and fills ai,
// reporting false when the application is skipped.
func (dv *deriver) indexApp(app *App, ai *appInfo, count int) bool {
	if err := routing.ValidateLabel("application name", app.Name); err != nil {
		dv.skip(AppKey(app.Name), "%v; application ignored", err)
		return false
	}
	if app.Name == routing.UnownedApplication {
		dv.skip(AppKey(app.Name), "application name %q is reserved for claimed hosts without a holder; application ignored", app.Name)
		return false
	}
	if count > 1 {
		dv.skip(AppKey(app.Name), "%d objects name application %q; all ignored", count, app.Name)
		return false
	}
	if err := routing.ValidateLabel("account", app.Account); err != nil {
		dv.skip(AppKey(app.Name), "%v; application ignored", err)
		return false
	}
	group := app.GroupOf()
	if err := routing.ValidateGroup("ingress.group", group); err != nil {
		// Its hosts belong to a group no ingress can name: guessing one could
		// route them through the wrong ingresses.
		dv.skip(AppKey(app.Name), "%v; application ignored", err)
		return false
	}
	if group == routing.DefaultGroup {
		group = ""
	}
	if app.ProxyProtocol != 0 && (!app.Passthrough || app.ProxyProtocol != routing.ProxyProtocolV2) {
		// A PROXY header the instance does not expect, or none where it expects one,
		// breaks every connection: guessing is worse than leaving it out.
		dv.skip(AppKey(app.Name), "proxyProtocol %d: must be absent or 2, and only with passthrough; application ignored", app.ProxyProtocol)
		return false
	}
	if len(app.Middlewares) > 0 {
		if err := routing.ValidateMiddlewares("middlewares", app.Middlewares); err != nil {
			// A router naming a reference Traefik cannot parse is refused with the
			// whole configuration; serving the application without the list could
			// drop its authentication: neither is better than leaving it out.
			dv.skip(AppKey(app.Name), "%v; application ignored", err)
			return false
		}
		if app.Passthrough {
			dv.skip(AppKey(app.Name), "middlewares on a passthrough application (a middleware is HTTP; it terminates TLS itself); application ignored")
			return false
		}
	}
	*ai = appInfo{app: app, group: group, placement: dv.placement(app.Name, app.Placement), ok: true,
		passthrough: app.Passthrough, proxyProtocol: app.ProxyProtocol, middlewares: app.Middlewares}
	dv.nApps++
	if app.Passthrough && app.Health != nil && app.Health.Path != "" {
		dv.skip(AppKey(app.Name), "health.path on a passthrough application (it speaks TLS, not HTTP, to the ingress); ignored")
	} else if app.Health != nil && app.Health.Path != "" {
		if err := routing.ValidateHealthPath("health.path", app.Health.Path); err != nil {
			dv.skip(AppKey(app.Name), "%v; node-delegated health check used instead", err)
		} else {
			ai.healthPath = app.Health.Path
		}
	}
	ai.upstreams = dv.upstreams(ai)
	if len(ai.upstreams) == 0 {
		ai.upstreams = []routing.Upstream{} // written as [], never null
		dv.skip(AppKey(app.Name), "no ready instance on any placed node; its hosts are routed to no upstream (503, fail closed)")
	}
	ai.platform = holder{account: app.Account, app: app.Name, routed: len(ai.upstreams) > 0, ai: ai}
	return true
}

// placement returns the valid, first-occurrence entries of an app's placement list,
// reporting the rest.
func (dv *deriver) placement(app string, list []string) []string {
	if len(list) <= 4 && placementClean(list) {
		return list // the common case: shared with the input, never written
	}
	out := make([]string, 0, len(list))
	var seen map[string]bool // only for long lists; short ones scan
	if len(list) > 8 {
		seen = make(map[string]bool, len(list))
	}
	for j, node := range list {
		if err := routing.ValidateLabel(fmt.Sprintf("placement[%d]", j), node); err != nil {
			dv.skip(AppKey(app), "%v; entry ignored", err)
			continue
		}
		dup := seen[node]
		if seen == nil {
			dup = slices.Contains(out, node)
		}
		if dup {
			dv.skip(AppKey(app), "placement[%d] repeats node %q; entry ignored", j, node)
			continue
		}
		if seen != nil {
			seen[node] = true
		}
		out = append(out, node)
	}
	return out
}

// placementClean reports whether a short placement list has only valid, distinct
// entries.
func placementClean(list []string) bool {
	for j, node := range list {
		if routing.ValidateLabel("", node) != nil || slices.Contains(list[:j], node) {
			return false
		}
	}
	return true
}

// upstreams is the app's upstream list: placement order, ready instances only, stale
// nodes dropped unless all are stale (fail static).
func (dv *deriver) upstreams(ai *appInfo) []routing.Upstream {
	var all []routing.Upstream
	stale := 0
	for _, name := range ai.placement {
		n := dv.nodes[name]
		if n == nil {
			continue
		}
		inst, ok := n.rec.Instances[ai.app.Name]
		// An instance made for another incarnation of the name (the app was deleted and
		// recreated) is the old owner's process: never routed.
		if !ok || !inst.Ready || inst.Port < 1 || inst.Port > 65535 || inst.AppID != ai.app.ID {
			continue
		}
		if all == nil {
			all = make([]routing.Upstream, 0, len(ai.placement))
		}
		all = append(all, routing.Upstream{Node: name, Address: n.address(inst.Port), APIPort: n.rec.APIPort})
		if n.stale {
			stale++
		}
	}
	if stale == 0 || stale == len(all) {
		return all // all fresh, or all stale: fail static keeps them
	}
	return slices.DeleteFunc(all, func(u routing.Upstream) bool { return dv.nodes[u.Node].stale })
}
