package render

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// The generators TestIncrementalRenderEqualsFullRender draws its documents and changes
// from (differential_test.go).

// fleetEditor applies random edits to a generated fleet state: every kind of change a
// store sees (applications come and go, instances flip readiness and move ports,
// placements reorder, prefixes flip targets, health paths change, custom wildcards are
// claimed, the API apex is claimed and released, nodes join).
type fleetEditor struct {
	rng *rand.Rand
	st  fleet.State
	opt fleet.Options
	n   int // names minted
	// coverApex adds a route *.example.com to the derived document (see doc).
	coverApex bool
	// fc are the fleet certificates rendered with the document (nil: none).
	fc *FleetCerts
}

// editFleetCerts applies one random change to the fleet certificates: switched on
// (with the API apex and one host issued) or off, a name issued, renewed, pending, or
// dropped.
func (fe *fleetEditor) editFleetCerts() string {
	r := fe.rng
	d := fe.doc()
	if fe.fc == nil || r.IntN(8) == 0 {
		if fe.fc != nil {
			fe.fc = nil
			return "fleet certificates off"
		}
		fe.fc = &FleetCerts{Managed: map[string]bool{}}
		if r.IntN(2) == 0 {
			fe.fc.HTTPEntryPoints = []string{"web", "http-alt"}
		}
		if d.API != nil && len(d.API.Hosts) > 0 {
			fe.fc = fleetCertsWith(fe.fc, d.API.Hosts[0], true, fe.n)
		}
		return "fleet certificates on"
	}
	var name string
	if d.API != nil && len(d.API.Hosts) > 0 && r.IntN(4) == 0 {
		name = d.API.Hosts[r.IntN(len(d.API.Hosts))]
	} else if len(d.Routes) > 0 {
		name = d.Routes[r.IntN(len(d.Routes))].Host
	} else {
		return "noop"
	}
	fe.n++
	switch r.IntN(4) {
	case 0:
		fe.fc = fleetCertsWithout(fe.fc, name)
		return "certificate of " + name + " dropped"
	case 1:
		fe.fc = fleetCertsWith(fe.fc, name, false, fe.n)
		return "certificate of " + name + " pending"
	default:
		fe.fc = fleetCertsWith(fe.fc, name, true, fe.n)
		return "certificate of " + name + " issued"
	}
}

// doc derives the current state, plus the apex-covering wildcard route when asked for.
func (fe *fleetEditor) doc() *routing.Document {
	d, _ := fleet.Derive(fe.st, fe.opt)
	if fe.coverApex && len(d.Routes) > 0 {
		return withCoverApex(d)
	}
	return d
}

func (fe *fleetEditor) app() *fleet.App {
	return &fe.st.Apps[fe.rng.IntN(len(fe.st.Apps))]
}

// edit applies one random edit and names it.
func (fe *fleetEditor) edit() string {
	r := fe.rng
	st := &fe.st
	if r.IntN(4) == 0 {
		return fe.editFleetCerts()
	}
	switch k := r.IntN(12); k {
	case 0: // add an application, ready on two nodes
		fe.n++
		name := fmt.Sprintf("new-%d", fe.n)
		acct := fmt.Sprintf("acct-%03d", r.IntN(3))
		st.Apps = append(st.Apps, fleet.App{Name: name, Account: acct, Placement: []string{"vps-a", "vps-c"}})
		for i := range st.Nodes {
			st.Nodes[i].Instances[name] = fleet.Instance{Port: 30000 + fe.n, Ready: true}
		}
		return "add app " + name
	case 1: // remove an application
		if len(st.Apps) < 3 {
			return "noop"
		}
		i := r.IntN(len(st.Apps))
		name := st.Apps[i].Name
		st.Apps = slices.Delete(st.Apps, i, i+1)
		return "remove app " + name
	case 2: // flip an instance's readiness
		a := fe.app()
		n := &st.Nodes[r.IntN(len(st.Nodes))]
		inst, ok := n.Instances[a.Name]
		if !ok {
			inst = fleet.Instance{Port: 40000 + r.IntN(1000)}
		}
		inst.Ready = !inst.Ready
		n.Instances[a.Name] = inst
		return fmt.Sprintf("flip %s on %s to ready=%v", a.Name, n.Name, inst.Ready)
	case 3: // move an instance's port
		a := fe.app()
		n := &st.Nodes[r.IntN(len(st.Nodes))]
		n.Instances[a.Name] = fleet.Instance{Port: 1 + r.IntN(60000), Ready: true}
		return "move port of " + a.Name + " on " + n.Name
	case 4: // reorder or change a placement (one, two or three upstreams)
		a := fe.app()
		all := []string{"vps-a", "vps-b", "vps-c"}
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		a.Placement = all[:1+r.IntN(3)]
		return fmt.Sprintf("placement of %s = %v", a.Name, a.Placement)
	case 5: // change a health path
		a := fe.app()
		switch r.IntN(3) {
		case 0:
			a.Health = nil
		case 1:
			a.Health = &fleet.Health{Path: "/healthz"}
		default:
			a.Health = &fleet.Health{Path: fmt.Sprintf("/h%d", r.IntN(5))}
		}
		return "health of " + a.Name
	case 6: // flip a prefix to another target of the account (or a new prefix)
		for i := range st.Claims {
			c := &st.Claims[i]
			if c.Host != "ti.to" {
				continue
			}
			if c.Paths == nil {
				c.Paths = map[string]string{}
			}
			p := fmt.Sprintf("p%05d", r.IntN(len(c.Paths)+5))
			target := fmt.Sprintf("app-%05d.apps.example.com", 100*r.IntN(len(st.Apps)/100+1))
			c.Paths[p] = target
			return "flip prefix " + p + " → " + target
		}
		return "noop"
	case 7: // drop a prefix
		for i := range st.Claims {
			c := &st.Claims[i]
			for p := range c.Paths {
				delete(c.Paths, p)
				return "drop prefix " + p + " of " + c.Host
			}
		}
		return "noop"
	case 8: // claim a custom wildcard (for its own account's app, or over a foreign name)
		a := fe.app()
		fe.n++
		host := fmt.Sprintf("*.w%d.example.net", fe.n)
		if r.IntN(2) == 0 {
			host = "*.example.org" // covers other accounts' app-NNNNN.example.org: the wildcard loses
		}
		st.Claims = append(st.Claims, fleet.Claim{Host: host, Account: a.Account, App: a.Name})
		return "claim " + host + " for " + a.Name
	case 9: // the API apex: claim it, release it, or switch the API off and on
		switch r.IntN(3) {
		case 0:
			a := fe.app()
			st.Claims = slices.DeleteFunc(st.Claims, func(c fleet.Claim) bool { return c.Host == "apps.example.com" })
			st.Claims = append(st.Claims, fleet.Claim{Host: "apps.example.com", Account: a.Account, App: a.Name})
			return "claim the apex for " + a.Name
		case 1:
			st.Claims = slices.DeleteFunc(st.Claims, func(c fleet.Claim) bool { return c.Host == "apps.example.com" })
			return "release the apex"
		default:
			fe.opt.APIPublic = !fe.opt.APIPublic
			return fmt.Sprintf("api.public=%v", fe.opt.APIPublic)
		}
	case 10: // a wildcard route covering the apex (*.example.com), or its removal
		// Derive never makes one (the platform owns its apex), but a document is the
		// render's input and may hold one: the apex then needs its deny router.
		fe.coverApex = !fe.coverApex
		return fmt.Sprintf("*.example.com route: %v", fe.coverApex)
	default: // a node joins or leaves (the API's upstreams)
		if len(st.Nodes) > 3 {
			st.Nodes = st.Nodes[:3]
			return "node vps-d leaves"
		}
		st.Nodes = append(st.Nodes, fleet.NodeRecord{Name: "vps-d", Address: "10.83.0.4", APIPort: 7400,
			Seen: st.Nodes[0].Seen, Instances: map[string]fleet.Instance{}})
		return "node vps-d joins"
	}
}

// corruptDoc returns a copy of doc (a valid derived document) with one random defect a
// hand-written or damaged document could carry, and names it. doc is not modified.
func corruptDoc(r *rand.Rand, doc *routing.Document) (*routing.Document, string) {
	d := *doc
	d.Routes = slices.Clone(doc.Routes)
	i := r.IntN(len(d.Routes))
	rt := &d.Routes[i]
	// sibling is another route of rt's application, or -1.
	sibling := -1
	for j := range d.Routes {
		if j != i && d.Routes[j].Application == rt.Application {
			sibling = j
			break
		}
	}
	withPaths := -1
	for j := range d.Routes {
		if len(d.Routes[j].Paths) > 0 {
			withPaths = j
			break
		}
	}
	switch k := r.IntN(16); k {
	case 0:
		d.V = 2
		return &d, "version 2"
	case 1:
		rt.Host = strings.ToUpper(rt.Host)
		return &d, "upper-case host " + rt.Host
	case 2:
		if i == 0 {
			return &d, "noop"
		}
		rt.Host = d.Routes[i-1].Host
		return &d, "duplicate host " + rt.Host
	case 3:
		rt.Application = "Bad_App"
		return &d, "invalid application on " + rt.Host
	case 4:
		rt.HealthPath = "no-slash"
		return &d, "invalid health path on " + rt.Host
	case 5:
		rt.Group = []string{routing.DefaultGroup, "Bad_G", "eu-1"}[r.IntN(3)]
		return &d, "group " + rt.Group + " on " + rt.Host
	case 6:
		if len(rt.Upstreams) == 0 {
			return &d, "noop"
		}
		rt.Upstreams = slices.Clone(rt.Upstreams)
		u := &rt.Upstreams[r.IntN(len(rt.Upstreams))]
		switch r.IntN(4) {
		case 0:
			u.Address = "10.0.0.1"
		case 1:
			u.Node = "Bad Node"
		case 2:
			u.APIPort = 70000
		default:
			u.APIPort = 0 // valid, but needed without a health path
		}
		return &d, "upstream of " + rt.Host
	case 7:
		if sibling < 0 {
			return &d, "noop"
		}
		rt.Upstreams = append(slices.Clone(rt.Upstreams), routing.Upstream{Node: "vps-z", Address: "10.0.0.9:9", APIPort: 7400})
		return &d, "upstreams of " + rt.Host + " differ from its sibling's"
	case 8:
		if sibling < 0 {
			return &d, "noop"
		}
		rt.HealthPath = "/other"
		return &d, "health path of " + rt.Host + " differs from its sibling's"
	case 9, 10, 11:
		if withPaths < 0 {
			return &d, "noop"
		}
		p := &d.Routes[withPaths]
		m := maps.Clone(p.Paths)
		p.Paths = m
		switch k {
		case 9:
			m["Bad Prefix"] = p.Host
			return &d, "invalid prefix on " + p.Host
		case 10:
			for _, t := range m {
				// Remove a target's route: the map now points at nothing.
				j, _ := slices.BinarySearchFunc(d.Routes, t, func(r routing.Route, h string) int { return strings.Compare(r.Host, h) })
				d.Routes = slices.Delete(d.Routes, j, j+1)
				return &d, "target " + t + " of " + p.Host + " removed"
			}
		default:
			m["zz"] = "*.example.net"
			return &d, "wildcard target on " + p.Host
		}
		return &d, "noop"
	case 12:
		if d.API == nil || len(d.API.Hosts) == 0 {
			return &d, "noop"
		}
		api := *d.API
		api.Hosts = append(slices.Clone(api.Hosts), api.Hosts[0])
		d.API = &api
		return &d, "duplicate api host"
	case 13:
		if d.API == nil {
			return &d, "noop"
		}
		api := *d.API
		api.Hosts = append(slices.Clone(api.Hosts), rt.Host)
		slices.Sort(api.Hosts)
		d.API = &api
		return &d, "api host " + rt.Host + " is a route's"
	case 14:
		if d.API == nil {
			return &d, "noop"
		}
		api := *d.API
		api.Denied = []string{"relative"}
		d.API = &api
		return &d, "invalid denied prefix"
	default:
		rt.Host = "bad..host.example.com"
		return &d, "invalid host"
	}
}

// editMixed applies one edit that fleetEditor.edit never makes: an application moves to
// another ingress group; a custom wildcard gets a path map (its prefixes are rendered in
// the wildcard bands); a custom domain's prefix points at a host of another group; a
// claim object becomes unreadable (or readable again); a node goes stale.
func (fe *fleetEditor) editMixed() string {
	r := fe.rng
	st := &fe.st
	switch r.IntN(8) {
	case 6:
		// A route *.example.com over the apexes (see fleetEditor.doc), with the API on.
		fe.coverApex = !fe.coverApex
		fe.opt.APIPublic = fe.opt.APIPublic || fe.coverApex
		return fmt.Sprintf("*.example.com route: %v, api.public=%v", fe.coverApex, fe.opt.APIPublic)
	case 0:
		a := fe.app()
		g := testGroups[r.IntN(len(testGroups))]
		a.Ingress = &fleet.Ingress{Group: g}
		return a.Name + " moves to group " + g
	case 1, 2:
		// A wildcard (new, or an existing one) publishes prefixes to exact hosts of its
		// account, in any group.
		d := fe.doc()
		var wild []int
		for i := range st.Claims {
			if routing.IsWildcard(st.Claims[i].Host) {
				wild = append(wild, i)
			}
		}
		if len(wild) == 0 || r.IntN(3) == 0 {
			a := fe.app()
			fe.n++
			st.Claims = append(st.Claims, fleet.Claim{Host: fmt.Sprintf("*.m%d.example.net", fe.n), Account: a.Account, App: a.Name})
			wild = append(wild, len(st.Claims)-1)
		}
		c := &st.Claims[wild[r.IntN(len(wild))]]
		account := ""
		for _, a := range st.Apps {
			if a.Name == c.App {
				account = a.Account
			}
		}
		var targets []string
		for _, rt := range d.Routes {
			if routing.IsWildcard(rt.Host) || rt.Application == c.App {
				continue
			}
			for _, a := range st.Apps {
				if a.Name == rt.Application && a.Account == account {
					targets = append(targets, rt.Host)
				}
			}
		}
		if len(targets) == 0 {
			return "noop"
		}
		paths := map[string]string{}
		for p := range c.Paths {
			paths[p] = c.Paths[p]
		}
		for range 1 + r.IntN(5) {
			paths[fmt.Sprintf("w%d", r.IntN(8))] = targets[r.IntN(len(targets))]
		}
		c.Paths = paths
		return fmt.Sprintf("paths of %s = %v", c.Host, paths)
	case 3, 7:
		// A custom domain of one group targets a host of another group.
		d := fe.doc()
		var exact []int
		for i := range st.Claims {
			if !routing.IsWildcard(st.Claims[i].Host) && st.Claims[i].Host != "ti.to" {
				exact = append(exact, i)
			}
		}
		if len(exact) == 0 {
			return "noop"
		}
		c := &st.Claims[exact[r.IntN(len(exact))]]
		var targets []string
		for _, rt := range d.Routes {
			if !routing.IsWildcard(rt.Host) && rt.Application != c.App {
				for _, a := range st.Apps {
					if a.Name == rt.Application && a.Account == c.Account {
						targets = append(targets, rt.Host)
					}
				}
			}
		}
		if len(targets) == 0 {
			return "noop"
		}
		paths := map[string]string{}
		for p := range c.Paths {
			paths[p] = c.Paths[p]
		}
		p := fmt.Sprintf("x%d", r.IntN(4))
		paths[p] = targets[r.IntN(len(targets))]
		c.Paths = paths
		moved := ""
		if r.IntN(4) != 0 {
			// The claim's application moves to another group than the target's (its
			// custom domain goes with it; the target stays where it is).
			for i := range st.Apps {
				if st.Apps[i].Name == c.App {
					g := testGroups[r.IntN(len(testGroups))]
					st.Apps[i].Ingress = &fleet.Ingress{Group: g}
					moved = ", " + c.App + " moves to " + g
				}
			}
		}
		return fmt.Sprintf("prefix %s of %s → %s%s", p, c.Host, paths[p], moved)
	case 4:
		// A claim object becomes unreadable (its host is held by nobody: a 503 route),
		// or the unreadable one is repaired.
		if len(st.UnreadableClaims) > 0 {
			st.UnreadableClaims = nil
			return "unreadable claims repaired"
		}
		c := st.Claims[r.IntN(len(st.Claims))]
		if c.Host == "ti.to" {
			return "noop"
		}
		st.Claims = slices.DeleteFunc(st.Claims, func(x fleet.Claim) bool { return x.Host == c.Host })
		st.UnreadableClaims = append(st.UnreadableClaims, c.Host)
		return "claim of " + c.Host + " unreadable"
	default:
		// A node's heartbeat goes stale, or fresh again (fail static keeps lists whose
		// every upstream is stale).
		n := &st.Nodes[r.IntN(len(st.Nodes))]
		if n.Seen.Equal(fe.opt.Now) {
			n.Seen = fe.opt.Now.Add(-2 * fe.opt.NodeTTL)
			return n.Name + " stale"
		}
		n.Seen = fe.opt.Now
		return n.Name + " fresh"
	}
}

// docGen builds valid routing documents that Derive would never write but a document
// may hold (the render's input is any valid document): applications named like the
// render's own services (api, deny) or the unowned holder, a prefix targeting its own
// host or a host of another group, a wildcard covering an API apex, several apexes,
// upstream lists in any order. Each step changes one thing, so fragments are reused
// across documents as in a node.
type docGen struct {
	rng   *rand.Rand
	defs  map[string]docApp
	roles map[string]int // host → 0 absent, 1 API apex, 2 route
	owner map[string]string
	paths map[string]map[string]string
}

type docApp struct {
	ups    []routing.Upstream
	health string
	group  string
}

var (
	docHosts = []string{"a.example.org", "b.example.org", "*.example.org", "c.d.example.org", "*.d.example.org",
		"apps.example.com", "eu.example.com", "*.example.com", "x.apps.example.com", "ti.to", "*.ti.to", "go.ti.to"}
	docApps  = []string{"shop", "blog", "api", routing.UnownedApplication, "deny"}
	docNodes = []string{"n1", "n2", "n3"}
)

func newDocGen(seed uint64) *docGen {
	g := &docGen{rng: rand.New(rand.NewPCG(seed, 5)), defs: map[string]docApp{}, roles: map[string]int{},
		owner: map[string]string{}, paths: map[string]map[string]string{}}
	for _, a := range docApps {
		g.app(a)
	}
	for _, h := range docHosts {
		g.host(h)
	}
	return g
}

func (g *docGen) app(a string) {
	var d docApp
	for j, n := range docNodes {
		if g.rng.IntN(2) == 0 {
			d.ups = append(d.ups, routing.Upstream{Node: n, Address: fmt.Sprintf("10.0.0.%d:%d", j+1, 2000+g.rng.IntN(3)), APIPort: 7400})
		}
	}
	g.rng.Shuffle(len(d.ups), func(x, y int) { d.ups[x], d.ups[y] = d.ups[y], d.ups[x] })
	if d.ups == nil {
		d.ups = []routing.Upstream{}
	}
	if g.rng.IntN(3) == 0 {
		d.health = "/h"
	}
	if g.rng.IntN(2) == 0 {
		d.group = "eu-1"
	}
	g.defs[a] = d
}

func (g *docGen) host(h string) {
	g.roles[h] = g.rng.IntN(3)
	if routing.IsWildcard(h) && g.roles[h] == 1 {
		g.roles[h] = 2
	}
	g.owner[h] = docApps[g.rng.IntN(len(docApps))]
	g.paths[h] = nil
	if g.rng.IntN(2) == 0 {
		g.paths[h] = map[string]string{}
		for k := range 1 + g.rng.IntN(4) {
			if t := docHosts[g.rng.IntN(len(docHosts))]; !routing.IsWildcard(t) {
				g.paths[h][fmt.Sprintf("p%d", k)] = t
			}
		}
	}
}

// step changes one application or one host.
func (g *docGen) step() {
	if g.rng.IntN(2) == 0 {
		g.app(docApps[g.rng.IntN(len(docApps))])
	} else {
		g.host(docHosts[g.rng.IntN(len(docHosts))])
	}
}

// doc is the current document, or nil when it is not valid.
func (g *docGen) doc() *routing.Document {
	doc := &routing.Document{V: routing.Version, Routes: []routing.Route{}}
	var apexes []string
	for _, h := range docHosts {
		switch g.roles[h] {
		case 1:
			apexes = append(apexes, h)
		case 2:
			d := g.defs[g.owner[h]]
			doc.Routes = append(doc.Routes, routing.Route{Host: h, Application: g.owner[h], Upstreams: d.ups, HealthPath: d.health, Group: d.group, Paths: g.paths[h]})
		}
	}
	slices.SortFunc(doc.Routes, func(a, b routing.Route) int { return strings.Compare(a.Host, b.Host) })
	for i := range doc.Routes {
		// Prefixes to hosts that are no route are left out (the document's rule).
		var kept map[string]string
		for p, t := range doc.Routes[i].Paths {
			if g.roles[t] == 2 {
				if kept == nil {
					kept = map[string]string{}
				}
				kept[p] = t
			}
		}
		doc.Routes[i].Paths = kept
	}
	if len(apexes) > 0 {
		slices.Sort(apexes)
		doc.API = &routing.API{Hosts: apexes, Upstreams: g.defs["api"].ups, Denied: slices.Clone(routing.DeniedAPIPrefixes)}
	}
	doc.Seal()
	if doc.Validate() != nil {
		return nil
	}
	return doc
}

// deltaEdit applies one random edit to st as the store would: every object it changes
// is a new value (the Deriver keeps the old ones), and it returns the keys changed.
// Most edits move upstreams or health paths (what a delta render serves); the rest
// force full renders in between (claims, new applications, fleet certificates).
func deltaEdit(r *rand.Rand, st *fleet.State, n int) []string {
	st.Apps, st.Nodes, st.Claims = slices.Clone(st.Apps), slices.Clone(st.Nodes), slices.Clone(st.Claims)
	app := &st.Apps[r.IntN(len(st.Apps))]
	node := &st.Nodes[r.IntN(len(st.Nodes))]
	switch k := r.IntN(20); {
	case k < 8: // an instance's port (same length, or not), a second one in the same write
		node.Instances = maps.Clone(node.Instances)
		if in, ok := node.Instances[app.Name]; ok {
			in.Port = 1 + r.IntN(65535)
			node.Instances[app.Name] = in
		}
		if r.IntN(4) == 0 {
			b := st.Apps[r.IntN(len(st.Apps))].Name
			if in, ok := node.Instances[b]; ok {
				in.Port = 20000 + r.IntN(1000)
				node.Instances[b] = in
			}
		}
		return []string{fleet.NodeKey(node.Name)}
	case k < 10: // readiness: the upstream count moves (a full render when it renames)
		node.Instances = maps.Clone(node.Instances)
		if in, ok := node.Instances[app.Name]; ok {
			in.Ready = !in.Ready
			node.Instances[app.Name] = in
		}
		return []string{fleet.NodeKey(node.Name)}
	case k < 13: // placement order: the primary moves
		app.Placement = slices.Clone(app.Placement)
		slices.Reverse(app.Placement)
		return []string{fleet.AppKey(app.Name)}
	case k < 16: // health path
		if app.Health == nil || r.IntN(3) == 0 {
			app.Health = &fleet.Health{Path: fmt.Sprintf("/h%d", r.IntN(4))}
		} else {
			app.Health = nil
		}
		return []string{fleet.AppKey(app.Name)}
	case k < 17: // a prefix of ti.to flips target
		for i := range st.Claims {
			if c := &st.Claims[i]; c.Host == "ti.to" {
				c.Paths = maps.Clone(c.Paths)
				c.Paths[fmt.Sprintf("p%05d", r.IntN(len(c.Paths)+1))] = fmt.Sprintf("app-%05d.apps.example.com", 100*r.IntN(len(st.Apps)/100+1))
				return []string{fleet.ClaimKey(c.Host)}
			}
		}
		return []string{}
	case k < 18: // an application joins
		name := fmt.Sprintf("zz-%d", n)
		st.Apps = append(st.Apps, fleet.App{Name: name, Account: "acct-001", Placement: []string{node.Name}})
		node.Instances = maps.Clone(node.Instances)
		node.Instances[name] = fleet.Instance{Port: 31000 + n, Ready: true}
		return []string{fleet.AppKey(name), fleet.NodeKey(node.Name)}
	default: // nothing changed that the caller knows of
		return nil
	}
}

// hostileDelta makes a document from base as a delta would describe it, but with what
// the Deriver never sends and a caller could: upstream lists of any length (none: the
// deny service; one; several: chains renamed, the automatic interval moved), upstreams
// without API port or with no address, bad health paths, middlewares changed (good and bad references),
// several applications at once (path-map targets among them), and sometimes only some
// of an application's routes named.
func hostileDelta(r *rand.Rand, base *routing.Document) (*routing.Document, *routing.Delta) {
	doc := &routing.Document{V: base.V, Routes: slices.Clone(base.Routes), API: base.API}
	apps := map[string]bool{}
	for range 1 + r.IntN(3) {
		var name string
		if r.IntN(3) == 0 { // a path-map target of ti.to, or ti.to's own application
			name = fmt.Sprintf("app-%05d", 100*r.IntN(3))
		} else {
			name = base.Routes[r.IntN(len(base.Routes))].Application
		}
		apps[name] = true
	}
	nodes := []string{"vps-a", "vps-b", "vps-c", "vps-d"}
	var changed []int
	mwChanged := false
	for app := range apps {
		var ups []routing.Upstream
		for _, j := range r.Perm(len(nodes))[:r.IntN(4)] {
			u := routing.Upstream{Node: nodes[j], Address: fmt.Sprintf("10.83.0.%d:%d", j+1, 20000+r.IntN(30)), APIPort: 7400}
			switch r.IntN(40) {
			case 0:
				u.APIPort = 0
			case 1:
				u.Address = "nowhere" // no address: refused
			}
			ups = append(ups, u)
		}
		if ups == nil {
			ups = []routing.Upstream{}
		}
		health := []string{"", "", "/healthz", "/h1", "bad"}[r.IntN(5)]
		if health == "bad" && r.IntN(4) != 0 {
			health = "/h2"
		}
		// Middlewares change in one change of four, and such a change comes without a
		// delta half the time, as the Deriver sends it (it derives the whole state): the
		// application's own routers, and the path routers of other applications'
		// hosts that select it, carry them, so every fragment that names it must be
		// rendered again. A bad reference now and then: the error is the full
		// render's. The later deltas patch documents that carry middlewares.
		mwChange := r.IntN(4) == 0
		mw := [][]string{nil, {"auth@file"}, {"auth@file", "www-redirect@file"}, {"www-redirect@file", "auth@file"}, {"auth"}}[r.IntN(5)]
		if len(mw) == 1 && mw[0] == "auth" && r.IntN(4) != 0 {
			mw = []string{"ratelimit@docker"}
		}
		for i := range doc.Routes {
			if doc.Routes[i].Application != app || app == routing.UnownedApplication {
				continue
			}
			if r.IntN(30) == 0 {
				continue // not named: the application's routes disagree, or do not
			}
			doc.Routes[i].Upstreams, doc.Routes[i].HealthPath = ups, health
			if mwChange {
				doc.Routes[i].Middlewares = mw
				mwChanged = true
			}
			changed = append(changed, i)
		}
	}
	slices.Sort(changed)
	doc.Seal()
	if mwChanged && r.IntN(2) == 0 {
		return doc, nil // as the Deriver sends it; else a delta the render must not patch
	}
	return doc, &routing.Delta{Base: base, Changed: changed}
}
