package render

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/scafo/ingress/render/routing"
)

// Incremental renders routing documents to exactly the bytes Traefik (the full render)
// writes for them, keeping what it rendered for each application across calls, so that
// a document that differs from the last one in one application re-renders that
// application and copies the rest.
//
// The unit is a fragment: everything one application contributes to the configuration
// (its service chain, and the routers of all its hosts: host routers, path guards,
// path routers), each entry already encoded as `"name":{…}`. A fragment is reused when
// its inputs are equal to the application's inputs in the new document:
//
//   - the application's name, upstream list in order (so a ?prefer= reordering is a
//     different fragment), health path and middlewares;
//   - its routes: each host and its path map;
//   - the service every path target resolves to, and its application's middlewares (a
//     prefix on this application's host points at another application's chain and
//     carries that application's middlewares: the chain's name moves when that
//     application goes from one upstream to two, and a target that left the document
//     selects nothing);
//   - whether each of its hosts is a fleet-issued name (FleetCerts.Managed: its
//     routers get `tls: {}`);
//   - not the health-check interval: an automatic interval depends on the whole
//     output's number of checks, so fragments carry a placeholder the assembler
//     replaces (ivToken), and a change that moves the interval re-renders nothing.
//
// The render options are fixed per Incremental. The platform API apex is one more
// fragment, keyed by api.hosts, its upstreams, denied prefixes and which apexes a
// custom wildcard covers, and, with fleet certificates, which apexes are fleet-issued
// names and the ACME challenge router's entry points (the router is fleet-wide, and
// exists exactly when the API fragment does). The assembler then merges every
// fragment's entries into the configuration with sorted keys, as encodeConfiguration
// writes it, and appends the fleet certificates (tls.certificates, fleetCertificates:
// fleet-wide, encoded on every render, the output's selection of them).
//
// Fragments are compared by their inputs, never by a hash, so a reuse can never be a
// collision. The cache is bounded: a fragment not used by any of the last keepPasses
// renders is dropped, so it holds at most keepPasses variants of each application
// (prefer orders and recent versions), never the history of the fleet.
//
// An Incremental is safe for concurrent use; renders are serialized.
type Incremental struct {
	opt resolved

	mu      sync.Mutex
	pass    uint64
	apps    map[string]*appSlot // by application name
	api     []*fragment
	scratch renderer
	scan    map[string][]string // byTarget scratch of routeRouters
	nextBuf []int32
	appsBuf []appIn
	missBuf []int
	mixed   []*appSlot // this render's slots holding more than the variant it used
	// prev is the last assembled order of each output, for the linear merge; at most
	// maxOutputs of them (keepOutput says which go).
	prev  map[string]*assembled
	stamp uint64
	// popularity ranks the outputs whose state is kept (SetPopularity; nil: the least
	// recently assembled goes).
	popularity func(output string) int
	// cold counts the assemblies that found no last order of their output (Cold).
	cold atomic.Uint64
	// deny holds the shared deny service as a fragment of its own.
	deny *fragment
	// ptDoc is the last document passthrough scanned, ptHas its answer.
	ptDoc *routing.Document
	ptHas bool
	// mw is the http.middlewares section of every output with routers,
	// `,"middlewares":{…}` (middlewaresOf: a constant of the options), nil when none.
	mw []byte
}

// keepPasses is how many renders an unused fragment survives: the variants one
// document needs (one per ?prefer= node) stay warm while the node serves them.
const keepPasses = 8

// NewIncremental validates opt and returns an empty incremental renderer.
func NewIncremental(opt Options) (*Incremental, error) {
	o, err := opt.resolve()
	if err != nil {
		return nil, err
	}
	inc := &Incremental{opt: o, apps: map[string]*appSlot{}, prev: map[string]*assembled{}, deny: &fragment{}}
	inc.deny.services = []entry{{name: denyEntry.name, b: denyEntry.b, owner: inc.deny}}
	inc.deny.ssize = len(denyEntry.b) + 1
	if m := middlewaresOf(o); m != nil {
		e := encoder{}
		e.raw(",")
		encodeMap(&e, "middlewares", m, e.middleware)
		inc.mw = e.buf
	}
	return inc, nil
}

// Body is a rendered configuration in pieces: its bytes are the pieces' in order. The
// pieces are shared with other bodies of the same output and must not be modified.
type Body [][]byte

// Len is the body's length in bytes.
func (b Body) Len() int {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return n
}

// Bytes returns the body in one slice (the piece itself when there is one).
func (b Body) Bytes() []byte {
	if len(b) == 1 {
		return b[0]
	}
	out := make([]byte, 0, b.Len())
	for _, p := range b {
		out = append(out, p...)
	}
	return out
}

// Request is one render of an Incremental: which document, for which output, built on
// what.
type Request struct {
	// Doc is the document to render; with Groups, routing.ForGroups(full, Groups). A
	// rendered document must not be modified afterwards: the output's next Render of the
	// very same document (same pointer, Prefer, Groups and Certs) returns its last body as
	// it is, and a later Delta may name it as its base.
	Doc *routing.Document
	// Delta says how Doc was made from an earlier document (fleet.Deriver;
	// routing.ForGroupsDelta for a selection), nil when it was not. When Output's last
	// render was of Delta.Base (with the same Prefer, Groups and Certs), only the
	// applications of the changed routes are rendered again; see Render. The delta is
	// trusted for the routes it does not name: they must be Delta.Base's (fleet.Deriver
	// guarantees it).
	Delta *routing.Delta
	// Prefer names the node whose upstreams lead every chain: the render is of
	// routing.Prefer(Doc, Prefer) (the ?prefer= outputs of a node). "" renders Doc itself.
	Prefer string
	// Output names one of several outputs the caller serves from one Incremental (the
	// node: one per ?prefer= and group selection): each output's next render merges with
	// its own last order and builds on its own last body. Any name gives the same bytes.
	Output string
	// Groups, when not nil, selects the routes whose routers are part of the output, as
	// the package-level TraefikGroups does: the routes of these groups (their
	// applications' services, and those of their path targets, come along; an empty
	// non-nil list selects none). Nil renders every route's routers, as Traefik does.
	Groups []string
	// Certs are the fleet certificates (nil: none), as TraefikFleet takes them: the
	// routers of fleet-issued names get `tls: {}` and the output carries the certificates
	// of the names it routes.
	Certs *FleetCerts
}

// Render renders req.Doc, preferred to req.Prefer and selected by req.Groups, for
// req.Output: the bytes the package-level render (Traefik, TraefikFleet,
// TraefikGroups of routing.Prefer(req.Doc, req.Prefer), with the Options this
// Incremental was made with) writes, and the same errors, returned in pieces.
//
// Every render reuses the cached fragments of the applications whose inputs did not
// change and merges with the output's last order. When the output's last render was of
// req.Delta.Base with the same Prefer, Groups and Certs, only the applications of the
// changed routes are rendered again, and the body shares every chunk of entries that
// holds none of theirs with the last body: the work follows the change, not the fleet.
// For a Prefer, the new document is the last one with the changed routes preferred
// again (routing.PreferDelta: a copy of the route list, no fleet-wide reordering). An
// entry the change renames (a new primary renames the chain's leaves) is removed and
// inserted by name. That needs the change to leave the output's automatic health-check
// interval and the shared deny service as they were, and the application's service
// name too when a path map of the output targets one of its hosts; the applications'
// old fragments to be those of the last body; and, with Groups, every changed
// application to be one of the selection (one that is only a path target of it, its
// routers another group's, renders the output in full). Otherwise, and without Delta,
// it renders in full.
//
// The changed routes are validated as a full render validates them (each route's own
// rules, and that the routes of each application agree); the others are Delta.Base's,
// which passed. Bytes are checked against the full render by
// TestDeltaRenderEqualsFullRender.
func (inc *Incremental) Render(req Request) (Body, error) {
	doc, delta, prefer, output, groups, fc := req.Doc, req.Delta, req.Prefer, req.Output, req.Groups, req.Certs
	sel := strings.Join(groups, ",")
	if groups == nil {
		sel = "\x00all" // no group name is empty
	}
	if doc != nil && inc.passthrough(doc) {
		return inc.renderWhole(doc, prefer, output, groups, fc)
	}
	inc.mu.Lock()
	prev := inc.prev[output]
	if !prev.madeLike(prefer, sel, fc) || doc == nil {
		prev = nil // no render of this output to build on
	}
	if prev != nil && prev.base == doc {
		// The very document the output last rendered (a selection no change reached:
		// routing.ForGroupsDelta returned it as it was): its body, as it is.
		body := Body{prev.body}
		if prev.body == nil {
			body = prev.pieces()
		}
		inc.mu.Unlock()
		return body, nil
	}
	if delta != nil && prev != nil && prev.base == delta.Base && doc.API == delta.Base.API && fits(delta, len(doc.Routes)) &&
		len(prev.doc.Routes) == len(doc.Routes) {
		pdoc, pdelta := doc, delta
		if prefer != "" {
			pdoc, pdelta = routing.PreferDelta(doc, prefer, prev.doc, delta)
		}
		body, ok, err := inc.patch(prev, pdoc, pdelta, output)
		if ok {
			inc.prev[output].base = doc
		}
		if ok || err != nil {
			inc.mu.Unlock()
			return body, err
		}
	}
	inc.mu.Unlock()
	pdoc, keep, err := selection(doc, prefer, groups)
	if err != nil {
		return nil, err
	}
	b, err := inc.render(pdoc, output, keep, fc)
	if err != nil {
		return nil, err
	}
	inc.mu.Lock()
	if a := inc.prev[output]; a != nil && a.body != nil && &a.body[0] == &b[0] {
		// The render of this document itself, not of a later one that raced it.
		a.doc, a.base, a.prefer, a.sel = pdoc, doc, prefer, sel
	}
	inc.mu.Unlock()
	return Body{b}, nil
}

// madeLike reports whether a is a render Render can build on for prefer, the
// selection sel and the fleet certificates fc.
func (a *assembled) madeLike(prefer, sel string, fc *FleetCerts) bool {
	return a != nil && a.doc != nil && a.prefer == prefer && a.sel == sel && a.fc == fc
}

// fits reports whether delta's base and changed routes fit a document of n routes.
func fits(delta *routing.Delta, n int) bool {
	if len(delta.Base.Routes) != n {
		return false
	}
	for j, i := range delta.Changed {
		if i < 0 || i >= n || (j > 0 && i <= delta.Changed[j-1]) {
			return false // out of range, or not ascending
		}
	}
	return true
}

// maxOutputs bounds the assembled orders kept (one per output: ?prefer= × groups).
const maxOutputs = 32

// SetPopularity makes estimate rank the outputs whose state is kept (the node: 1 for
// the outputs its body cache keeps first, 0 for the others; node/publish knows which
// it keeps). When more than maxOutputs outputs are rendered, the state of the one
// ranked lowest goes. Without it, the state of the output assembled least recently
// goes. Call it before the first render. Which state is kept never changes a body's
// bytes, only what it costs.
func (inc *Incremental) SetPopularity(estimate func(output string) int) {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	inc.popularity = estimate
}

// Cold is how many renders found no last order of their output to merge with (an
// output's first render, or one whose state keepOutput let go): each such render sorts
// the whole output. Tests count it to see which state a cache kept.
func (inc *Incremental) Cold() uint64 { return inc.cold.Load() }

// keepOutput stores a as output's last assembly (under mu). When that makes more than
// maxOutputs, the state of the output ranked lowest by popularity (the least recently
// assembled of those) goes, unless output ranks no higher (at equal ranks the state
// kept stays): then a is not kept (the output's next render sorts again, as its first
// did). So an output the node keeps is never displaced by one it does not, and a
// thrasher's selections hold the slots they filled while they were free and no more.
// Without popularity the least recently assembled output goes.
func (inc *Incremental) keepOutput(output string, a *assembled) {
	a.at = inc.stamp
	if _, ok := inc.prev[output]; ok || len(inc.prev) < maxOutputs {
		inc.prev[output] = a
		return
	}
	est := inc.popularity
	victim, vn, vat := "", 0, uint64(0)
	for k, p := range inc.prev {
		n := 0
		if est != nil {
			n = est(k)
		}
		if victim == "" || n < vn || (n == vn && p.at < vat) {
			victim, vn, vat = k, n, p.at
		}
	}
	if est != nil && est(output) <= vn {
		return
	}
	delete(inc.prev, victim)
	inc.prev[output] = a
}

// sweep drops the fragments no render used in the last keepPasses passes.
// With onlyMixed (every slot's fragment was used by this pass, and inc.mixed lists the
// slots holding other variants as well), only those slots can hold an unused fragment:
// the fleet's other slots are not walked.
func (inc *Incremental) sweep(onlyMixed bool) {
	if inc.pass <= keepPasses {
		return
	}
	old := inc.pass - keepPasses
	// The fragments of an output that delta renders build on (Render) stay while
	// its body holds them, however many renders of other outputs run in between: else
	// its next change finds its old fragments gone and renders it all again from
	// nothing. Its chunks hold them anyway; marking them every keepPasses/2 passes
	// costs one walk of its entries.
	for _, a := range inc.prev {
		if a.doc != nil && inc.pass-a.refreshed >= keepPasses/2 {
			a.markUsed(inc.pass)
		}
	}
	inc.api = slices.DeleteFunc(inc.api, func(f *fragment) bool { return f.used <= old })
	if onlyMixed {
		for _, slot := range inc.mixed {
			// A slot this pass used keeps that variant: it never empties here.
			slot.variants = slices.DeleteFunc(slot.variants, func(f *fragment) bool { return f.used <= old })
		}
		return
	}
	for name, slot := range inc.apps {
		slot.variants = slices.DeleteFunc(slot.variants, func(f *fragment) bool { return f.used <= old })
		if len(slot.variants) == 0 && slot.pass <= old {
			delete(inc.apps, name)
		}
	}
}

// markUsed marks every fragment with an entry in the output used by pass.
func (a *assembled) markUsed(pass uint64) {
	var owner *fragment
	for _, chunks := range [][]*chunk{a.rchunks, a.schunks} {
		for _, c := range chunks {
			for k := range c.entries {
				if o := c.entries[k].e.owner; o != nil && o != owner {
					owner, o.used = o, pass
				}
			}
		}
	}
	a.refreshed = pass
}

// cached is how many fragments are cached (tests: the bound).
func (inc *Incremental) cached() int {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	n := len(inc.api)
	for _, slot := range inc.apps {
		n += len(slot.variants)
	}
	return n
}

// passthrough reports whether doc has a passthrough route, remembering the answer for
// the last document asked about (one scan per document, not per output).
func (inc *Incremental) passthrough(doc *routing.Document) bool {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	if inc.ptDoc != doc {
		inc.ptDoc, inc.ptHas = doc, hasPassthrough(doc)
	}
	return inc.ptHas
}

// renderWhole renders a document with passthrough routes the way the package-level
// render does, from scratch: fragments hold HTTP routers and services only, so such a
// document is not split into them (passthrough applications are few, and a fleet that
// has one pays a full render per change). The output's last order is forgotten, so its
// next render builds on nothing it did not make.
func (inc *Incremental) renderWhole(doc *routing.Document, prefer, output string, groups []string, fc *FleetCerts) (Body, error) {
	inc.mu.Lock()
	delete(inc.prev, output)
	inc.mu.Unlock()
	pdoc, keep, err := selection(doc, prefer, groups)
	if err != nil {
		return nil, err
	}
	b, err := traefikResolved(routesInHostOrder(pdoc), inc.opt, keep, fc)
	if err != nil {
		return nil, err
	}
	return Body{b}, nil
}

// selection is what one output renders of doc: its ?prefer= order (doc itself without
// one) and the filter of its ?group= selection (nil: every route).
func selection(doc *routing.Document, prefer string, groups []string) (*routing.Document, func(*routing.Route) bool, error) {
	pdoc := doc
	if prefer != "" && doc != nil {
		var err error
		if pdoc, err = routing.Prefer(doc, prefer); err != nil {
			return nil, nil, fmt.Errorf("rendering Traefik configuration: %w", err)
		}
	}
	var keep func(*routing.Route) bool
	if groups != nil {
		keep = groupFilter(groups)
	}
	return pdoc, keep, nil
}
