package routing

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Validate checks d against every rule of wire format v1 that a consumer relies on, and
// is the one place those rules live: Decode applies it to what it reads, the Traefik
// render to what it is given.
//
//   - v is Version;
//   - routes are sorted by host, strictly (so no host appears twice); each host is a
//     canonical host or a one-label wildcard (ValidateCustomHost);
//   - each application is a DNS label, and every route of one application carries the
//     same upstream list and the same health path (services are per application);
//   - each upstream names a node (a DNS label), a canonical "ip:port" address and an
//     API port of 0..65535 (0: unknown);
//   - a health path, when present, is valid (ValidateHealthPath);
//   - a passthrough route is an exact host without a path map or health path, its
//     proxyProtocol 0 or 2; proxyProtocol is 0 on any other route; every route of one application agrees
//     on both (passthroughRule);
//   - middlewares, when present, are valid references, none twice, at most
//     MaxMiddlewares (ValidateMiddlewares); a passthrough route has none; every route
//     of one application carries the same list in the same order;
//   - a path map has at most MaxPaths prefixes; each prefix is valid (ValidatePrefix)
//     and each target is the exact host of a route of d (never a wildcard, never a
//     passthrough route: a path is invisible at layer 4);
//   - api.hosts are canonical hosts, sorted and unique, none of them the host of a route
//     (an apex an application claims is left out: application routes win); its
//     upstreams follow the upstream rules; each denied prefix is an absolute path.
//
// What it does not check: the revision (opaque; a document served with ?prefer= keeps
// the revision of its un-reordered form), the order of upstream lists (prefer reorders
// them), and anything only Derive can know (accounts, readiness).
//
// The error is a *FieldError naming the first offending field in document order
// ("routes[2].paths[\"Bob\"]"; within a path map the smallest failing prefix), so
// errors.Is(err, ErrInvalid) holds for every rule; a nil d is an error of its own.
func (d *Document) Validate() error {
	if d == nil {
		return errors.New("routing document is nil")
	}
	if err := validateVersion(d.V); err != nil {
		return err
	}
	// first route of each application, by index: the routes that must agree with it.
	firstOfApp := make(map[string]int, len(d.Routes))
	for i := range d.Routes {
		r := &d.Routes[i]
		// Every check runs first without its field name and only builds the name when
		// it fails: a valid document of 100 000 routes costs no allocation per route.
		if ValidateCustomHost("", r.Host) != nil {
			return ValidateCustomHost(routeField(i, ".host"), r.Host)
		}
		if i > 0 {
			switch prev := d.Routes[i-1].Host; {
			case r.Host == prev:
				return &FieldError{Field: routeField(i, ".host"), Value: r.Host, Rule: "duplicate host"}
			case r.Host < prev:
				return &FieldError{Field: routeField(i, ".host"), Value: r.Host,
					Rule: "routes must be sorted by host: sorts before routes[" + strconv.Itoa(i-1) + "].host " + strconv.Quote(prev)}
			}
		}
		if ValidateLabel("", r.Application) != nil {
			return ValidateLabel(routeField(i, ".application"), r.Application)
		}
		if r.HealthPath != "" && ValidateHealthPath("", r.HealthPath) != nil {
			return ValidateHealthPath(routeField(i, ".healthPath"), r.HealthPath)
		}
		if (r.Passthrough || r.ProxyProtocol != 0) && passthroughRule(r) != "" {
			return &FieldError{Field: routeField(i, passthroughField(r)), Value: r.Host, Rule: passthroughRule(r)}
		}
		if len(r.Middlewares) > 0 {
			if err := middlewaresError(i, r); err != nil {
				return err
			}
		}
		if r.Group == "" {
			// The common case, checked without naming the route; the rest below.
			if j, ok := firstOfApp[r.Application]; ok {
				first := &d.Routes[j]
				if first.Group == "" && first.HealthPath == r.HealthPath && first.Passthrough == r.Passthrough &&
					first.ProxyProtocol == r.ProxyProtocol && slices.Equal(first.Upstreams, r.Upstreams) &&
					slices.Equal(first.Middlewares, r.Middlewares) {
					continue
				}
			} else if upstreamsOK(r.Upstreams) {
				firstOfApp[r.Application] = i
				continue
			}
		}
		f := routeField(i, "")
		if r.Group != "" {
			if err := ValidateGroup(f+".group", r.Group); err != nil {
				return err
			}
			if r.Group == DefaultGroup {
				return &FieldError{Field: f + ".group", Value: r.Group, Rule: "the default group is written absent"}
			}
		}
		if j, ok := firstOfApp[r.Application]; ok {
			if d.Routes[j].Group != r.Group {
				return &FieldError{Field: f + ".group", Value: r.Group,
					Rule: "differs from routes[" + strconv.Itoa(j) + "].group of the same application"}
			}
			// Every host of an application shares one service chain: its routes must
			// agree on what that chain is. The first route's lists were checked.
			first := &d.Routes[j]
			if !slices.Equal(first.Upstreams, r.Upstreams) {
				return &FieldError{Field: f + ".upstreams", Value: r.Application,
					Rule: "differ from routes[" + strconv.Itoa(j) + "].upstreams of the same application"}
			}
			if first.HealthPath != r.HealthPath {
				return &FieldError{Field: f + ".healthPath", Value: r.HealthPath,
					Rule: "differs from routes[" + strconv.Itoa(j) + "].healthPath of the same application"}
			}
			if first.Passthrough != r.Passthrough {
				return &FieldError{Field: f + ".passthrough", Value: strconv.FormatBool(r.Passthrough),
					Rule: "differs from routes[" + strconv.Itoa(j) + "].passthrough of the same application"}
			}
			if first.ProxyProtocol != r.ProxyProtocol {
				return &FieldError{Field: f + ".proxyProtocol", Value: strconv.Itoa(r.ProxyProtocol),
					Rule: "differs from routes[" + strconv.Itoa(j) + "].proxyProtocol of the same application"}
			}
			if !slices.Equal(first.Middlewares, r.Middlewares) {
				return &FieldError{Field: f + ".middlewares", Value: strings.Join(r.Middlewares, ","),
					Rule: "differ from routes[" + strconv.Itoa(j) + "].middlewares of the same application"}
			}
			continue
		}
		firstOfApp[r.Application] = i
		if err := validateUpstreams(f+".upstreams", r.Upstreams); err != nil {
			return err
		}
	}
	// Targets are looked up in the sorted routes, which the loop above established.
	for i := range d.Routes {
		if err := d.validatePaths(i); err != nil {
			return err
		}
	}
	return d.validateAPI()
}

// validateAPI checks the api section: hosts canonical, sorted, unique and none the
// host of a route (routes must be sorted); upstreams and denied prefixes valid.
func (d *Document) validateAPI() error {
	if a := d.API; a != nil {
		for i, h := range a.Hosts {
			f := "api.hosts[" + strconv.Itoa(i) + "]"
			if err := ValidateHost(f, h); err != nil {
				return err
			}
			if i > 0 {
				switch prev := a.Hosts[i-1]; {
				case h == prev:
					return &FieldError{Field: f, Value: h, Rule: "duplicate host"}
				case h < prev:
					return &FieldError{Field: f, Value: h,
						Rule: "api hosts must be sorted: sorts before api.hosts[" + strconv.Itoa(i-1) + "] " + strconv.Quote(prev)}
				}
			}
			if j, ok := d.routeIndex(h); ok {
				return &FieldError{Field: f, Value: h,
					Rule: "is the host of routes[" + strconv.Itoa(j) + "] (an apex an application claims stays out of api.hosts: application routes win)"}
			}
		}
		if err := validateUpstreams("api.upstreams", a.Upstreams); err != nil {
			return err
		}
		for i, p := range a.Denied {
			if err := ValidateHealthPath("api.denied["+strconv.Itoa(i)+"]", p); err != nil {
				return err
			}
		}
	}
	return nil
}

// FrameOK reports whether d passes the rules of Validate that are not about one route
// on its own: the version, routes strictly sorted by host, and the api section. With
// RouteOK for every route, and every route of an application agreeing with its first
// on upstreams, health path, group, passthrough fields and middlewares, it accepts
// exactly what Validate accepts.
func (d *Document) FrameOK() bool {
	if d == nil || d.V != Version {
		return false
	}
	for i := 1; i < len(d.Routes); i++ {
		if d.Routes[i].Host <= d.Routes[i-1].Host {
			return false
		}
	}
	return d.validateAPI() == nil
}

// RouteOK reports whether routes[i] passes every rule Validate applies to one route on
// its own: its host, application, health path, group, upstream list, and path map (whose
// targets are looked up in d's routes, which must be sorted by host). It names nothing
// and allocates nothing for a valid route. It does not check what relates routes to one
// another (order, duplicate hosts, and that the routes of one application agree): a
// caller that skips Validate checks those itself, and calls Validate for the error when
// anything fails (render.Incremental, which re-checks only the applications whose inputs
// changed).
func (d *Document) RouteOK(i int) bool {
	r := &d.Routes[i]
	if ValidateCustomHost("", r.Host) != nil || ValidateLabel("", r.Application) != nil ||
		(r.HealthPath != "" && ValidateHealthPath("", r.HealthPath) != nil) || !GroupOK(r.Group) || !upstreamsOK(r.Upstreams) ||
		((r.Passthrough || r.ProxyProtocol != 0) && passthroughRule(r) != "") ||
		(len(r.Middlewares) > 0 && (r.Passthrough || middlewaresRule(r.Middlewares) != "")) {
		return false
	}
	return d.validatePaths(i) == nil
}

// middlewaresError is the error of route i's middleware list, nil when it is valid:
// each reference valid and listed once, and none on a passthrough route.
func middlewaresError(i int, r *Route) error {
	if r.Passthrough {
		return &FieldError{Field: routeField(i, ".middlewares"), Value: strings.Join(r.Middlewares, ","),
			Rule: "a passthrough route has no middlewares (a middleware is HTTP; its application terminates TLS itself)"}
	}
	if middlewaresRule(r.Middlewares) == "" {
		return nil
	}
	return ValidateMiddlewares(routeField(i, ".middlewares"), r.Middlewares)
}

// passthroughRule is the rule route r's passthrough fields break on their own, or "";
// passthroughField names the field it is about.
func passthroughRule(r *Route) string {
	switch {
	case !r.Passthrough:
		return "proxyProtocol is only for a passthrough route (must be absent)"
	case r.ProxyProtocol != 0 && r.ProxyProtocol != ProxyProtocolV2:
		return "must be absent or 2 (PROXY protocol v2)"
	case IsWildcard(r.Host):
		return "a passthrough route is an exact host, never a wildcard (a TLS server name selects one server)"
	case r.HealthPath != "":
		return "a passthrough route has no healthPath (its application speaks TLS, not HTTP, to the ingress)"
	}
	return ""
}

func passthroughField(r *Route) string {
	switch {
	case !r.Passthrough || r.ProxyProtocol != 0 && r.ProxyProtocol != ProxyProtocolV2:
		return ".proxyProtocol"
	case IsWildcard(r.Host):
		return ".passthrough"
	}
	return ".healthPath"
}

// GroupOK reports whether g is a valid value of Route.Group: absent (""), or a valid
// group name other than DefaultGroup (the default group is written absent).
func GroupOK(g string) bool {
	return g == "" || (g != DefaultGroup && ValidateGroup("", g) == nil)
}

// validatePaths checks the path map of route i. It makes one pass over the map without
// sorting it, and reports the smallest failing prefix, so the error does not depend on
// map iteration order.
func (d *Document) validatePaths(i int) error {
	r := &d.Routes[i]
	if r.Passthrough && len(r.Paths) > 0 {
		return &FieldError{Field: "routes[" + strconv.Itoa(i) + "].paths", Value: r.Host,
			Rule: "a passthrough route has no path map (a path is invisible at layer 4)"}
	}
	if len(r.Paths) > MaxPaths {
		return &FieldError{Field: "routes[" + strconv.Itoa(i) + "].paths", Value: r.Host,
			Rule: fmt.Sprintf("has %d prefixes, more than %d", len(r.Paths), MaxPaths)}
	}
	var (
		badKey string
		badErr error
		// goodTargets are the targets already found valid: a map of thousands of
		// prefixes has a few targets, each checked and looked up once.
		goodTargets map[string]bool
	)
	for k, t := range r.Paths {
		if badErr != nil && k >= badKey {
			continue
		}
		if goodTargets[t] && ValidatePrefix("", k) == nil {
			continue // the fast path; the field name is only built for an error
		}
		if err := d.pathEntryError(i, k, t); err != nil {
			badKey, badErr = k, err
			continue
		}
		if goodTargets == nil {
			goodTargets = map[string]bool{}
		}
		goodTargets[t] = true
	}
	return badErr
}

func (d *Document) pathEntryError(i int, k, t string) error {
	f := "routes[" + strconv.Itoa(i) + "].paths[" + strconv.Quote(k) + "]"
	if err := ValidatePrefix(f, k); err != nil {
		return err
	}
	if err := ValidateHost(f, t); err != nil {
		return err
	}
	j, ok := d.routeIndex(t)
	if !ok {
		return &FieldError{Field: f, Value: t, Rule: "target must be the host of a route in this document"}
	}
	if d.Routes[j].Passthrough {
		return &FieldError{Field: f, Value: t, Rule: "target is a passthrough route (a path is invisible at layer 4)"}
	}
	return nil
}

// routeIndex finds the route of host in d's routes, which must be sorted by host.
func (d *Document) routeIndex(host string) (int, bool) { return RouteIndex(d.Routes, host) }

// RouteIndex finds the route of host in routes, which must be sorted by host (a sealed
// document's are).
func RouteIndex(routes []Route, host string) (int, bool) {
	return slices.BinarySearchFunc(routes, host, func(r Route, h string) int { return cmp.Compare(r.Host, h) })
}

func validateVersion(v int) error {
	if v != Version {
		return &FieldError{Field: "v", Value: strconv.Itoa(v),
			Rule: "unsupported routing document version (this reader speaks " + strconv.Itoa(Version) + ")"}
	}
	return nil
}

// routeField is the field name of routes[i], plus suffix.
func routeField(i int, suffix string) string {
	return "routes[" + strconv.Itoa(i) + "]" + suffix
}

// upstreamsOK reports whether validateUpstreams accepts us, without naming anything.
func upstreamsOK(us []Upstream) bool {
	for _, u := range us {
		if ValidateLabel("", u.Node) != nil || ValidateAddress("", u.Address) != nil || u.APIPort < 0 || u.APIPort > 65535 {
			return false
		}
	}
	return true
}

func validateUpstreams(field string, us []Upstream) error {
	if upstreamsOK(us) {
		return nil
	}
	for j, u := range us {
		f := field + "[" + strconv.Itoa(j) + "]"
		if err := ValidateLabel(f+".node", u.Node); err != nil {
			return err
		}
		if err := ValidateAddress(f+".address", u.Address); err != nil {
			return err
		}
		if u.APIPort < 0 || u.APIPort > 65535 {
			return &FieldError{Field: f + ".apiPort", Value: strconv.Itoa(u.APIPort), Rule: "must be 0..65535"}
		}
	}
	return nil
}
