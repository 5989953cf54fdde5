package render

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/scafo/ingress/internal/freq"

	"github.com/traefik/genconf/dynamic"

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
//     different fragment), and health path;
//   - its routes: each host and its path map;
//   - the service every path target resolves to (a prefix on this application's host
//     points at another application's chain: its name moves when that application
//     goes from one upstream to two, and a target that left the document selects
//     nothing);
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
	// popularity estimates how often an output is asked for recently (SetPopularity;
	// without it, own counts this Incremental's renders of each output).
	popularity func(output string) int
	own        *freq.Sketch
	// cold counts the assemblies that found no last order of their output (Cold).
	cold atomic.Uint64
	// deny holds the shared deny service as a fragment of its own.
	deny *fragment
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
	inc := &Incremental{opt: o, apps: map[string]*appSlot{}, prev: map[string]*assembled{}, deny: &fragment{},
		own: freq.New(maxOutputs)}
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

// entry is one encoded map entry: `"name":{…}`.
type entry struct {
	name  string
	b     []byte
	owner *fragment
	// ivAt are the offsets in b of ivToken, where the automatic interval goes.
	ivAt []int
}

// ivMark is the interval fragments are rendered with when it is automatic; encoded, it
// makes ivToken, which the assembler replaces with the output's interval. The token
// cannot occur anywhere else: inside a JSON string a '"' is always escaped, so the
// unescaped `"interval":"` only ever starts the interval field itself.
const ivMark = "\x00"

var ivToken = []byte(`"interval":"\u0000"`)

type fragRoute struct {
	host  string
	paths map[string]string
}

type fragTarget struct {
	host string
	svc  string // "" when the target is no route of the document
}

// fragment is one application's part of the configuration (or the API apex's).
type fragment struct {
	// Inputs.
	app      string
	ups      []routing.Upstream
	health   string
	routes   []fragRoute
	targets  []fragTarget
	interval string
	// fleet says, per route (per apex for the API fragment), whether the host is a
	// fleet-issued name.
	fleet []bool
	// API inputs (the API fragment only).
	apiHosts, apiDenied []string
	covered             []string // covering wildcard hosts passed to api()
	acme                bool     // the challenge router (fleet certificates on)
	acmeEPs             []string // its entry points

	// Outputs.
	routers  []entry
	services []entry
	deny     bool // a router points at the deny service
	checks   int
	used     uint64
	// Sizes of the encoded entries, and how many ivTokens the services hold.
	rsize, ssize, ivs int
	// Marks of the assembly being written (see assemble): included with routers, with
	// services; and present in the previous order of the same output.
	rmark, smark, rseen, sseen uint64
}

// appSlot is what the renderer keeps of one application name: its cached fragments
// and, during a render, where the application sits in that render's list (one map
// lookup per route serves both).
type appSlot struct {
	variants []*fragment
	base     string // appServiceName(name)
	pass     uint64 // the render that last saw the name
	idx      int    // its index in that render's apps
}

// appIn is one application of the document being rendered.
type appIn struct {
	name   string
	slot   *appSlot
	ups    []routing.Upstream
	health string
	group  string
	first  int // index of its first route
	last   int
	svc    string // what routers point at
	frag   *fragment
	// withRouters: its routers are part of this output (else only its services are,
	// because a path map of the output targets it).
	withRouters bool
	withService bool
}

// render renders doc; keep, when not nil, selects the routes whose routers are part of
// the output (their applications' services, and those of their path targets, come
// along); nil keeps every route. fc are the fleet certificates (nil: none).
//
// Validation is incremental too (see refuse): the frame (version, order, api) and the
// agreement of each application's routes are checked on every render, each route's own
// rules only for the applications whose fragment is rendered again. A reused
// fragment's inputs are equal to those of a render whose document passed.
func (inc *Incremental) render(doc *routing.Document, output string, keep func(*routing.Route) bool, fc *FleetCerts) ([]byte, error) {
	if doc == nil {
		return nil, errors.New("rendering Traefik configuration: nil document")
	}
	doc = routesInHostOrder(doc)
	if !doc.FrameOK() {
		return nil, refuse(doc)
	}
	inc.mu.Lock()
	defer inc.mu.Unlock()
	inc.pass++

	routes := doc.Routes
	// Scratch kept across renders (they are serialized): the next route of the same
	// application (or -1), and the applications of this document.
	next := slices.Grow(inc.nextBuf[:0], len(routes))[:len(routes)]
	apps := slices.Grow(inc.appsBuf[:0], len(routes))
	defer func() {
		clear(apps) // drop the references to this document
		inc.nextBuf, inc.appsBuf = next, apps[:0]
	}()
	apps, portErr, ok := inc.applications(routes, keep, next, apps)
	if !ok {
		return nil, refuse(doc)
	}
	svcOf := func(target string) (string, bool) {
		i, ok := routing.RouteIndex(routes, target)
		if !ok || routing.IsWildcard(target) {
			return "", false
		}
		return apps[inc.apps[routes[i].Application].idx].svc, true
	}
	if keep != nil {
		inc.withPathTargets(routes, next, apps)
	}
	api := doc.API
	if api != nil && len(api.Hosts) == 0 {
		api = nil
	}
	checks, interval, fragInterval := inc.intervals(apps, api)
	if err := inc.fragments(doc, next, apps, fragInterval, svcOf, fc, portErr); err != nil {
		return nil, err
	}
	clean := inc.use(apps)
	var apiFrag *fragment
	if api != nil {
		apiFrag = inc.apiFragment(api, routes, keep, fragInterval, fc)
		apiFrag.used = inc.pass
	}
	var certs []byte
	if t := fleetCertificates(fc, doc, keep); t != nil {
		e := encoder{}
		e.tlsConfiguration(t)
		certs = e.buf
	}
	body, cur := inc.assemble(output, apps, apiFrag, interval, certs)
	if a := inc.prev[output]; a == cur {
		// This output's state, kept (keepOutput).
		a.remember(apps, fc, checks, fragInterval, inc.pass)
	}
	inc.sweep(clean+len(inc.mixed) == len(inc.apps))
	return body, nil
}

// applications lists the applications of routes in apps (scratch, empty), each with the
// first and last of its routes and next linking them (scratch of len(routes)), and
// whether keep (nil: every route) selects its routers. It reports false when the
// document is refused: the routes of one application disagree, or a group is malformed.
// portErr is the first upstream without the API port a node-delegated check needs,
// reported once the document is known to be valid, as the full render does.
func (inc *Incremental) applications(routes []routing.Route, keep func(*routing.Route) bool, next []int32, apps []appIn) (_ []appIn, portErr error, ok bool) {
	for i := range routes {
		rt := &routes[i]
		next[i] = -1
		slot := inc.apps[rt.Application]
		if slot == nil {
			slot = &appSlot{base: appServiceName(rt.Application)}
			inc.apps[rt.Application] = slot
		}
		if slot.pass == inc.pass {
			a := &apps[slot.idx]
			if rt.Group != a.group || rt.HealthPath != a.health || !slices.Equal(rt.Upstreams, a.ups) {
				return apps, nil, false // the routes of one application disagree
			}
			next[a.last] = int32(i)
			a.last = i
			if keep == nil || keep(rt) {
				a.withRouters, a.withService = true, true
			}
			continue
		}
		if !routing.GroupOK(rt.Group) {
			return apps, nil, false // not part of a fragment's inputs: checked here
		}
		if rt.HealthPath == "" && portErr == nil {
			portErr = requireAPIPorts("routes["+strconv.Itoa(i)+"].upstreams", rt.Upstreams)
		}
		slot.pass, slot.idx = inc.pass, len(apps)
		in := keep == nil || keep(rt)
		apps = append(apps, appIn{name: rt.Application, slot: slot, ups: rt.Upstreams, health: rt.HealthPath, group: rt.Group,
			first: i, last: i, svc: serviceRef(slot.base, rt.Upstreams),
			withRouters: in, withService: in})
	}
	return apps, portErr, true
}

// withPathTargets marks the services a selected route's path map needs as part of the
// output: they come along with the routers.
func (inc *Incremental) withPathTargets(routes []routing.Route, next []int32, apps []appIn) {
	for j := range apps {
		a := &apps[j]
		if !a.withRouters {
			continue
		}
		for i := a.first; i >= 0; i = int(next[i]) {
			for _, t := range routes[i].Paths {
				if k, ok := routing.RouteIndex(routes, t); ok {
					apps[inc.apps[routes[k].Application].idx].withService = true
				}
			}
		}
	}
}

// intervals returns the output's count of checked leaves (every chain of the output and
// the API's: the automatic interval counts them), the health-check interval of the
// output, and the one fragments are rendered with (ivMark when it is automatic).
func (inc *Incremental) intervals(apps []appIn, api *routing.API) (checks int, interval, fragInterval string) {
	for j := range apps {
		if apps[j].withService {
			checks += max(len(apps[j].ups)-1, 0)
		}
	}
	if api != nil {
		checks += max(len(api.Upstreams)-1, 0)
	}
	interval = inc.opt.interval
	fragInterval = interval
	if interval == "" {
		interval, fragInterval = AutoHealthCheckInterval(checks).String(), ivMark
	}
	return checks, interval, fragInterval
}

// fragments gives each application of the output its fragment: the cached one whose
// inputs are its inputs in this document, or one rendered now. The routes of those
// rendered (and of those not in this output) are validated, all before any fragment is
// made: a refused document leaves nothing in the cache. portErr (applications) is
// returned once the routes passed.
func (inc *Incremental) fragments(doc *routing.Document, next []int32, apps []appIn, fragInterval string, svcOf func(string) (string, bool), fc *FleetCerts, portErr error) error {
	routes := doc.Routes
	misses := inc.missBuf[:0]
	for j := range apps {
		a := &apps[j]
		if a.withService {
			a.frag = inc.lookup(a, routes, chained(a.first, next), fragInterval, svcOf, fc)
		}
		if a.frag == nil {
			for i := a.first; i >= 0; i = int(next[i]) {
				if !doc.RouteOK(i) {
					return refuse(doc)
				}
			}
			if a.withService {
				misses = append(misses, j)
			}
		}
	}
	inc.missBuf = misses[:0]
	if portErr != nil {
		return fmt.Errorf("rendering Traefik configuration: %w", portErr)
	}
	for _, j := range misses {
		a := &apps[j]
		a.frag = inc.renderApp(a, routes, chained(a.first, next), fragInterval, svcOf, fc)
		a.slot.variants = append(a.slot.variants, a.frag)
	}
	return nil
}

// use marks the fragments of the output used by this pass, and lists in inc.mixed the
// slots that hold other variants as well (for sweep). It returns how many slots hold
// only the variant this pass used: they have nothing to sweep.
func (inc *Incremental) use(apps []appIn) (clean int) {
	inc.mixed = inc.mixed[:0]
	for j := range apps {
		a := &apps[j]
		if !a.withService {
			continue
		}
		a.frag.used = inc.pass
		if len(a.slot.variants) == 1 {
			clean++
		} else {
			inc.mixed = append(inc.mixed, a.slot)
		}
	}
	return clean
}

// remember records on a, an output's kept assembly, what a delta render of it builds
// on: the fleet certificates, the check count, the interval of its fragments, and the
// hosts the output's path maps target.
func (a *assembled) remember(apps []appIn, fc *FleetCerts, checks int, fragInterval string, pass uint64) {
	a.fc, a.checks, a.fragInterval, a.refreshed = fc, checks, fragInterval, pass
	a.targets = map[string]bool{}
	for j := range apps {
		if f := apps[j].frag; f != nil && apps[j].withRouters {
			for _, t := range f.targets {
				a.targets[t.host] = true
			}
		}
	}
}

// chained is the route indices of the chain from first in next (-1 ends it).
func chained(first int, next []int32) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := first; i >= 0; i = int(next[i]) {
			if !yield(i) {
				return
			}
		}
	}
}

// refuse returns the error Validate gives doc, which a check of the incremental render
// refused: the errors are the full render's, naming the first offending field.
func refuse(doc *routing.Document) error {
	if err := doc.Validate(); err != nil {
		return fmt.Errorf("rendering Traefik configuration: %w", err)
	}
	// The checks accept exactly what Validate accepts (routing.FrameOK); a document
	// refused anyway is refused rather than rendered unchecked.
	return errors.New("rendering Traefik configuration: the document failed an incremental check that Validate passes (a defect)")
}

// serviceRef is the service the routers of an application with ups point at, as chain
// names it: the chain's root, or the lone leaf.
func serviceRef(base string, ups []routing.Upstream) string {
	if len(ups) == 1 {
		return leafName(base, 0, ups[0].Node)
	}
	return base
}

// lookup returns the cached fragment of a whose inputs equal a's in this document.
func (inc *Incremental) lookup(a *appIn, routes []routing.Route, seq iter.Seq[int], interval string, svcOf func(string) (string, bool), fc *FleetCerts) *fragment {
variants:
	for _, f := range a.slot.variants {
		if f.interval != interval || f.health != a.health || !slices.Equal(f.ups, a.ups) {
			continue
		}
		k := 0
		for i := range seq {
			if k >= len(f.routes) || f.routes[k].host != routes[i].Host || !maps.Equal(f.routes[k].paths, routes[i].Paths) ||
				f.fleet[k] != fleetManaged(fc, routes[i].Host) {
				continue variants
			}
			k++
		}
		if k != len(f.routes) {
			continue
		}
		for _, t := range f.targets {
			if svc, _ := svcOf(t.host); svc != t.svc {
				continue variants
			}
		}
		return f
	}
	return nil
}

// fleetManaged reports whether host is a fleet-issued name of fc.
func fleetManaged(fc *FleetCerts, host string) bool {
	return fc != nil && fc.Managed[host]
}

// reset readies the scratch renderer for one fragment.
func (inc *Incremental) reset(interval string, fc *FleetCerts) *renderer {
	r := &inc.scratch
	// clear costs a map's capacity, not its length: after a fragment with thousands of
	// path routers, start over rather than clear that capacity for every application.
	if r.routers == nil || len(r.routers) > 64 || len(r.tls) > 64 {
		r.routers = map[string]*dynamic.Router{}
		r.tls = map[string]*dynamic.RouterTLSConfig{}
	}
	if r.services == nil || len(r.services) > 64 {
		r.services = map[string]*Service{}
	}
	clear(r.routers)
	clear(r.services)
	clear(r.tls)
	r.checks = r.checks[:0]
	r.opt = inc.opt
	r.opt.interval = interval
	r.fleet = fc
	return r
}

// renderApp renders a's fragment with the full render's own code (chain, routeRouters).
func (inc *Incremental) renderApp(a *appIn, routes []routing.Route, seq iter.Seq[int], interval string, svcOf func(string) (string, bool), fc *FleetCerts) *fragment {
	r := inc.reset(interval, fc)
	f := &fragment{app: a.name, ups: a.ups, health: a.health, interval: interval}
	name, health := a.name, a.health
	svc := r.chain(appServiceName(name), a.ups, func(u routing.Upstream) *dynamic.ServerHealthCheck {
		if health != "" {
			return r.healthCheck(health, 0)
		}
		return r.healthCheck(InstanceHealthPath+name, u.APIPort)
	})
	f.checks = len(r.checks)
	for i := range seq {
		rt := &routes[i]
		f.routes = append(f.routes, fragRoute{host: rt.Host, paths: rt.Paths})
		f.fleet = append(f.fleet, fleetManaged(fc, rt.Host))
		if len(inc.scan) > 64 {
			inc.scan = nil // as above
		}
		clear(inc.scan)
		inc.scan = r.routeRouters(rt, svc, svcOf, inc.scan)
		for t := range inc.scan {
			s, _ := svcOf(t)
			f.targets = append(f.targets, fragTarget{host: t, svc: s})
		}
	}
	inc.collect(f, r)
	return f
}

// apiFragment returns the API apex's fragment, cached like an application's. Which
// apexes need a deny router depends on the custom wildcards of the output's routes.
func (inc *Incremental) apiFragment(api *routing.API, routes []routing.Route, keep func(*routing.Route) bool, interval string, fc *FleetCerts) *fragment {
	var covered []string
	for _, apex := range api.Hosts {
		_, parent, ok := strings.Cut(apex, ".")
		if !ok {
			continue
		}
		w := "*." + parent
		if i, ok := routing.RouteIndex(routes, w); ok {
			if (keep == nil || keep(&routes[i])) && !slices.Contains(covered, w) {
				covered = append(covered, w)
			}
		}
	}
	fleet := make([]bool, len(api.Hosts))
	for i, apex := range api.Hosts {
		fleet[i] = fleetManaged(fc, apex)
	}
	var acmeEPs []string
	if fc != nil {
		acmeEPs = challengeEntryPoints(fc)
	}
	for _, f := range inc.api {
		if f.interval == interval && slices.Equal(f.apiHosts, api.Hosts) && slices.Equal(f.ups, api.Upstreams) &&
			slices.Equal(f.apiDenied, api.Denied) && slices.Equal(f.covered, covered) &&
			slices.Equal(f.fleet, fleet) && f.acme == (fc != nil) && slices.Equal(f.acmeEPs, acmeEPs) {
			return f
		}
	}
	r := inc.reset(interval, fc)
	mini := &routing.Document{API: api}
	for _, w := range covered {
		mini.Routes = append(mini.Routes, routing.Route{Host: w})
	}
	r.api(mini) // never fails
	r.acme(mini)
	f := &fragment{ups: api.Upstreams, apiHosts: api.Hosts, apiDenied: api.Denied, covered: covered, interval: interval, checks: len(r.checks),
		fleet: fleet, acme: fc != nil, acmeEPs: slices.Clone(acmeEPs)}
	inc.collect(f, r)
	inc.api = append(inc.api, f)
	return f
}

// collect encodes the scratch renderer's routers and services into f, sorted by name,
// in one buffer. The shared deny service is not the fragment's: it is noted, and the
// assembler writes it once.
func (inc *Incremental) collect(f *fragment, r *renderer) {
	auto := inc.opt.interval == ""
	if _, ok := r.services[svcDeny]; ok {
		f.deny = true
		delete(r.services, svcDeny)
	}
	e := encoder{buf: make([]byte, 0, 256*(len(r.routers)+len(r.services)))}
	type span struct {
		name       string
		start, end int
	}
	var rs, ss []span
	for _, k := range sortedMapKeys(r.routers) {
		s := len(e.buf)
		e.str(k)
		e.raw(":")
		e.router(r.routers[k])
		rs = append(rs, span{k, s, len(e.buf)})
	}
	for _, k := range sortedMapKeys(r.services) {
		s := len(e.buf)
		e.str(k)
		e.raw(":")
		e.service(r.services[k])
		ss = append(ss, span{k, s, len(e.buf)})
	}
	f.routers = make([]entry, len(rs))
	for i, s := range rs {
		f.routers[i] = entry{name: s.name, b: e.buf[s.start:s.end:s.end], owner: f}
		f.rsize += s.end - s.start + 1
	}
	f.services = make([]entry, len(ss))
	for i, s := range ss {
		b := e.buf[s.start:s.end:s.end]
		f.services[i] = entry{name: s.name, b: b, owner: f}
		f.ssize += len(b) + 1
		for off := 0; auto; {
			j := bytes.Index(b[off:], ivToken)
			if j < 0 {
				break
			}
			f.services[i].ivAt = append(f.services[i].ivAt, off+j)
			f.ivs++
			off += j + len(ivToken)
		}
	}
}

// denyEntry is the shared service without servers (503), encoded once.
var denyEntry = func() entry {
	e := encoder{}
	e.str(svcDeny)
	e.raw(":")
	e.service(emptyService())
	return entry{name: svcDeny, b: e.buf}
}()

// assembled is one output's sorted entries and the fragments they came from, kept so
// that the next render of the same output merges instead of sorting, and copies from
// this output's body instead of from every entry.
type assembled struct {
	// The flat form, written by a full render: every entry in order and where it is in
	// body, the output written, with interval in its services. A run of entries that
	// are still neighbours in the next output is copied from body in one piece, so the
	// copy reads one buffer front to back instead of every fragment's. A delta render
	// leaves it nil (flatten makes it again when a full render needs it).
	routers, services []placed
	body              []byte
	// The chunked form: the same entries in runs of chunkEntries, each with its bytes
	// (slices of body after a full render). A delta render replaces the chunks holding
	// the entries it changed and shares the others.
	rchunks, schunks []*chunk
	certs            []byte // tls, written after http ("" when none)
	mw               []byte // the middlewares section, after services (Incremental.mw)
	interval         string
	// What a delta render (Render with a Delta) builds on: the document rendered (set
	// by Render), its fleet certificates, the output's check count and the interval its
	// fragments were rendered with.
	doc          *routing.Document
	base         *routing.Document // the document doc is the Prefer of (doc itself without prefer)
	prefer       string
	sel          string // the groups whose routers it holds, comma-separated ("\x00all": every route)
	fc           *FleetCerts
	checks       int
	fragInterval string
	// targets are the hosts path maps of the output point at: their applications'
	// service names are part of other fragments.
	targets map[string]bool
	// refreshed is the last pass that marked every fragment of this output used: its
	// full render, then sweep (a delta render marks only the fragments it swaps in).
	refreshed uint64
	// at is the stamp of the output's last assembly (keepOutput: the older of two
	// outputs asked for as often goes first).
	at uint64
}

// chunk is a run of consecutive entries of one section and their bytes, comma-separated:
// entry k is body[entries[k].off-base : entries[k].end-base].
type chunk struct {
	entries []placed
	base    int
	body    []byte
}

// chunkEntries is how many entries a chunk holds: a delta render copies the chunks of
// the entries it changed (tens of KiB) and the list of chunks (one pointer per
// chunkEntries entries).
const chunkEntries = 128

// placed is an entry and where its bytes are in the body of the assembly holding it.
type placed struct {
	e        *entry
	off, end int
}

// maxOutputs bounds the assembled orders kept (one per output: ?prefer= × groups).
const maxOutputs = 32

// SetPopularity makes estimate say how often each output has been asked for recently,
// cached answers included (the node: its polls, node/publish). When more than
// maxOutputs outputs are rendered, the state of the one asked for least goes. Without
// it, an Incremental counts its own renders of each output. Call it before the first
// render. Which state is kept never changes a body's bytes, only what it costs.
func (inc *Incremental) SetPopularity(estimate func(output string) int) {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	inc.popularity = estimate
}

// Cold is how many renders found no last order of their output to merge with (an
// output's first render, or one whose state keepOutput let go): each such render sorts
// the whole output. Tests count it to see which state a cache kept.
func (inc *Incremental) Cold() uint64 { return inc.cold.Load() }

// asked counts one request for output when no popularity was set.
func (inc *Incremental) asked(output string) {
	inc.mu.Lock()
	counts := inc.popularity == nil
	inc.mu.Unlock()
	if counts {
		inc.own.Add(output)
	}
}

// keepOutput stores a as output's last assembly (under mu), unless that makes more
// than maxOutputs and output is asked for no more often than every other output kept
// (at equal rates the state kept stays): then a is not kept (the output's next render
// sorts again, as its first did).
// Otherwise the state of the output asked for least recently (popularity, the least
// recently assembled of those) goes. A one-off selection therefore never takes the
// place of an output real ingresses poll every round, more often than it; a thrasher
// cycling many selections, each asked for a few times, holds the slots it filled while
// they were free and no more, and a new real ingress's output gets a slot once it has
// been asked for more often than the least-asked one kept. Unpolled outputs fade (the
// estimates halve over time) and give way.
func (inc *Incremental) keepOutput(output string, a *assembled) {
	a.at = inc.stamp
	if _, ok := inc.prev[output]; ok || len(inc.prev) < maxOutputs {
		inc.prev[output] = a
		return
	}
	est := inc.popularity
	if est == nil {
		est = inc.own.Estimate
	}
	victim, vn, vat := "", 0, uint64(0)
	for k, p := range inc.prev {
		n := est(k)
		if victim == "" || n < vn || (n == vn && p.at < vat) {
			victim, vn, vat = k, n, p.at
		}
	}
	if est(output) <= vn {
		return
	}
	delete(inc.prev, victim)
	inc.prev[output] = a
}

// assemble writes the configuration: every selected fragment's entries in sorted name
// order, exactly as encodeConfiguration writes a configuration. The order is the last
// order of the same output (key) with the entries of fragments no longer in it
// filtered out and those of new fragments merged in: linear in the output, where a
// sort of every name would not be. When most of the output is new it sorts instead.
// It returns the body and the assembly, kept as key's state unless keepOutput refused.
func (inc *Incremental) assemble(key string, apps []appIn, apiFrag *fragment, interval string, certs []byte) ([]byte, *assembled) {
	inc.stamp++
	stamp := inc.stamp
	cur := &assembled{interval: interval, certs: certs, mw: inc.mw}
	var withR, withS []*fragment
	deny := false
	size := 64
	include := func(f *fragment, withRouters bool) {
		if withRouters {
			f.rmark = stamp
			withR = append(withR, f)
			deny = deny || f.deny
			size += f.rsize
		}
		f.smark = stamp
		withS = append(withS, f)
		size += f.ssize + f.ivs*len(interval)
	}
	for j := range apps {
		if apps[j].frag != nil {
			include(apps[j].frag, apps[j].withRouters)
		}
	}
	if apiFrag != nil {
		include(apiFrag, true)
	}
	if deny {
		include(inc.deny, false)
	}
	prev := inc.prev[key]
	if prev == nil {
		inc.cold.Add(1)
	}
	if prev != nil && prev.body == nil && prev.rchunks != nil {
		prev.flatten() // a delta render's: made flat again, once
	}
	var oldR, oldS []placed
	if prev != nil {
		oldR, oldS = prev.routers, prev.services
	}
	cur.routers = mergeEntries(prev != nil, oldR, withR, stamp,
		func(f *fragment) []entry { return f.routers }, func(f *fragment) uint64 { return f.rmark }, func(f *fragment) *uint64 { return &f.rseen })
	cur.services = mergeEntries(prev != nil, oldS, withS, stamp,
		func(f *fragment) []entry { return f.services }, func(f *fragment) uint64 { return f.smark }, func(f *fragment) *uint64 { return &f.sseen })
	inc.keepOutput(key, cur)

	if len(cur.routers) == 0 {
		if certs != nil {
			return append(append([]byte("{"), certs...), '}'), cur
		}
		return []byte("{}"), cur
	}
	var from []byte // the body runs are copied from
	if prev != nil {
		from = prev.body
	}
	buf := make([]byte, 0, size+len(inc.mw)+len(certs)+1)
	buf = append(buf, `{"http":{"routers":{`...)
	buf = writeEntries(buf, cur.routers, from, "")
	buf = append(buf, '}')
	if len(cur.services) > 0 {
		buf = append(buf, `,"services":{`...)
		if prev != nil && prev.interval != interval {
			from = nil // its services carry another interval
		}
		buf = writeEntries(buf, cur.services, from, interval)
		buf = append(buf, '}')
	}
	buf = append(buf, cur.mw...)
	buf = append(buf, '}')
	if certs != nil {
		buf = append(buf, ',')
		buf = append(buf, certs...)
	}
	buf = append(buf, '}')
	cur.body = buf
	cur.rchunks, cur.schunks = chunked(cur.routers, buf), chunked(cur.services, buf)
	return buf, cur
}

// writeEntries appends the entries of list, comma-separated, to buf and records where
// each one landed. An entry placed in from (the previous body of the output: off ≥ 0)
// is copied from there, and so is every following entry that was its neighbour there,
// in the same copy (the commas between them come along); the others are written from
// their fragment, with interval in place of the automatic-interval tokens.
func writeEntries(buf []byte, list []placed, from []byte, interval string) []byte {
	runFrom, runTo, runAt := -1, -1, 0 // the span of from not yet copied, and where it goes
	flush := func() {
		if runFrom >= 0 {
			buf = append(buf, from[runFrom:runTo]...)
			runFrom = -1
		}
	}
	for i := range list {
		p := &list[i]
		n := p.end - p.off
		if from != nil && p.off >= 0 {
			if runFrom >= 0 && p.off == runTo+1 {
				runTo = p.end // the previous entry's neighbour: the run grows
				p.off = runAt + (p.off - runFrom)
				p.end = p.off + n
				continue
			}
			flush()
			if i > 0 {
				buf = append(buf, ',')
			}
			runFrom, runTo, runAt = p.off, p.end, len(buf)
			p.off, p.end = len(buf), len(buf)+n
			continue
		}
		flush()
		if i > 0 {
			buf = append(buf, ',')
		}
		p.off = len(buf)
		buf = appendEntry(buf, p.e, interval)
		p.end = len(buf)
	}
	flush()
	return buf
}

// appendEntry appends e's bytes to buf with interval in place of its automatic-interval
// tokens.
func appendEntry(buf []byte, e *entry, interval string) []byte {
	last := 0
	for _, j := range e.ivAt {
		buf = append(buf, e.b[last:j]...)
		buf = append(buf, `"interval":"`...)
		buf = append(buf, interval...)
		buf = append(buf, '"')
		last = j + len(ivToken)
	}
	return append(buf, e.b[last:]...)
}

// mergeEntries returns the sorted entries (routers or services, as the accessors say)
// of the fragments in now, all marked with stamp: old (the previous order of the
// output, if there was one) without the entries of fragments not in now (each keeping
// its place in the previous body), merged with the sorted entries of the fragments old
// did not have (placed nowhere: off -1).
func mergeEntries(hadPrev bool, old []placed, now []*fragment, stamp uint64,
	entries func(*fragment) []entry, mark func(*fragment) uint64, seen func(*fragment) *uint64) []placed {
	prev := hadPrev
	var owner *fragment
	for _, p := range old {
		if p.e.owner != owner {
			owner = p.e.owner
			*seen(owner) = stamp
		}
	}
	var added []placed
	total := 0
	for _, f := range now {
		es := entries(f)
		total += len(es)
		if *seen(f) == stamp {
			continue
		}
		for i := range es {
			added = append(added, placed{e: &es[i], off: -1, end: -1})
		}
	}
	byName := func(a, b placed) int { return strings.Compare(a.e.name, b.e.name) }
	if !prev || len(added) > total/4 {
		// Mostly new: one sort of everything.
		all := make([]placed, 0, total)
		for _, f := range now {
			es := entries(f)
			for i := range es {
				all = append(all, placed{e: &es[i], off: -1, end: -1})
			}
		}
		slices.SortFunc(all, byName)
		return all
	}
	slices.SortFunc(added, byName)
	out := make([]placed, 0, total)
	j := 0
	owner = nil // consecutive entries mostly share their fragment: one look each
	kept := false
	for _, p := range old {
		if p.e.owner != owner {
			owner = p.e.owner
			kept = mark(owner) == stamp
		}
		if !kept {
			continue // its fragment left this output
		}
		for j < len(added) && added[j].e.name < p.e.name {
			out = append(out, added[j])
			j++
		}
		out = append(out, p)
	}
	return append(out, added[j:]...)
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
