package render

import (
	"bytes"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/traefik/genconf/dynamic"

	"github.com/scafo/ingress/render/routing"
)

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
	dest dest // zero when the target is no route of the document
}

// fragment is one application's part of the configuration (or the API apex's).
type fragment struct {
	// Inputs.
	app      string
	ups      []routing.Upstream
	health   string
	mw       []string // the application's own middlewares
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
	mw     []string // its own middlewares (routing.Route.Middlewares)
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

// serviceRef is the service the routers of an application with ups point at, as chain
// names it: the chain's root, or the lone leaf.
func serviceRef(base string, ups []routing.Upstream) string {
	if len(ups) == 1 {
		return leafName(base, 0, ups[0].Node)
	}
	return base
}

// lookup returns the cached fragment of a whose inputs equal a's in this document.
func (inc *Incremental) lookup(a *appIn, routes []routing.Route, seq iter.Seq[int], interval string, svcOf func(string) (dest, bool), fc *FleetCerts) *fragment {
variants:
	for _, f := range a.slot.variants {
		if f.interval != interval || f.health != a.health || !slices.Equal(f.ups, a.ups) || !slices.Equal(f.mw, a.mw) {
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
			if d, _ := svcOf(t.host); !d.same(t.dest) {
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
func (inc *Incremental) renderApp(a *appIn, routes []routing.Route, seq iter.Seq[int], interval string, svcOf func(string) (dest, bool), fc *FleetCerts) *fragment {
	r := inc.reset(interval, fc)
	f := &fragment{app: a.name, ups: a.ups, health: a.health, mw: a.mw, interval: interval}
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
		inc.scan = r.routeRouters(rt, dest{svc: svc, mw: a.mw}, svcOf, inc.scan)
		for t := range inc.scan {
			d, _ := svcOf(t)
			f.targets = append(f.targets, fragTarget{host: t, dest: d})
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
