package fleet

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scafo/ingress/render/routing"
)

// State is the fleet state Derive folds: every application, claim and node record
// read from the store, in any order.
type State struct {
	Apps   []App
	Claims []Claim
	Nodes  []NodeRecord
	// UnreadableClaims are the hosts of claim objects that exist in the store but could
	// not be decoded, as named by their keys (domains/<host>.json → <host>), in any
	// order. The name is still held, by an application nobody can tell: the host gets a
	// fail-closed route (routing.UnownedApplication, no upstreams: Traefik answers 503)
	// and no wildcard may cover it. The caller fills it; Derive reports each entry.
	UnreadableClaims []string
}

// Options are the node settings derivation depends on. Every node of a fleet must run
// with the same PlatformDomains, APIPublic and NodeTTL, or nodes publish different
// documents for one state.
type Options struct {
	// PlatformDomains are the platform domains ("apps.example.com"), canonical (folded)
	// DNS names. Each application is routed at "<app>.<domain>" under every one.
	PlatformDomains []string
	// APIPublic routes the bare apex of each platform domain to the node API.
	APIPublic bool
	// NodeTTL is how old a node's heartbeat may be before the node is stale. Zero or
	// negative: no node is ever stale.
	NodeTTL time.Duration
	// Now is the time staleness is judged against (passed in, so Derive stays pure). A
	// heartbeat after Now is fresh.
	Now time.Time
	// DomainGroups maps a platform domain to the ingress group it belongs to; a domain
	// not in the map belongs to routing.DefaultGroup. An application gets a platform
	// host under the domains of its own group only, so that each group's platform
	// wildcard DNS record can point at that group's ingresses.
	DomainGroups map[string]string
}

// stale reports whether a heartbeat at seen is older than NodeTTL at Now.
func (o Options) stale(seen time.Time) bool {
	return o.NodeTTL > 0 && o.Now.Sub(seen) > o.NodeTTL
}

// Skipped is something Derive left out of the document, and why. The caller logs it
// and exposes it (GET /v1/status); nothing is dropped silently.
type Skipped struct {
	// Object is the store key of what was skipped ("domains/ti.to.json"), built from
	// the object's own name field; a path-map report adds "#paths"
	// ("domains/ti.to.json#paths"). Settings use "platform.domains".
	Object string `json:"object"`
	// Reason says what was wrong, for a human.
	Reason string `json:"reason"`
}

// Derive folds fleet state into the routing document, sealed (V and Revision set),
// and reports everything it left out. It is a pure function: no I/O, no clock, no
// randomness; the same State and Options give the same document bytes whatever the
// order of the slices and maps in them, on every node.
//
// The rules (docs/design.md §3), and why:
//
//   - Names are taken as stored, never rewritten. The API folds ASCII case and
//     validates before it writes, so a stored name that is not canonical (upper case, a
//     trailing dot, Unicode) was written by hand: the object is skipped and reported.
//     Two objects naming one application, host or node are all skipped: picking one
//     could hand a tenant's name to another tenant, and a duplicate is corruption the
//     operator must see.
//   - Upstreams come from placement order: for each node an application lists, in
//     order, the node's record must exist and report a ready instance of the
//     application with a valid port; the upstream is node.Address:instance.Port with the
//     node's API port (for node-delegated health checks). Only ready instances are
//     routed: readiness is the instance's own statement that it wants traffic.
//   - Staleness (fail static): a node whose heartbeat is older than NodeTTL is dropped
//     from upstream lists, unless every ready upstream of the list is stale; then the
//     list keeps them all, in order. A store outage or a partitioned fleet looks
//     exactly like every node going stale at once, and stale routing beats no routing.
//     Heartbeat times are not part of the document: a heartbeat within the TTL never
//     moves the revision.
//   - Fail closed: a host that exists in the fleet (the platform host of a valid
//     application, or a claimed name) always has its own route. An application with no
//     ready upstream keeps a route on every host, with an empty upstream list (an
//     ingress answers 503), and is reported: with no route at all, a request for the
//     host would find whatever else matches it (a wildcard) instead. A path target must
//     still be a ready route, so an unready application is never the target of a
//     prefix: the entry drops and the host's own application answers it (seed 000).
//   - Platform hosts are "<app>.<domain>" for every platform domain. The platform's
//     names are its own (PlatformConflict, the rule the API applies): a claim strictly
//     below a platform domain, a wildcard of or under one, and a wildcard covering a
//     platform apex ("*.example.com" over "apps.example.com") are skipped. A wildcard
//     certificate never broadens routing: no wildcard route is made under a platform
//     domain.
//   - Claims are custom-domain routes of their application. The claim's account must be
//     the application's: the claim is what lets a host's path map point traffic, and
//     that authority belongs to the account.
//   - A claimed name without a holder that can be named (its object is unreadable,
//     State.UnreadableClaims; it names a missing application or one of another account;
//     two objects name it) is still held: an exact host gets a route of
//     routing.UnownedApplication without upstreams (503) and is reported; a wildcard is
//     skipped (it has nothing to answer). No application may be called
//     routing.UnownedApplication.
//   - Claims are exclusive across accounts by coverage (ClaimConflict, the rule the API
//     applies on write): a custom wildcard route never covers a name held by another
//     account or by no nameable holder. When the store holds both anyway, the wildcard
//     loses, whatever the order of the input: it is skipped and reported naming one
//     covered host, and every covered host keeps its own route. (Dropping the exact name
//     instead would hand its traffic to the wildcard: the very leak the rule exists to
//     prevent.)
//   - The API apex: with APIPublic, every platform domain that no application holds
//     (as a claim, or as a platform host of another platform domain) routes to the node
//     API on every node record, ordered by node name, under the same fail-static rule,
//     with routing.DeniedAPIPrefixes denied. A claimed apex stays out even while its
//     application is not ready: application routes win, and the apex must not flap
//     between the application and the node API with readiness. No API section when no
//     apex or no node is left.
//   - Path maps: every entry's target must be the exact host of a route in this
//     document, of the same account as the claim, and not the claim's own host. A
//     prefix must never point another tenant's traffic at your backend, and a prefix
//     selects a route; it does not define one. A failing entry contributes nothing;
//     failures are reported once per host per pass, one Skipped per reason with up to
//     five examples. At most routing.MaxPaths prefixes per host: beyond the cap the
//     sorted keys after the first MaxPaths are dropped (decided on the map as
//     published, before any other check, so the cut does not move with readiness), and
//     the drop is reported. A map left empty is absent. A consequence to know: when
//     every instance of a target application reports not ready, its entries drop and
//     the claim's own application answers those prefixes again until the target is
//     ready (the §3 rule; staleness alone never does this, thanks to fail static).
//   - The health path is the application's; an invalid one is ignored (the render
//     falls back to the node-delegated check) and reported.
//
// What Derive does not decide: whether to publish. A node that has not completed a
// full, successful store read must publish nothing at all (503 draining) rather than
// the document Derive returns for a partial state: an empty document would withdraw
// every route from every ingress. That is the caller's job, as is keeping the last
// good document when the store fails.
func Derive(st State, opt Options) (*routing.Document, []Skipped) {
	dv := derive(st, opt)
	doc := dv.document()
	doc.Seal()
	return doc, dv.skippedSorted()
}

// derive runs every rule over st; document assembles what it found.
func derive(st State, opt Options) *deriver {
	dv := &deriver{opt: opt}
	dv.indexDomains()
	dv.indexNodes(st.Nodes)
	dv.indexApps(st.Apps)
	dv.indexClaims(st.Claims, st.UnreadableClaims)
	dv.buildRoutes()
	dv.buildPaths()
	return dv
}

// document is the unsealed document of a derivation.
func (dv *deriver) document() *routing.Document {
	return &routing.Document{V: routing.Version, Routes: dv.routes, API: dv.buildAPI()}
}

// PlatformOwner reports whether host (a canonical host or one-label wildcard) lies
// strictly below one of the platform domains, and which. Such a name belongs to the
// platform (platform hosts are rendered from application names) and can never be
// claimed; the bare apex itself can. The API uses the same rule to refuse claims.
func PlatformOwner(host string, platformDomains []string) (string, bool) {
	for _, d := range platformDomains {
		if len(host) > len(d)+1 && strings.HasSuffix(host, d) && host[len(host)-len(d)-1] == '.' {
			return d, true
		}
	}
	return "", false
}

type nodeInfo struct {
	rec   *NodeRecord
	stale bool
	// hostPort is the address as it prefixes a port: "10.83.0.1:" or "[fd00::1]:".
	hostPort string
}

// address returns "ip:port" for port on this node, as netip.AddrPort formats it.
func (n *nodeInfo) address(port int) string {
	var buf [64]byte
	return string(strconv.AppendInt(append(buf[:0], n.hostPort...), int64(port), 10))
}

type appInfo struct {
	app        *App
	group      string // "" for routing.DefaultGroup (the document's spelling)
	placement  []string
	healthPath string
	upstreams  []routing.Upstream
	ok         bool // valid: routed
	// platform is the holder of the application's platform hosts (holderOf).
	platform holder
}

// holder is who holds a host name: an application (ready or not) of an account, or
// routing.UnownedApplication with account "" for a claimed name without a holder.
type holder struct {
	account string
	app     string
	routed  bool
	claim   *Claim   // nil for platform hosts
	ai      *appInfo // nil for routing.UnownedApplication
}

type deriver struct {
	opt     Options
	domains []string
	// domainGroup is each valid domain's group ("" for the default group).
	domainGroup map[string]string
	nodes       map[string]*nodeInfo
	apps        map[string]*appInfo // by name, valid ones only; nil when appIn is in name order (appByName)
	appIn       []App
	appList     []appInfo // appList[i] is apps[i]; only those with ok set are valid
	nApps       int       // how many of appList are valid
	claims      []*Claim  // the valid claims, in input order
	unowned     []string  // exact hosts claimed without a holder that can be named, sorted
	// held holds the claimed hosts (claims, and claims without a holder); platform
	// hosts are not entered, holderOf computes theirs from the name.
	held map[string]*holder
	// targets caches holderOf for path-map targets (buildPaths runs once every host
	// is held).
	targets map[string]*holder
	routes  []routing.Route
	// routeHolders[i] is the holder of routes[i] (set once routes are sorted).
	routeHolders []*holder
	skipped      []Skipped
}

// skipGroupsWithoutDomain reports each application whose ingress group no platform
// domain belongs to (--platform.groups maps none to it): it gets no platform host, and
// without this line nothing would say why. Its custom domains still route. Nothing is
// said when there is no platform domain at all (a fleet of custom domains only).
func (dv *deriver) skipGroupsWithoutDomain() {
	if len(dv.domains) == 0 {
		return
	}
	served := make(map[string]bool, len(dv.domains))
	for _, d := range dv.domains {
		served[dv.domainGroup[d]] = true
	}
	for i := range dv.appList {
		ai := &dv.appList[i]
		if ai.ok && !served[ai.group] {
			dv.skip(AppKey(ai.app.Name), "ingress group %q has no platform domain (--platform.groups maps none to it): no platform host; its custom domains still route", ai.group)
		}
	}
}

func (dv *deriver) skip(object, format string, args ...any) {
	dv.skipped = append(dv.skipped, Skipped{Object: object, Reason: fmt.Sprintf(format, args...)})
}

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
		if stale {
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
	*ai = appInfo{app: app, group: group, placement: dv.placement(app.Name, app.Placement), ok: true}
	dv.nApps++
	if app.Health != nil && app.Health.Path != "" {
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

func (dv *deriver) indexClaims(claims []Claim, unreadable []string) {
	counts := countNames(claims, func(c *Claim) string { return c.Host })
	for _, h := range unreadable {
		counts[h]++
	}
	unowned := map[string]bool{}
	// noHolder records a claimed name whose holder cannot be named: an exact host is
	// held by nobody (a 503 route), a wildcard is left out.
	noHolder := func(host, why string) {
		if routing.IsWildcard(host) {
			dv.skip(ClaimKey(host), "%s; wildcard not routed", why)
			return
		}
		dv.skip(ClaimKey(host), "%s; the host is held by no application and answers 503 (fail closed) until the store is fixed", why)
		unowned[host] = true
	}
	dv.claims = make([]*Claim, 0, len(claims))
	for i := range claims {
		c := &claims[i]
		key := ClaimKey(c.Host)
		if err := routing.ValidateCustomHost("host", c.Host); err != nil {
			dv.skip(key, "%v; claim ignored", err)
			continue
		}
		if err := PlatformConflict(c.Host, dv.domains); err != nil {
			dv.skip(key, "%v; claim ignored", err)
			continue
		}
		if n := counts[c.Host]; n > 1 {
			noHolder(c.Host, fmt.Sprintf("%d claim objects name host %q", n, c.Host))
			continue
		}
		ai := dv.appByName(c.App)
		if ai == nil {
			noHolder(c.Host, fmt.Sprintf("application %q not found (or skipped)", c.App))
			continue
		}
		if c.Account != ai.app.Account {
			noHolder(c.Host, fmt.Sprintf("claim account %q is not the account of application %q", c.Account, c.App))
			continue
		}
		dv.claims = append(dv.claims, c)
	}
	for _, h := range unreadable {
		key := ClaimKey(h)
		if err := routing.ValidateCustomHost("host", h); err != nil {
			dv.skip(key, "claim object could not be decoded, and its key names no valid host (%v); ignored", err)
			continue
		}
		if err := PlatformConflict(h, dv.domains); err != nil {
			dv.skip(key, "claim object could not be decoded; %v; ignored", err)
			continue
		}
		if n := counts[h]; n > 1 {
			noHolder(h, fmt.Sprintf("%d claim objects name host %q", n, h))
			continue
		}
		noHolder(h, "claim object could not be decoded")
	}
	for h := range unowned {
		dv.unowned = append(dv.unowned, h)
	}
	slices.Sort(dv.unowned)
}

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

// coverFree returns the wildcard claims that cover no held name of another account (or
// of no nameable holder) and reports the others: the wildcard loses. Every exact name
// is held by now; a covered name is exactly one label below the wildcard
// (routing.Covers), so one pass over the held names (each with the index of its
// holder) finds every conflict.
func (dv *deriver) coverFree(wildcards []*Claim, held []hostAt, holders []holder) []*Claim {
	if len(wildcards) == 0 {
		return nil
	}
	byParent := make(map[string]*Claim, len(wildcards))
	for _, c := range wildcards {
		byParent[c.Host[len("*."):]] = c
	}
	type conflict struct {
		first string // the smallest covered host of another account
		n     int
	}
	conflicts := map[*Claim]*conflict{}
	for _, o := range held {
		host, h := o.host, &holders[o.i]
		_, parent, ok := strings.Cut(host, ".")
		if !ok {
			continue
		}
		c := byParent[parent]
		if c == nil || !routing.Covers(c.Host, host) || (h.account == c.Account && h.app != routing.UnownedApplication) {
			continue
		}
		cf := conflicts[c]
		if cf == nil {
			cf = &conflict{first: host}
			conflicts[c] = cf
		}
		cf.n++
		if host < cf.first {
			cf.first = host
		}
	}
	out := wildcards[:0:0]
	for _, c := range wildcards {
		cf := conflicts[c]
		if cf == nil {
			out = append(out, c)
			continue
		}
		h := dv.holderOf(cf.first)
		who := fmt.Sprintf("application %q of another account", h.app)
		if h.app == routing.UnownedApplication {
			who = "no application (its claim has no holder that can be named)"
		}
		more := ""
		if cf.n > 1 {
			more = fmt.Sprintf(" (and %d more such names)", cf.n-1)
		}
		dv.skip(ClaimKey(c.Host), "covers %q, held by %s%s; a wildcard never covers another account's name: wildcard not routed, the covered names keep their own routes", cf.first, who, more)
	}
	return out
}

// pathFailure groups the entries of one host's map that failed for one reason.
type pathFailure struct {
	reason   string
	count    int
	examples []string
}

const maxPathExamples = 5

func (dv *deriver) buildPaths() {
	for i := range dv.routes {
		r := &dv.routes[i]
		h := dv.routeHolders[i]
		if h.claim == nil || len(h.claim.Paths) == 0 {
			continue
		}
		r.Paths = dv.pathMap(r.Host, h)
	}
}

func (dv *deriver) pathMap(host string, h *holder) map[string]string {
	src := h.claim.Paths
	object := ClaimKey(host) + "#paths"

	// The cap is decided on the map as published: keep the first MaxPaths keys in
	// sorted order. Sorting is only needed when the cap bites.
	capped, last := false, ""
	if len(src) > routing.MaxPaths {
		keys := make([]string, 0, len(src))
		for k := range src {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dropped := keys[routing.MaxPaths:]
		dv.skip(object, "%d prefixes exceed the cap of %d per host; dropped the last %d in sorted key order (%q … %q)",
			len(keys), routing.MaxPaths, len(dropped), dropped[0], dropped[len(dropped)-1])
		capped, last = true, keys[routing.MaxPaths-1]
	}

	type failed struct{ key, target, reason string }
	var failures []failed
	out := make(map[string]string, min(len(src), routing.MaxPaths))
	for k, target := range src {
		if capped && k > last {
			continue
		}
		if reason := dv.pathEntryProblem(host, h, k, target); reason != "" {
			failures = append(failures, failed{k, target, reason})
			continue
		}
		out[k] = target
	}

	// Report once per host and reason, with the first few keys in sorted order.
	if len(failures) > 0 {
		slices.SortFunc(failures, func(a, b failed) int { return strings.Compare(a.key, b.key) })
		var groups []*pathFailure
		byReason := map[string]*pathFailure{}
		for _, f := range failures {
			g := byReason[f.reason]
			if g == nil {
				g = &pathFailure{reason: f.reason}
				byReason[f.reason] = g
				groups = append(groups, g)
			}
			g.count++
			if len(g.examples) < maxPathExamples {
				g.examples = append(g.examples, strconv.Quote(f.key)+" → "+strconv.Quote(f.target))
			}
		}
		for _, g := range groups {
			more := ""
			if g.count > len(g.examples) {
				more = fmt.Sprintf(", and %d more", g.count-len(g.examples))
			}
			dv.skip(object, "%d entries ignored: %s: %s%s", g.count, g.reason, strings.Join(g.examples, ", "), more)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// pathEntryProblem returns why one path-map entry of host (held by h) cannot be
// published, or "" when it can.
func (dv *deriver) pathEntryProblem(host string, h *holder, prefix, target string) string {
	if routing.ValidatePrefix("prefix", prefix) != nil {
		return "invalid prefix (must match [a-z0-9][a-z0-9._~-]*, at most 63 bytes)"
	}
	t, seen := dv.targets[target]
	if !seen {
		// Maps of thousands of prefixes name a few targets: each is resolved once.
		if dv.targets == nil {
			dv.targets = map[string]*holder{}
		}
		t = dv.holderOf(target)
		dv.targets[target] = t
	}
	// Held names are validated already; only a miss (or a wildcard) needs the full check.
	if t == nil || routing.IsWildcard(target) {
		if routing.ValidateHost("target", target) != nil {
			return "target is not a canonical host name"
		}
	}
	switch {
	case target == host:
		return "target is this host itself"
	case t == nil:
		return "target is not a host of any application"
	case t.app == routing.UnownedApplication:
		return "target is a claimed host without a holder (its claim object is unreadable or inconsistent)"
	case t.account != h.account:
		return "target belongs to another account"
	case !t.routed:
		return "target's application has no ready instance"
	}
	return ""
}

func (dv *deriver) buildAPI() *routing.API {
	if !dv.opt.APIPublic {
		return nil
	}
	var hosts []string
	for _, d := range dv.domains {
		if dv.holderOf(d) == nil {
			hosts = append(hosts, d)
		}
	}
	if len(hosts) == 0 {
		return nil
	}
	names := make([]string, 0, len(dv.nodes))
	for name := range dv.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	var all, fresh []routing.Upstream
	for _, name := range names {
		n := dv.nodes[name]
		u := routing.Upstream{
			Node:    name,
			Address: n.address(n.rec.APIPort),
			APIPort: n.rec.APIPort,
		}
		all = append(all, u)
		if !n.stale {
			fresh = append(fresh, u)
		}
	}
	ups := all
	if len(fresh) > 0 {
		ups = fresh
	}
	if len(ups) == 0 {
		return nil
	}
	return &routing.API{Hosts: hosts, Upstreams: ups, Denied: slices.Clone(routing.DeniedAPIPrefixes)}
}

func (dv *deriver) skippedSorted() []Skipped {
	s := dv.skipped
	if s == nil {
		return []Skipped{}
	}
	slices.SortFunc(s, func(a, b Skipped) int {
		return cmp.Or(cmp.Compare(a.Object, b.Object), cmp.Compare(a.Reason, b.Reason))
	})
	return slices.Compact(s)
}
