package routing

import (
	"slices"
	"strings"
)

// Ingress groups. Past about 10 000 applications one Traefik configuration costs every
// ingress seconds of CPU on each change anywhere in the fleet, so the hosts are split
// across groups of ingresses: each application belongs to one group (Route.Group), and
// an ingress that polls with ?group= loads only its groups' hosts.
const (
	// DefaultGroup is the group of every application that names none.
	DefaultGroup = "default"
	// MaxGroups is the most groups one ?group= may name.
	MaxGroups = 16
)

// ValidateGroup checks a group name: a DNS label (lowercase a-z, 0-9 and '-', not
// starting or ending with '-', 1 to 63 bytes), so that it reads the same in a URL, a
// header, a metric label and a file name.
func ValidateGroup(field, s string) error { return ValidateLabel(field, s) }

// GroupOf returns the group of r: its Group, or DefaultGroup when absent.
func (r *Route) GroupOf() string {
	if r.Group == "" {
		return DefaultGroup
	}
	return r.Group
}

// ParseGroups reads the value of ?group=: comma-separated group names, at most
// MaxGroups, each valid (ValidateGroup), none twice. It returns them sorted, the
// canonical spelling of the selection. Errors are *FieldError naming "group".
func ParseGroups(v string) ([]string, error) {
	if len(v) > MaxGroups*64 {
		return nil, &FieldError{Field: "group", Value: v[:64] + "…", Rule: "is longer than " + itoa(MaxGroups*64) + " bytes"}
	}
	names := strings.Split(v, ",")
	if len(names) > MaxGroups {
		return nil, &FieldError{Field: "group", Value: v, Rule: "names more than " + itoa(MaxGroups) + " groups"}
	}
	for _, n := range names {
		if err := ValidateGroup("group", n); err != nil {
			return nil, err
		}
	}
	slices.Sort(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			return nil, &FieldError{Field: "group", Value: names[i], Rule: "is listed twice"}
		}
	}
	return names, nil
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}

// ForGroups returns the part of d the ingresses of groups serve, sealed with its own
// revision: the routes of those groups; the routes their path maps target in other
// groups (a prefix on a group's host may point at an application of another group of
// the same account: that route comes along, carrying its own group but not its own
// path map, which is its group's business, so the document stays valid and an ingress
// can build the target's service; it must not route that host, which is another
// group's); and the API apex, which is fleet-wide and goes in every group, as anything
// fleet-wide must (an ACME challenge route would too).
//
// The result depends only on those routes, the API and the targets: a change in
// another group leaves its bytes, and so its revision, as they were. d is not
// modified; the result shares its upstream slices and path maps (read-only).
func ForGroups(d *Document, groups []string) *Document {
	out, _ := ForGroupsBlocks(d, groups)
	return out
}

// ForGroupsBlocks is ForGroups, also returning the result's Blocks, for ForGroupsDelta.
func ForGroupsBlocks(d *Document, groups []string) (*Document, Blocks) {
	in := func(g string) bool { return slices.Contains(groups, g) }
	// Fleet-wide sections are copied whole: every group's ingresses serve them. A
	// section added to Document for the whole fleet (an ACME challenge route) belongs
	// here too; only Routes are split by group.
	out := &Document{V: d.V, API: d.API}
	var targets []string
	for i := range d.Routes {
		r := &d.Routes[i]
		if !in(r.GroupOf()) {
			continue
		}
		out.Routes = append(out.Routes, *r)
		for _, t := range r.Paths {
			targets = append(targets, t)
		}
	}
	slices.Sort(targets)
	targets = slices.Compact(targets)
	for _, t := range targets {
		i, ok := d.routeIndex(t)
		if ok && !in(d.Routes[i].GroupOf()) {
			// The target's own path map is its group's business: without it the
			// document does not depend on it, and stays valid (its prefixes may point
			// at hosts this document does not carry).
			r := d.Routes[i]
			r.Paths = nil
			out.Routes = append(out.Routes, r)
		}
	}
	if out.Routes == nil {
		out.Routes = []Route{}
	}
	slices.SortFunc(out.Routes, compareRoutes)
	return out, SealBlocks(out)
}

// ForGroupsDelta returns ForGroups(d, groups), its Blocks, and how it differs from
// prev, for d made from a base document by delta and prev = ForGroups(delta.Base,
// groups) with Blocks prevBlocks: prev's routes with the changed ones' upstreams
// and health paths taken from d (a changed route is in the selection when its host is
// in prev: its group's, or another group's path target), the revision re-hashing their
// blocks. It reads the changed routes alone (and copies the route list); when none is in
// the selection it returns prev itself and no delta (so that what was rendered from prev
// stays the base of the next change). d.API must be delta.Base's (the delta does not
// move it); prev is not modified.
func ForGroupsDelta(d *Document, groups []string, prev *Document, prevBlocks Blocks, delta *Delta) (*Document, Blocks, *Delta) {
	var out *Document
	var changed []int
	for _, i := range delta.Changed {
		r := &d.Routes[i]
		j, ok := prev.routeIndex(r.Host)
		if !ok {
			continue // another group's, and no path target of these
		}
		if out == nil {
			out = &Document{V: d.V, API: d.API, Routes: slices.Clone(prev.Routes)}
		}
		out.Routes[j].Upstreams, out.Routes[j].HealthPath = r.Upstreams, r.HealthPath
		changed = append(changed, j)
	}
	if len(changed) == 0 {
		return prev, prevBlocks, nil // the same content: the same document
	}
	slices.Sort(changed)
	return out, prevBlocks.Reseal(out, changed), &Delta{Base: prev, Changed: changed}
}

// Groups returns the groups of d's routes with how many routes each has, sorted by name.
func (d *Document) Groups() (names []string, routes map[string]int) {
	routes = map[string]int{}
	for i := range d.Routes {
		g := d.Routes[i].GroupOf()
		if routes[g] == 0 {
			names = append(names, g)
		}
		routes[g]++
	}
	slices.Sort(names)
	return names, routes
}
