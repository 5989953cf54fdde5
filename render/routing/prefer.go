package routing

// Prefer returns a copy of d in which every upstream list (each route's and the API's)
// has node's upstreams moved to the front, the rest keeping their order. It serves
// ?prefer=<node>: an ingress pointed at its local node sends traffic there first and
// fails over along the fleet's own order.
//
//   - node "" changes nothing.
//   - A valid node name that appears in no list changes nothing: an ingress must not
//     break because the node it prefers was retired.
//   - A malformed name is a *FieldError with Field "prefer" (a 400).
//
// Resolving "self" to the serving node's name is the caller's job; Prefer treats
// "self" like any other label. Prefer does not fold case; a caller that wants
// case-insensitive input folds with FoldHost first.
//
// d is a shared immutable snapshot and is never modified. The copy has its own Routes
// slice and API value and new slices for every list it reordered; unchanged upstream
// slices and path maps are shared with d, so treat the result as read-only too. The
// Revision is kept: it fingerprints the document before reordering.
func Prefer(d *Document, node string) (*Document, error) {
	if node != "" {
		if err := ValidateLabel("prefer", node); err != nil {
			return nil, err
		}
	}
	out := *d
	out.Routes = make([]Route, len(d.Routes))
	copy(out.Routes, d.Routes)
	if d.API != nil {
		api := *d.API
		out.API = &api
	}
	if node == "" {
		return &out, nil
	}
	for i := range out.Routes {
		out.Routes[i].Upstreams = preferUpstreams(out.Routes[i].Upstreams, node)
	}
	if out.API != nil {
		out.API.Upstreams = preferUpstreams(out.API.Upstreams, node)
	}
	return &out, nil
}

// preferUpstreams returns us with node's entries first (stable), or us itself when
// they already lead (including when there are none).
func preferUpstreams(us []Upstream, node string) []Upstream {
	// Find the first entry of another node that precedes an entry of node.
	seenOther := false
	move := false
	for _, u := range us {
		if u.Node != node {
			seenOther = true
		} else if seenOther {
			move = true
			break
		}
	}
	if !move {
		return us
	}
	out := make([]Upstream, 0, len(us))
	for _, u := range us {
		if u.Node == node {
			out = append(out, u)
		}
	}
	for _, u := range us {
		if u.Node != node {
			out = append(out, u)
		}
	}
	return out
}

// PreferDelta returns Prefer(d, node) and how it differs from prev, for d made from a
// base document by delta and prev = Prefer(delta.Base, node): prev's routes with the
// changed ones taken from d and preferred again. It reads the changed routes alone
// (and copies the route list), where Prefer reorders every list of the fleet. node
// must be a valid label, and d.API must be delta.Base's (the delta does not move it);
// prev is not modified.
func PreferDelta(d *Document, node string, prev *Document, delta *Delta) (*Document, *Delta) {
	out := *d
	out.Routes = make([]Route, len(prev.Routes))
	copy(out.Routes, prev.Routes)
	out.API = prev.API
	for _, i := range delta.Changed {
		out.Routes[i] = d.Routes[i]
		out.Routes[i].Upstreams = preferUpstreams(d.Routes[i].Upstreams, node)
	}
	return &out, &Delta{Base: prev, Changed: delta.Changed}
}
