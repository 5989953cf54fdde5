package render

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"

	"github.com/scafo/ingress/render/routing"
)

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
	svcOf := func(target string) (dest, bool) {
		i, ok := routing.RouteIndex(routes, target)
		if !ok || routing.IsWildcard(target) {
			return dest{}, false
		}
		a := &apps[inc.apps[routes[i].Application].idx]
		return dest{svc: a.svc, mw: a.mw}, true
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
			if rt.Group != a.group || rt.HealthPath != a.health || !slices.Equal(rt.Upstreams, a.ups) || !slices.Equal(rt.Middlewares, a.mw) {
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
		apps = append(apps, appIn{name: rt.Application, slot: slot, ups: rt.Upstreams, health: rt.HealthPath, mw: rt.Middlewares, group: rt.Group,
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
func (inc *Incremental) fragments(doc *routing.Document, next []int32, apps []appIn, fragInterval string, svcOf func(string) (dest, bool), fc *FleetCerts, portErr error) error {
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
