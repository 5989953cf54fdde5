package render

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

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

// fleetCertsWith returns a copy of fc (nil: a new set on entry points eps) where name is
// a fleet-issued name, with a certificate when cert is set (a new one each call: a
// renewal), without one (issuance pending) otherwise. The PEM stand-in has newlines and
// quotes, which the encoder escapes.
func fleetCertsWith(fc *FleetCerts, name string, cert bool, serial int) *FleetCerts {
	out := fleetCertsWithout(fc, name)
	out.Managed[name] = true
	if cert {
		out.Certificates = append(out.Certificates, Certificate{Names: []string{name},
			CertFile: fmt.Sprintf("-----BEGIN CERTIFICATE-----\n%s \"%d\"\n-----END CERTIFICATE-----\n", name, serial),
			KeyFile:  fmt.Sprintf("-----BEGIN EC PRIVATE KEY-----\n%s %d\n-----END EC PRIVATE KEY-----\n", name, serial)})
	}
	return out
}

// fleetCertsWithout returns a copy of fc without name (neither managed nor certified).
func fleetCertsWithout(fc *FleetCerts, name string) *FleetCerts {
	out := &FleetCerts{Managed: map[string]bool{}}
	if fc != nil {
		out.HTTPEntryPoints = fc.HTTPEntryPoints
		for n := range fc.Managed {
			out.Managed[n] = true
		}
		for _, c := range fc.Certificates {
			if !slices.Contains(c.Names, name) {
				out.Certificates = append(out.Certificates, c)
			}
		}
	}
	delete(out.Managed, name)
	return out
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
	if !fe.coverApex || len(d.Routes) == 0 {
		return d
	}
	rt := d.Routes[len(d.Routes)/2]
	rt.Host, rt.Paths = "*.example.com", nil
	d.Routes = append(d.Routes, rt)
	slices.SortFunc(d.Routes, func(a, b routing.Route) int { return strings.Compare(a.Host, b.Host) })
	d.Seal()
	return d
}

func newFleetEditor(seed uint64, apps, prefixes int) *fleetEditor {
	return &fleetEditor{rng: rand.New(rand.NewPCG(seed, 17)), st: fleet.GenerateState(apps, prefixes), opt: fleet.GenerateOptions()}
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

// TestIncrementalRenderEqualsFullRender holds the fragment render to the full render's
// bytes over generated fleets and random edits, at every step, for several render
// options and for every ?prefer= the node would serve (so fragments of every variant
// are live at once, as in a node). A quarter of the edits change the fleet
// certificates (switched on and off, names issued, renewed, pending, dropped): the
// reference is then TraefikFleet.
func TestIncrementalRenderEqualsFullRender(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: runs beside the other long render tests
	optsList := []Options{
		{},
		{PathGroupThreshold: 3},
		{CertResolver: "le", PlatformWildcardCerts: true, PlatformDomains: []string{"apps.example.com"},
			HealthCheckInterval: "7s", EntryPoints: []string{"web", "websecure"}},
	}
	steps := 150
	if testing.Short() {
		steps = 40
	}
	for oi, opt := range optsList {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("opt%d/seed%d", oi, seed), func(t *testing.T) {
				fe := newFleetEditor(seed+uint64(oi)*10, 250, 300)
				inc, err := NewIncremental(opt)
				if err != nil {
					t.Fatal(err)
				}
				what := "initial"
				withCerts := 0 // renders whose output carries tls.certificates
				for step := range steps {
					doc := fe.doc()
					for _, prefer := range []string{"", "vps-b", "vps-c"} {
						d, err := routing.Prefer(doc, prefer)
						if err != nil {
							t.Fatal(err)
						}
						want, werr := TraefikFleet(d, opt, fe.fc)
						// Odd seeds render every prefer as one output (its order merges
						// with another prefer's), even seeds as one output each, as the
						// node does.
						output := ""
						if seed%2 == 0 {
							output = prefer
						}
						got, gerr := rendered(inc, Request{Doc: d, Output: output, Certs: fe.fc})
						if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
							t.Fatalf("step %d (%s), prefer %q: errors differ: full %v, incremental %v", step, what, prefer, werr, gerr)
						}
						if bytes.Contains(want, []byte(`"tls":{"certificates":[`)) {
							withCerts++
						}
						if !bytes.Equal(got, want) {
							t.Fatalf("step %d (%s), prefer %q: incremental render differs from the full render at byte %d\nfull: %s\nincr: %s",
								step, what, prefer, firstDiff(got, want), excerpt(want, firstDiff(got, want)), excerpt(got, firstDiff(got, want)))
						}
					}
					what = fe.edit()
				}
				if withCerts == 0 {
					t.Error("no step rendered fleet certificates")
				}
				// The cache holds the variants of the recent passes, not the history.
				if n, limit := inc.cached(), keepPasses*(len(fe.st.Apps)+len(fe.st.Claims))+keepPasses; n > limit {
					t.Errorf("%d fragments cached after %d steps, bound %d", n, steps, limit)
				}
			})
		}
	}
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func excerpt(b []byte, at int) string {
	lo, hi := max(at-120, 0), min(at+120, len(b))
	return string(b[lo:hi])
}

// TestIncrementalRenderReusesUnchangedFragments pins what makes the render incremental:
// a change to one application renders one fragment again, and reuses every other.
func TestIncrementalRenderReusesUnchangedFragments(t *testing.T) {
	st := fleet.GenerateState(200, 100)
	opt := fleet.GenerateOptions()
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := fleet.Derive(st, opt)
	if _, err := rendered(inc, Request{Doc: doc}); err != nil {
		t.Fatal(err)
	}
	before := inc.cached()
	if before < 200 {
		t.Fatalf("%d fragments cached for 200 applications", before)
	}
	st.Nodes[1].Instances["app-00004"] = fleet.Instance{Port: 12345, Ready: true}
	doc, _ = fleet.Derive(st, opt)
	got, err := rendered(inc, Request{Doc: doc})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Traefik(doc, Options{}); !bytes.Equal(got, want) {
		t.Fatal("incremental render differs from the full render")
	}
	if after := inc.cached(); after != before+1 {
		t.Errorf("one application changed: %d fragments cached before, %d after (want one more: the new variant)", before, after)
	}
}

// TestIncrementalRenderRefusesWhatTheFullRenderRefuses: the same errors, and a refused
// document leaves the next render's bytes right.
func TestIncrementalRenderRefusesWhatTheFullRenderRefuses(t *testing.T) {
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rendered(inc, Request{}); err == nil {
		t.Error("nil document accepted")
	}
	up := []routing.Upstream{{Node: "n1", Address: "10.0.0.1:1"}} // no APIPort, no health path
	bad := &routing.Document{V: 1, Routes: []routing.Route{{Host: "a.example.com", Application: "a", Upstreams: up}}}
	unsorted := &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "b.example.com", Application: "b", Upstreams: []routing.Upstream{}},
		{Host: "a.example.com", Application: "a", Upstreams: []routing.Upstream{}, Paths: map[string]string{"x": "nowhere.example.com"}}}}
	for _, d := range []*routing.Document{bad, unsorted} {
		_, werr := Traefik(d, Options{})
		_, gerr := rendered(inc, Request{Doc: d})
		if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
			t.Errorf("full render: %v; incremental: %v", werr, gerr)
		}
	}
	if _, err := NewIncremental(Options{EntryPoints: []string{"a@b"}}); err == nil {
		t.Error("invalid options accepted")
	}
	good, _ := fleet.Derive(fleet.GenerateState(20, 10), fleet.GenerateOptions())
	want, _ := Traefik(good, Options{})
	if got, err := rendered(inc, Request{Doc: good}); err != nil || !bytes.Equal(got, want) {
		t.Errorf("after refusals: %v, equal %v", err, bytes.Equal(got, want))
	}
}

// TestAutomaticIntervalStepRendersNoFragmentAgain: the automatic health-check interval
// depends on the number of checks in the whole output, so one application gaining or
// losing an upstream can move every check's interval (here 5s ↔ 6s around 1 000 checked
// leaves). The bytes still equal the full render's, and only that application's
// fragment is rendered again: the others carry a placeholder the assembler fills.
func TestAutomaticIntervalStepRendersNoFragmentAgain(t *testing.T) {
	st := fleet.GenerateState(1000, 0) // 1 000 two-upstream applications + 2 API leaves
	opt := fleet.GenerateOptions()
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := func() []byte {
		t.Helper()
		doc, _ := fleet.Derive(st, opt)
		want, err := Traefik(doc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := rendered(inc, Request{Doc: doc})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("incremental render differs from the full render at byte %d", firstDiff(got, want))
		}
		return got
	}
	first := render()
	if !bytes.Contains(first, []byte(`"interval":"6s"`)) {
		t.Fatal("1 002 checked leaves: want the 6s interval")
	}
	before := inc.cached()
	// Three applications lose their second upstream: 999 checked leaves, 5s.
	for _, a := range []string{"app-00001", "app-00002", "app-00003"} {
		for i := range st.Nodes {
			if inst, ok := st.Nodes[i].Instances[a]; ok && st.Nodes[i].Name != "vps-b" {
				inst.Ready = false
				st.Nodes[i].Instances[a] = inst
			}
		}
	}
	second := render()
	if !bytes.Contains(second, []byte(`"interval":"5s"`)) || bytes.Contains(second, []byte(`"interval":"6s"`)) {
		t.Fatal("999 checked leaves: want every check at 5s")
	}
	if n := inc.cached() - before; n > 3 {
		t.Errorf("the interval step rendered %d fragments again, want only the 3 changed applications", n)
	}
}

// TestIncrementalCacheKeepsOnlyRecentVariants pins the cache bound on both sweep paths:
// an application whose port moves every pass keeps exactly the variants of the last
// keepPasses renders (every slot used: only the slots holding several variants are
// swept), and an application that leaves the fleet is dropped keepPasses renders later
// (a slot unused: the whole cache is swept).
func TestIncrementalCacheKeepsOnlyRecentVariants(t *testing.T) {
	st := fleet.GenerateState(50, 20)
	opt := fleet.GenerateOptions()
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := func() {
		t.Helper()
		doc, _ := fleet.Derive(st, opt)
		got, err := rendered(inc, Request{Doc: doc})
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := Traefik(doc, Options{}); !bytes.Equal(got, want) {
			t.Fatal("incremental render differs from the full render")
		}
	}
	render()
	base := inc.cached()
	for pass := 1; pass <= 3*keepPasses; pass++ {
		st.Nodes[1].Instances["app-00004"] = fleet.Instance{Port: 30000 + pass, Ready: true}
		render()
		// The first render (pass 0) and each edited pass left a variant; the sweep
		// keeps those of the last keepPasses renders.
		if got, want := inc.cached()-base, min(pass, keepPasses-1); got != want {
			t.Fatalf("pass %d: %d variants beyond one per fragment, want %d", pass, got, want)
		}
	}
	// app-00007 leaves the fleet (its instances too).
	i := slices.IndexFunc(st.Apps, func(a fleet.App) bool { return a.Name == "app-00007" })
	st.Apps = slices.Delete(st.Apps, i, i+1)
	for pass := 1; pass <= keepPasses+1; pass++ {
		render()
		inc.mu.Lock()
		_, held := inc.apps["app-00007"]
		inc.mu.Unlock()
		if want := pass < keepPasses; held != want {
			t.Fatalf("pass %d after removal: slot held %v, want %v", pass, held, want)
		}
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

// TestIncrementalRenderRefusesCorruptDocuments: the incremental render validates only
// the applications whose fragments it renders again (a reused fragment's inputs were
// those of a valid document) plus what relates routes to each other. A document with
// one defect, rendered by an Incremental whose cache holds every fragment of the valid
// one, is refused with the full render's error, for all outputs, and the next valid
// document still renders the full render's bytes.
func TestIncrementalRenderRefusesCorruptDocuments(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: runs beside the other long render tests
	fe := newFleetEditor(7, 200, 300)
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 18))
	refused := 0
	for step := range 400 {
		doc := fe.doc()
		for _, sel := range [][]string{nil, {routing.DefaultGroup}} {
			// The group output is what the node renders for ?group=default (a corrupt
			// group value is filtered there as the node would filter it).
			if _, _, err := compareRenders(t, fmt.Sprintf("step %d, groups %v, valid document", step, sel), inc, Options{}, doc, sel, "", nil); err != nil {
				t.Fatalf("step %d: a valid document is refused: %v", step, err)
			}
			bad, what := corruptDoc(r, doc)
			if _, _, err := compareRenders(t, fmt.Sprintf("step %d (%s), groups %v", step, what, sel), inc, Options{}, bad, sel, "", nil); err != nil {
				refused++
			}
		}
		fe.edit()
	}
	if refused < 400 {
		t.Errorf("only %d of 800 corrupt renders were refused: the corruptions are too weak to test anything", refused)
	}
}

// rendered is inc.Render(req) in one slice, as the full render returns it.
func rendered(inc *Incremental, req Request) ([]byte, error) {
	b, err := inc.Render(req)
	if err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
