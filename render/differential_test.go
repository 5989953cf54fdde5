package render

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

var diffSeed = flag.Int("diffseed", -1, "TestIncrementalRenderEqualsFullRender: run this seed alone (a failure prints its seed)")

// TestIncrementalRenderEqualsFullRender is the render's differential test: every body
// and every error of an Incremental (fragments, merges with an output's last order,
// delta patches, the last body served again, the whole render of a passthrough
// document) is the package-level render's (TraefikFleet, TraefikGroups) of the same
// input, byte for byte. Each seed draws render Options and a source of documents:
//
//   - fleet: a grouped generated fleet derived by fleet.Deriver (so most one-object
//     changes come as a routing.Delta) and edited at random: instances move, become
//     ready or not, placements reorder, health paths, applications come and go, move
//     group, turn passthrough, get operator middlewares, claims and path maps (wildcard
//     and cross-group ones), unreadable claims, stale nodes, the API apex claimed,
//     released or covered by a wildcard, nodes join;
//   - hostile deltas: deltas the Deriver would not send (hostileDelta: upstream lists of
//     any length, refused upstreams and health paths, middlewares, several applications,
//     some of an application's routes only), each from the last document that rendered;
//   - any document: random valid documents Derive never writes (docGen), corrupt
//     documents (corruptDoc) and hostile tenants' fleets (hostileState), no delta;
//   - concurrent: the fleet source published step by step by one goroutine while three
//     render any output of any published document, mostly the newest, as a node's
//     long-polls do.
//
// Every step renders the outputs a node serves from its one Incremental, in random
// order and some skipped: the whole fleet and group selections (alone and combined),
// each with ?prefer= orders; a selection's document is patched with
// routing.ForGroupsDelta from its last one, as node/publish does, and its revision must
// be routing.ForGroups'. Fleet certificates come, go, are issued, renewed and dropped.
// Some seeds render every output under one name (its order merges with another
// selection's or prefer's, and no delta may build on another's body). At the end the test fails if the seeds did not reach the paths
// they are meant to (delta renders of each output kind, refusals, passthrough, ...).
//
// A failure names its seed; go test ./render -run TestIncrementalRenderEqualsFullRender
// -diffseed=N replays it alone.
func TestIncrementalRenderEqualsFullRender(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained
	seeds, steps := 32, 30
	if testing.Short() {
		seeds, steps = 12, 20
	}
	cov := &diffCoverage{marks: map[string]bool{}}
	if *diffSeed >= 0 {
		seeds = 1
	}
	t.Run("seeds", func(t *testing.T) { // returns when every seed has run
		for i := range seeds {
			seed := uint64(i)
			if *diffSeed >= 0 {
				seed = uint64(*diffSeed)
			}
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
				t.Parallel() // the seeds share nothing but the coverage counts
				c := newDiffCase(t, seed, cov)
				if c.kind == diffConcurrent {
					c.runConcurrent(steps)
				} else {
					c.run(steps)
				}
				if t.Failed() {
					t.Logf("replay: go test ./render -run TestIncrementalRenderEqualsFullRender -diffseed=%d", seed)
				}
			})
		}
	})
	if *diffSeed >= 0 || t.Failed() {
		return
	}
	// What the seeds must have reached, or the test proves nothing about it.
	for what, n := range map[string]int64{
		"delta render of the whole fleet": cov.patched.Load(), "delta render of a ?prefer= output": cov.preferPatched.Load(),
		"delta render of a ?group= output": cov.groupPatched.Load(), "refused document": cov.refused.Load(),
		"concurrent render": cov.concurrent.Load(), "last body served again": cov.same.Load(),
	} {
		if n < 10 {
			t.Errorf("%d renders were a %s: the seeds do not exercise it", n, what)
		}
	}
	for _, m := range diffMarks {
		if !cov.marks[m[0]] {
			t.Errorf("no output rendered a %s: the seeds do not reach it", m[0])
		}
	}
	t.Logf("%d renders: %d patched (%d prefer, %d group), %d refused, %d concurrent, %d last bodies", cov.renders.Load(),
		cov.patched.Load(), cov.preferPatched.Load(), cov.groupPatched.Load(), cov.refused.Load(), cov.concurrent.Load(), cov.same.Load())
}

// diffMarks are what the full renders must have held at least once: a name and a
// substring of the body.
var diffMarks = [][2]string{
	{"host without holder", `"app-scafo-unowned"`}, {"apex deny router", `"deny-`}, {"fleet certificate", `"tls":{"certificates":[`},
	{"wildcard path router", `"path-~2a`}, {"grouped path router", `"paths-`}, {"passthrough TCP router", `"tcp":{"routers"`},
	{"operator middleware", `@file"`}, {"automatic interval", `"interval":"5s"`}, {"fixed interval", `"interval":"7s"`},
}

type diffCoverage struct {
	renders, patched, preferPatched, groupPatched, refused, concurrent, same atomic.Int64
	mu                                                                       sync.Mutex
	marks                                                                    map[string]bool
}

func (c *diffCoverage) saw(body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range diffMarks {
		if !c.marks[m[0]] && bytes.Contains(body, []byte(m[1])) {
			c.marks[m[0]] = true
		}
	}
}

const (
	diffFleet = iota
	diffHostile
	diffAnyDocument
	diffConcurrent
)

var diffKinds = []string{"fleet", "hostile deltas", "any document", "concurrent"}

// diffOptions are the render options a seed draws from.
var diffOptions = []Options{
	{},
	{PathGroupThreshold: 1, HealthCheckInterval: "7s"},
	{PathGroupThreshold: 3, RetryAttempts: 1},
	{CertResolver: "le", PlatformWildcardCerts: true, PlatformDomains: []string{"apps.example.com", "eu1.example.com"},
		HealthCheckInterval: "7s", EntryPoints: []string{"web", "websecure"}},
}

// diffOutput is one output a node serves: a group selection (nil: every route) and a
// ?prefer= node.
type diffOutput struct {
	sel    []string
	prefer string
}

type diffLineage struct {
	base, doc *routing.Document
	blocks    routing.Blocks
}

// diffStep is one document to render and how it was made.
type diffStep struct {
	doc   *routing.Document
	delta *routing.Delta
	fc    *FleetCerts
	what  string
	// sels are the selections' documents and deltas (concurrent runs: made when
	// published, as node/publish makes them once per snapshot).
	sels map[string][2]any
}

type diffCase struct {
	t       *testing.T
	seed    uint64
	kind    int
	r       *rand.Rand
	opt     Options
	inc     *Incremental
	outs    []diffOutput
	shared  bool // every output renders under one name
	lineage map[string]diffLineage
	cov     *diffCoverage

	fe   *fleetEditor      // fleet, concurrent
	x    fleet.Deriver     // fleet, concurrent
	good *routing.Document // hostile, any document: the last document that rendered
	gen  *docGen           // any document
	fc   *FleetCerts       // hostile, any document
	last *routing.Document // the last document made
	body Body              // the last body rendered (not concurrent)
}

func newDiffCase(t *testing.T, seed uint64, cov *diffCoverage) *diffCase {
	r := rand.New(rand.NewPCG(seed, 0xd1ff))
	c := &diffCase{t: t, seed: seed, kind: int(seed % 4), r: r, opt: diffOptions[r.IntN(len(diffOptions))], lineage: map[string]diffLineage{},
		cov: cov, shared: r.IntN(4) == 0}
	var err error
	if c.inc, err = NewIncremental(c.opt); err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %s, options %+v, shared outputs %v", seed, diffKinds[c.kind], c.opt, c.shared)
	switch c.kind {
	case diffFleet, diffConcurrent:
		st, fopt := groupedState(30+r.IntN(90), 20+r.IntN(60))
		c.fe = &fleetEditor{rng: rand.New(rand.NewPCG(seed, 41)), st: st, opt: fopt}
		for _, sel := range [][]string{nil, {"default"}, {"eu-1", "us-1"}, {"eu-2", "default"}} {
			for _, p := range []string{"", "vps-b"} {
				c.outs = append(c.outs, diffOutput{sel, p})
			}
		}
	case diffHostile:
		st, fopt := fleet.GenerateState(101+r.IntN(100), 40), fleet.GenerateOptions()
		fleet.GenerateGroup(&st, &fopt, "eu", "eu.example.com", func(i int) bool {
			return i%7 == 3 || (i%100 == 0 && i > 0) // app-00100, app-00200: ti.to's targets in eu
		})
		for i := range st.Claims {
			if cl := &st.Claims[i]; cl.Host == "ti.to" { // app-00000's (default): prefixes into eu
				for k := range 30 {
					cl.Paths[fmt.Sprintf("eu%05d", k)] = fmt.Sprintf("app-%05d.eu.example.com", 100*(1+k%2))
				}
			}
		}
		c.good, _ = fleet.Derive(st, fopt)
		c.outs = []diffOutput{{nil, ""}, {nil, "vps-b"}, {nil, "vps-d"}, {[]string{"eu"}, ""}, {[]string{"eu"}, "vps-a"},
			{[]string{"default"}, "vps-c"}, {[]string{"default", "eu"}, "vps-b"}}
	default:
		c.gen = newDocGen(seed)
		for _, sel := range [][]string{nil, {"default"}, {"eu-1"}} {
			for _, p := range []string{"", "n2", "n3"} {
				c.outs = append(c.outs, diffOutput{sel, p})
			}
		}
	}
	return c
}

// next makes the step's document; ok says whether the last one rendered.
func (c *diffCase) next(step int, ok bool) diffStep {
	r := c.r
	switch c.kind {
	case diffFleet, diffConcurrent:
		fe := c.fe
		var changed []string
		what := "initial"
		if step > 0 && c.last != nil && r.IntN(10) == 0 {
			// The certificates change, the document does not (node/publish's
			// PublishCerts): the very document again, with other certificates.
			what = fe.editFleetCerts()
			return diffStep{doc: c.last, fc: fe.fc, what: "same document, " + what}
		}
		if step > 0 {
			switch k := r.IntN(20); {
			case k < 10: // what the Deriver patches
				changed = deltaEdit(r, &fe.st, step)
				what = fmt.Sprintf("changed %v", changed)
			case k < 13:
				fe.st = cloneState(fe.st) // the edits write in place: a rendered document holds nothing of them
				what = fe.edit()
			case k < 17:
				fe.st = cloneState(fe.st)
				what = fe.editMixed()
			default:
				what, changed = editApp(r, &fe.st)
			}
		}
		doc, _, delta := c.x.Derive(fe.st, fe.opt, changed)
		if fe.coverApex && len(doc.Routes) > 0 {
			doc, delta = withCoverApex(doc), nil
		}
		return diffStep{doc: doc, delta: delta, fc: fe.fc, what: what}
	case diffHostile:
		if step == 0 {
			return diffStep{doc: c.good, what: "initial"}
		}
		if ok {
			c.good = c.last
		}
		c.editCerts(c.good)
		doc, delta := hostileDelta(r, c.good) // the node keeps serving the last good document
		return diffStep{doc: doc, delta: delta, fc: c.fc, what: fmt.Sprintf("hostile delta %v", deltaChanged(delta))}
	default:
		if ok && c.last != nil {
			c.good = c.last
		}
		switch r.IntN(6) {
		case 0:
			if c.good != nil && len(c.good.Routes) > 0 {
				bad, what := corruptDoc(r, c.good)
				return diffStep{doc: bad, fc: c.fc, what: "corrupt: " + what}
			}
		case 1:
			st, opt := hostileState(r)
			doc, _ := fleet.Derive(st, opt)
			return diffStep{doc: doc, fc: c.fc, what: "hostile tenants"}
		}
		for {
			c.gen.step()
			if doc := c.gen.doc(); doc != nil {
				c.editCerts(doc)
				return diffStep{doc: doc, fc: c.fc, what: "any valid document"}
			}
		}
	}
}

// editCerts changes the fleet certificates now and then: on or off, a name of doc
// issued (or renewed), pending.
func (c *diffCase) editCerts(doc *routing.Document) {
	switch c.r.IntN(10) {
	case 0:
		if c.fc != nil {
			c.fc = nil
			return
		}
		c.fc = &FleetCerts{Managed: map[string]bool{}}
		fallthrough
	case 1:
		if len(doc.Routes) > 0 {
			c.fc = fleetCertsWith(c.fc, doc.Routes[c.r.IntN(len(doc.Routes))].Host, c.r.IntN(3) != 0, c.r.IntN(1000))
		}
	}
}

func deltaChanged(d *routing.Delta) []int {
	if d == nil {
		return nil
	}
	return d.Changed
}

// run renders steps documents one after the other, every output after each.
func (c *diffCase) run(steps int) {
	ok := true
	for step := range steps {
		s := c.next(step, ok)
		c.last = s.doc
		ok = true
		for _, o := range c.r.Perm(len(c.outs)) {
			if c.r.IntN(5) == 0 {
				continue // an output not polled this time: its next delta has another base
			}
			out := c.outs[o]
			gdoc, gdelta := c.selection(s.doc, s.delta, out.sel)
			at := fmt.Sprintf("seed %d step %d (%s), groups %v, prefer %q", c.seed, step, s.what, out.sel, out.prefer)
			if err := c.compare(at, s.doc, gdoc, gdelta, out, s.fc); err != nil {
				ok = false
			}
			if c.t.Failed() {
				c.t.FailNow()
			}
			if c.r.IntN(8) == 0 { // asked again: the same document, its last body
				first := c.body
				if c.compare(at+", again", s.doc, gdoc, gdelta, out, s.fc) == nil && len(first) > 0 && len(c.body) > 0 && &first[0][0] == &c.body[0][0] {
					c.cov.same.Add(1)
				}
			}
		}
	}
	// The cache holds the variants of the recent passes, not the history.
	if c.fe != nil {
		if n, limit := c.inc.cached(), keepPasses*(len(c.fe.st.Apps)+len(c.fe.st.Claims)+1)+keepPasses; n > limit {
			c.t.Errorf("seed %d: %d fragments cached after %d steps, bound %d", c.seed, n, steps, limit)
		}
	}
}

// selection is the document (and delta) an output renders, made as node/publish makes
// it: patched from the selection's last document when the change came as a delta from
// its base.
func (c *diffCase) selection(doc *routing.Document, delta *routing.Delta, sel []string) (*routing.Document, *routing.Delta) {
	if sel == nil {
		return doc, delta
	}
	key := strings.Join(sel, ",")
	var gdoc *routing.Document
	var blocks routing.Blocks
	var gdelta *routing.Delta
	if l, ok := c.lineage[key]; ok && l.base == doc {
		return l.doc, nil // made for this document already
	} else if ok && delta != nil && l.base == delta.Base && upstreamsOnly(doc, delta) {
		gdoc, blocks, gdelta = routing.ForGroupsDelta(doc, sel, l.doc, l.blocks, delta)
	} else {
		gdoc, blocks = routing.ForGroupsBlocks(doc, sel)
	}
	c.lineage[key] = diffLineage{doc, gdoc, blocks}
	return gdoc, gdelta
}

// upstreamsOnly reports whether delta changes nothing but upstreams and health paths,
// what routing.ForGroupsDelta patches (hostileDelta also sends middleware changes).
func upstreamsOnly(doc *routing.Document, delta *routing.Delta) bool {
	for _, i := range delta.Changed {
		if i >= len(doc.Routes) || i >= len(delta.Base.Routes) || !slices.Equal(doc.Routes[i].Middlewares, delta.Base.Routes[i].Middlewares) {
			return false
		}
	}
	return true
}

// compare renders out of doc (its selection's document gdoc, patched by gdelta)
// through the Incremental and in full, and fails the test when the bodies or errors
// differ. It returns the full render's error.
func (c *diffCase) compare(at string, doc, gdoc *routing.Document, gdelta *routing.Delta, out diffOutput, fc *FleetCerts) error {
	t := c.t
	output := out.prefer + "|" + strings.Join(out.sel, ",")
	if out.sel == nil {
		output = out.prefer
	}
	if c.shared {
		output = "one" // every selection and prefer: each render must see the last is not its own
	}
	want, werr := c.full(doc, gdoc, out, fc, at)
	body, gerr := c.inc.Render(Request{Doc: gdoc, Delta: gdelta, Prefer: out.prefer, Output: output, Groups: out.sel, Certs: fc})
	c.cov.renders.Add(1)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Errorf("%s: errors differ: full %v, incremental %v", at, werr, gerr)
		return werr
	}
	if werr != nil {
		c.cov.refused.Add(1)
		return werr
	}
	if c.kind != diffConcurrent {
		c.body = body
	}
	if got := body.Bytes(); !bytes.Equal(got, want) {
		i := firstDiff(got, want)
		t.Errorf("%s: incremental render differs from the full render at byte %d (%d pieces)\nfull: %s\nincr: %s", at, i, len(body), excerpt(want, i), excerpt(got, i))
		return nil
	}
	c.cov.saw(want)
	if len(body) > 1 {
		switch {
		case out.sel != nil:
			c.cov.groupPatched.Add(1)
		case out.prefer != "":
			c.cov.preferPatched.Add(1)
		default:
			c.cov.patched.Add(1)
		}
	}
	return nil
}

// full is the package-level render of out of doc; it checks that the selection's
// document gdoc has routing.ForGroups' revision.
func (c *diffCase) full(doc, gdoc *routing.Document, out diffOutput, fc *FleetCerts, at string) ([]byte, error) {
	d := doc
	if out.sel != nil {
		d = routing.ForGroups(doc, out.sel)
		if d.Revision != gdoc.Revision {
			c.t.Errorf("%s: the selection's document has revision %s, ForGroups' %s", at, gdoc.Revision, d.Revision)
		}
	}
	d, err := routing.Prefer(d, out.prefer)
	if err != nil {
		return nil, err
	}
	if out.sel == nil {
		return TraefikFleet(d, c.opt, fc)
	}
	return TraefikGroups(d, c.opt, out.sel, fc)
}

// runConcurrent publishes steps documents from one goroutine while three others
// render outputs of whatever was published, mostly the newest document, sometimes an
// older one (a long-poll that woke late), each compared with its full render.
func (c *diffCase) runConcurrent(steps int) {
	var mu sync.Mutex
	var chain []*diffStep
	published := make(chan struct{}, steps)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for step := range steps {
			s := c.next(step, true)
			c.last = s.doc
			// The selections' documents, made once per document, in order.
			s.sels = map[string][2]any{}
			for _, o := range c.outs {
				if o.sel != nil {
					g, d := c.selection(s.doc, s.delta, o.sel)
					s.sels[strings.Join(o.sel, ",")] = [2]any{g, d}
				}
			}
			mu.Lock()
			chain = append(chain, &s)
			mu.Unlock()
			published <- struct{}{}
		}
	}()
	<-published // the first document
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(c.seed, uint64(g)))
			for n := 0; ; n++ {
				select {
				case <-done:
					if n > 3*steps {
						return
					}
				default:
				}
				mu.Lock()
				i := len(chain) - 1
				if r.IntN(4) == 0 {
					i = r.IntN(len(chain))
				}
				s := chain[i]
				mu.Unlock()
				out := c.outs[r.IntN(len(c.outs))]
				gdoc, gdelta := s.doc, s.delta
				if out.sel != nil {
					sd := s.sels[strings.Join(out.sel, ",")]
					gdoc, gdelta = sd[0].(*routing.Document), sd[1].(*routing.Delta)
				}
				c.cov.concurrent.Add(1)
				c.compare(fmt.Sprintf("seed %d, document %d (%s), groups %v, prefer %q, concurrent", c.seed, i, s.what, out.sel, out.prefer),
					s.doc, gdoc, gdelta, out, s.fc)
				if c.t.Failed() {
					return
				}
			}
		})
	}
	wg.Wait()
	<-done
}

// cloneState copies st deeply enough that editing it in place changes nothing a
// derived document or the Deriver holds.
func cloneState(st fleet.State) fleet.State {
	st.Apps, st.Claims, st.Nodes = slices.Clone(st.Apps), slices.Clone(st.Claims), slices.Clone(st.Nodes)
	st.UnreadableClaims = slices.Clone(st.UnreadableClaims)
	for i := range st.Claims {
		st.Claims[i].Paths = maps.Clone(st.Claims[i].Paths)
	}
	for i := range st.Nodes {
		st.Nodes[i].Instances = maps.Clone(st.Nodes[i].Instances)
	}
	for i := range st.Apps {
		st.Apps[i].Placement = slices.Clone(st.Apps[i].Placement)
	}
	return st
}

// editApp changes one application as a store write does (a new value): it turns
// passthrough (TLS at the instance: a TCP router; Derive refuses it where a wildcard,
// a path map or a health path stands in the way), or its operator middlewares change.
func editApp(r *rand.Rand, st *fleet.State) (string, []string) {
	st.Apps = slices.Clone(st.Apps)
	a := &st.Apps[r.IntN(len(st.Apps))]
	if r.IntN(2) == 0 {
		a.Passthrough = !a.Passthrough
		if a.Passthrough {
			a.Health = nil
			a.ProxyProtocol = 2 * r.IntN(2)
		} else {
			a.ProxyProtocol = 0
		}
		return fmt.Sprintf("%s passthrough %v", a.Name, a.Passthrough), []string{fleet.AppKey(a.Name)}
	}
	a.Middlewares = [][]string{nil, {"auth@file"}, {"auth@file", "www-redirect@file"}, {"www-redirect@file", "auth@file"}}[r.IntN(4)]
	return fmt.Sprintf("%s middlewares %v", a.Name, a.Middlewares), []string{fleet.AppKey(a.Name)}
}

// withCoverApex is doc with a route *.example.com over the platform apexes (a copy of
// one of its routes): Derive never writes one, a document may hold one, and the apex
// then needs its deny router.
func withCoverApex(doc *routing.Document) *routing.Document {
	d := &routing.Document{V: doc.V, API: doc.API, Routes: slices.Clone(doc.Routes)}
	rt := d.Routes[len(d.Routes)/2]
	rt.Host, rt.Paths = "*.example.com", nil
	d.Routes = append(d.Routes, rt)
	slices.SortFunc(d.Routes, func(a, b routing.Route) int { return strings.Compare(a.Host, b.Host) })
	d.Seal()
	return d
}
