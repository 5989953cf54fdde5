package fleet

import (
	"cmp"
	"fmt"
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
	// NodeTTL is how far a node's heartbeat may be from Now, either side, before the
	// node is stale (NodeLive). Zero or negative: no node is ever stale.
	NodeTTL time.Duration
	// Now is the time staleness is judged against (passed in, so Derive stays pure).
	Now time.Time
	// DomainGroups maps a platform domain to the ingress group it belongs to; a domain
	// not in the map belongs to routing.DefaultGroup. An application gets a platform
	// host under the domains of its own group only, so that each group's platform
	// wildcard DNS record can point at that group's ingresses.
	DomainGroups map[string]string
}

// stale reports whether a heartbeat at seen is not live at Now (NodeLive).
func (o Options) stale(seen time.Time) bool {
	return !NodeLive(seen, o.Now, o.NodeTTL)
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
//   - Staleness (fail static): a node whose heartbeat is older than NodeTTL, or dated
//     more than NodeTTL ahead of Now (NodeLive), is dropped from upstream lists, unless every ready upstream of the list is stale; then the
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

// derive runs every rule over st; document assembles what it found. The rules live by
// subject: index.go (platform domains, node records, applications, placement and
// upstreams), coverage.go (claims, and which names a wildcard claim may cover),
// routes.go (every held host and its holder, in host order), pathmaps.go (the path-map
// rules).
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
	// passthrough and proxyProtocol are the application's (App.Passthrough), valid.
	passthrough   bool
	proxyProtocol int
	// middlewares are the application's (App.Middlewares), valid; shared by every
	// route of it, read-only.
	middlewares []string
	upstreams   []routing.Upstream
	ok          bool // valid: routed
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
