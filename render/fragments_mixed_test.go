package render

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

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

// TestIncrementalRenderEqualsFullRenderForEveryOutputOfANode extends
// TestIncrementalRenderEqualsFullRender to what a node serves from its one Incremental:
// the whole fleet and group selections (alone and combined), each with several
// ?prefer= orders, interleaved pass after pass, over a grouped fleet edited at random
// with fleetEditor's edits and those it never makes (editMixed: group moves, wildcard
// path maps, cross-group prefixes, unreadable claims, stale nodes). Every output must be
// byte-identical to the package-level render of the same input at every step.
func TestIncrementalRenderEqualsFullRenderForEveryOutputOfANode(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: runs beside the other long render tests
	optsList := []Options{
		{},
		{PathGroupThreshold: 1, HealthCheckInterval: "3s"},
		{CertResolver: "le", PlatformWildcardCerts: true, PlatformDomains: []string{"apps.example.com", "eu1.example.com"}},
	}
	selections := [][]string{nil, {"default"}, {"eu-1"}, {"eu-1", "us-1"}, {"eu-2", "default"}}
	steps := 80
	if testing.Short() {
		steps = 25
	}
	for oi, opt := range optsList {
		for seed := range uint64(2) {
			t.Run(fmt.Sprintf("opt%d/seed%d", oi, seed), func(t *testing.T) {
				st, fopt := groupedState(160, 120)
				fe := &fleetEditor{rng: rand.New(rand.NewPCG(seed, uint64(oi)+41)), st: st, opt: fopt}
				inc, err := NewIncremental(opt)
				if err != nil {
					t.Fatal(err)
				}
				what := "initial"
				// What the edits must have produced at least once, or the test proves
				// nothing about them.
				seen := map[string]bool{}
				marks := map[string]string{
					"unowned host":      `"app-scafo-unowned"`,
					"apex deny router":  `"deny-`,
					"fleet certificate": `"tls":{"certificates":[`,
				}
				for step := range steps {
					doc := fe.doc()
					for _, sel := range selections {
						for _, prefer := range []string{"", "vps-b", "vps-c"} {
							at := fmt.Sprintf("step %d (%s), groups %v, prefer %q", step, what, sel, prefer)
							d, want, werr := compareRenders(t, at, inc, opt, doc, sel, prefer, fe.fc)
							if werr != nil {
								t.Fatalf("%s: a derived document does not render: %v", at, werr)
							}
							for k, m := range marks {
								if bytes.Contains(want, []byte(m)) {
									seen[k] = true
								}
							}
							if bytes.Contains(want, []byte(`"path-~2a`)) || bytes.Contains(want, []byte(`"paths-~2a`)) {
								seen["wildcard path router"] = true
							}
							if sel != nil && bytes.Contains(want, []byte(`"app-`)) && len(d.Routes) > 0 {
								for _, rt := range d.Routes {
									if !slices.Contains(sel, rt.GroupOf()) {
										seen["cross-group target"] = true
									}
								}
							}
						}
					}
					if fe.rng.IntN(2) == 0 {
						what = fe.editMixed()
					} else {
						what = fe.edit()
					}
				}
				for _, k := range []string{"wildcard path router", "unowned host", "apex deny router", "fleet certificate", "cross-group target"} {
					if !seen[k] {
						t.Errorf("no output rendered a %s: the edits did not reach it", k)
					}
				}
			})
		}
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

// TestIncrementalRenderEqualsFullRenderOnAnyValidDocument: the fragment render's
// equality with the full render rests on the document's rules, not on what Derive
// happens to write: over a sequence of random valid documents (docGen), each one
// change from the last, rendered in turn through one Incremental as every output a node serves, each
// output equals the package-level render's bytes.
func TestIncrementalRenderEqualsFullRenderOnAnyValidDocument(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 100
	}
	for oi, opt := range []Options{{}, {PathGroupThreshold: 1, CertResolver: "le", PlatformWildcardCerts: true, PlatformDomains: []string{"apps.example.com"}}} {
		gen := newDocGen(uint64(oi))
		inc, err := NewIncremental(opt)
		if err != nil {
			t.Fatal(err)
		}
		fc := fleetCertsWith(nil, "a.example.org", true, 1)
		rendered := 0
		for i := range n {
			gen.step()
			doc := gen.doc()
			if doc == nil {
				continue
			}
			rendered++
			var certs *FleetCerts
			if i%3 == 0 {
				certs = fc
			}
			for _, sel := range [][]string{nil, {"default"}, {"eu-1"}} {
				for _, prefer := range []string{"", "n2", "n3"} {
					compareRenders(t, fmt.Sprintf("opt %d, document %d, groups %v, prefer %q", oi, i, sel, prefer), inc, opt, doc, sel, prefer, certs)
				}
			}
		}
		if rendered < n/2 {
			t.Fatalf("only %d of %d random documents were valid", rendered, n)
		}
	}
}

// compareRenders renders doc as a node serves it for the group selection sel (nil:
// every group) and prefer, through the full render (TraefikFleet or TraefikGroups) and
// through inc (one output per selection and prefer), and fails t, naming at, when the
// errors or the bytes differ. It returns the document rendered, the full render's bytes
// and its error.
func compareRenders(t *testing.T, at string, inc *Incremental, opt Options, doc *routing.Document, sel []string, prefer string, fc *FleetCerts) (*routing.Document, []byte, error) {
	t.Helper()
	if sel != nil {
		doc = routing.ForGroups(doc, sel)
	}
	d, err := routing.Prefer(doc, prefer)
	if err != nil {
		t.Fatal(err)
	}
	var want, got []byte
	var werr, gerr error
	if sel == nil {
		want, werr = TraefikFleet(d, opt, fc)
		got, gerr = rendered(inc, Request{Doc: d, Output: prefer, Certs: fc})
	} else {
		want, werr = TraefikGroups(d, opt, sel, fc)
		got, gerr = rendered(inc, Request{Doc: d, Output: fmt.Sprint(prefer, "|", sel), Groups: sel, Certs: fc})
	}
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("%s: errors differ: full %v, incremental %v", at, werr, gerr)
	}
	if !bytes.Equal(got, want) {
		i := firstDiff(got, want)
		t.Fatalf("%s: incremental render differs from the full render at byte %d\nfull: %s\nincr: %s", at, i, excerpt(want, i), excerpt(got, i))
	}
	return d, want, werr
}
