package render

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

// patch renders doc from prev, the output's last render of delta.Base (see
// Render). ok false, err nil: it cannot, render in full (the output is as it was;
// a fragment rendered on the way stays cached).
func (inc *Incremental) patch(prev *assembled, doc *routing.Document, delta *routing.Delta, output string) (body Body, ok bool, err error) {
	base := delta.Base // its route count and API are doc's, and delta fits (Render)
	if doc.V != routing.Version || prev.rchunks == nil {
		return nil, false, nil
	}
	// The changed routes, by application, each checked as the full render checks it.
	var names []string
	byApp := map[string][]int{}
	for _, i := range delta.Changed {
		r, b := &doc.Routes[i], &base.Routes[i]
		if r.Host != b.Host || r.Application != b.Application || r.Group != b.Group || !maps.Equal(r.Paths, b.Paths) ||
			!slices.Equal(r.Middlewares, b.Middlewares) {
			// Middlewares too: the path routers of other applications that select this
			// one carry them (fleet.Deriver derives the whole state for such a change).
			return nil, false, nil
		}
		if !doc.RouteOK(i) {
			return nil, false, refuse(doc)
		}
		if _, seen := byApp[r.Application]; !seen {
			names = append(names, r.Application)
		}
		byApp[r.Application] = append(byApp[r.Application], i)
	}
	type swap struct{ old, now *fragment }
	var swaps []swap
	checks := prev.checks
	for _, name := range names {
		idx := byApp[name]
		first := &doc.Routes[idx[0]]
		for _, i := range idx[1:] {
			r := &doc.Routes[i]
			if r.HealthPath != first.HealthPath || !slices.Equal(r.Upstreams, first.Upstreams) || !slices.Equal(r.Middlewares, first.Middlewares) {
				return nil, false, refuse(doc) // the routes of one application disagree
			}
		}
		if first.HealthPath == "" {
			if err := requireAPIPorts("routes["+strconv.Itoa(idx[0])+"].upstreams", first.Upstreams); err != nil {
				return nil, false, nil // the full render reports it in its own order
			}
		}
		slot := inc.apps[name]
		if slot == nil {
			return nil, false, nil
		}
		seq := slices.Values(idx)
		was := &appIn{name: name, slot: slot, ups: base.Routes[idx[0]].Upstreams, health: base.Routes[idx[0]].HealthPath, mw: base.Routes[idx[0]].Middlewares}
		old := inc.lookup(was, base.Routes, seq, prev.fragInterval, svcIn(base), prev.fc)
		if old == nil || len(old.routes) != len(idx) || !prev.holds(old) {
			return nil, false, nil // not all of its routes changed, or not this body's
		}
		a := &appIn{name: name, slot: slot, ups: first.Upstreams, health: first.HealthPath, mw: first.Middlewares}
		svcOf := svcIn(doc)
		now := inc.lookup(a, doc.Routes, seq, prev.fragInterval, svcOf, prev.fc)
		if now == nil {
			now = inc.renderApp(a, doc.Routes, seq, prev.fragInterval, svcOf, prev.fc)
			slot.variants = append(slot.variants, now)
			if n := len(slot.variants) - keepPasses; n > 0 {
				slot.variants = slices.Delete(slot.variants, 0, n) // the oldest; the cache is not correctness
			}
		}
		// Path routers of other applications point at this one's service by name: it
		// may move only when no path map of the output targets the application's hosts.
		if old.deny != now.deny || len(now.routers) == 0 {
			return nil, false, nil // the shared deny service would come or go
		}
		if serviceRef(slot.base, old.ups) != serviceRef(slot.base, now.ups) {
			for _, i := range idx {
				if prev.targets[doc.Routes[i].Host] {
					return nil, false, nil
				}
			}
		}
		checks += max(len(now.ups)-1, 0) - max(len(old.ups)-1, 0)
		swaps = append(swaps, swap{old, now})
	}
	if inc.opt.interval == "" && AutoHealthCheckInterval(checks).String() != prev.interval {
		return nil, false, nil // every service's interval moves
	}
	cur := *prev
	cur.routers, cur.services, cur.body = nil, nil, nil
	for _, sw := range swaps {
		var okR, okS bool
		cur.rchunks, okR = replaceEntries(cur.rchunks, sw.old.routers, sw.now.routers, "")
		cur.schunks, okS = replaceEntries(cur.schunks, sw.old.services, sw.now.services, prev.interval)
		if !okR || !okS {
			return nil, false, nil
		}
		sw.now.used = inc.pass
	}
	cur.doc, cur.checks = doc, checks
	inc.stamp++
	inc.keepOutput(output, &cur)
	return cur.pieces(), true, nil
}

// svcIn is where a path target resolves to in d (its application's service and
// middlewares), as the full render's svcOf resolves it (the routes of one application
// agree, so the target's route says).
func svcIn(d *routing.Document) func(string) (dest, bool) {
	return func(target string) (dest, bool) {
		i, ok := routing.RouteIndex(d.Routes, target)
		if !ok || routing.IsWildcard(target) {
			return dest{}, false
		}
		r := &d.Routes[i]
		return dest{svc: serviceRef(appServiceName(r.Application), r.Upstreams), mw: r.Middlewares}, true
	}
}

// holds reports whether f's entries are the ones in this output.
func (a *assembled) holds(f *fragment) bool {
	if len(f.routers) == 0 {
		return false
	}
	c, k, ok := find(a.rchunks, f.routers[0].name)
	return ok && a.rchunks[c].entries[k].e == &f.routers[0]
}

// find locates the entry called name in chunks (sorted by name, as the section is).
func find(chunks []*chunk, name string) (c, k int, ok bool) {
	c, _ = slices.BinarySearchFunc(chunks, name, func(ch *chunk, n string) int { return strings.Compare(ch.entries[0].e.name, n) })
	if c == len(chunks) || chunks[c].entries[0].e.name != name {
		c-- // in the chunk before the first one starting after name
	}
	if c < 0 {
		return 0, 0, false
	}
	k, ok = slices.BinarySearchFunc(chunks[c].entries, name, func(p placed, n string) int { return strings.Compare(p.e.name, n) })
	return c, k, ok
}

// replaceEntries replaces the entries old with the entries now (names sorted within
// each list, and unique in the section) in chunks, a copy of from: each chunk that
// loses or gains an entry is copied with its bytes rewritten; one left empty is
// dropped, and one grown past twice chunkEntries is split. It reports false when an
// entry of old is not where from says it is, or a name of now is taken by another
// entry.
func replaceEntries(chunks []*chunk, old, now []entry, interval string) ([]*chunk, bool) {
	gone := make(map[*entry]bool, len(old))
	touched := map[int][]*entry{} // chunk → the entries it gains
	for i := range old {
		c, k, ok := find(chunks, old[i].name)
		if !ok || chunks[c].entries[k].e != &old[i] {
			return nil, false
		}
		gone[&old[i]] = true
		if _, ok := touched[c]; !ok {
			touched[c] = nil
		}
	}
	for i := range now {
		c, k, ok := find(chunks, now[i].name)
		if ok && !gone[chunks[c].entries[k].e] {
			return nil, false
		}
		c = max(c, 0) // a name before every other goes to the first chunk
		if len(chunks) == 0 {
			return nil, false
		}
		touched[c] = append(touched[c], &now[i])
	}
	var out []*chunk
	last := 0
	for _, c := range slices.Sorted(maps.Keys(touched)) {
		out = append(out, chunks[last:c]...)
		last = c + 1
		was := chunks[c]
		es := make([]placed, 0, len(was.entries)+len(touched[c]))
		add := touched[c]
		for _, p := range was.entries {
			for len(add) > 0 && add[0].name < p.e.name {
				es = append(es, placed{e: add[0], off: -1, end: -1})
				add = add[1:]
			}
			if !gone[p.e] {
				es = append(es, p)
			}
		}
		for _, e := range add {
			es = append(es, placed{e: e, off: -1, end: -1})
		}
		for len(es) > 0 {
			n := len(es)
			if n > 2*chunkEntries {
				n = chunkEntries
			}
			nc := &chunk{entries: es[:n:n], base: was.base, body: was.body}
			nc.rewrite(interval)
			out = append(out, nc)
			es = es[n:]
		}
	}
	return append(out, chunks[last:]...), true
}

// rewrite writes the chunk's bytes again: entries placed (off ≥ 0) are copied from its
// body, the others written from their fragment with interval.
func (c *chunk) rewrite(interval string) {
	buf := make([]byte, 0, len(c.body)+len(c.body)/8)
	for k := range c.entries {
		p := &c.entries[k]
		if k > 0 {
			buf = append(buf, ',')
		}
		off := len(buf)
		if p.off >= 0 {
			buf = append(buf, c.body[p.off-c.base:p.end-c.base]...)
		} else {
			buf = appendEntry(buf, p.e, interval)
		}
		p.off, p.end = off, len(buf)
	}
	c.body, c.base = buf, 0
}

// chunked cuts a section's entries, placed in body, into chunks sharing body's bytes.
func chunked(list []placed, body []byte) []*chunk {
	out := make([]*chunk, 0, (len(list)+chunkEntries-1)/chunkEntries)
	for i := 0; i < len(list); i += chunkEntries {
		es := list[i:min(i+chunkEntries, len(list)):min(i+chunkEntries, len(list))]
		base := es[0].off
		out = append(out, &chunk{entries: es, base: base, body: body[base:es[len(es)-1].end]})
	}
	return out
}

var (
	pieceHead     = []byte(`{"http":{"routers":{`)
	pieceComma    = []byte(`,`)
	pieceClose    = []byte(`}`)
	pieceServices = []byte(`,"services":{`)
)

// pieces is the body of the chunked form: what assemble writes from the same entries.
func (a *assembled) pieces() Body {
	out := make(Body, 0, 2*(len(a.rchunks)+len(a.schunks))+8)
	section := func(chunks []*chunk) {
		for i, c := range chunks {
			if i > 0 {
				out = append(out, pieceComma)
			}
			out = append(out, c.body)
		}
		out = append(out, pieceClose)
	}
	out = append(out, pieceHead)
	section(a.rchunks)
	if len(a.schunks) > 0 {
		out = append(out, pieceServices)
		section(a.schunks)
	}
	if a.mw != nil {
		out = append(out, a.mw)
	}
	out = append(out, pieceClose)
	if a.certs != nil {
		out = append(out, pieceComma, a.certs)
	}
	return append(out, pieceClose)
}

// flatten makes the flat form of a delta render's output again: body, and every
// entry placed in it.
func (a *assembled) flatten() {
	pieces := a.pieces()
	a.body = pieces.Bytes()
	place := func(chunks []*chunk, at int) []placed {
		var out []placed
		for _, c := range chunks {
			for _, p := range c.entries {
				out = append(out, placed{e: p.e, off: at + p.off - c.base, end: at + p.end - c.base})
			}
			at += len(c.body) + 1
		}
		return out
	}
	a.routers = place(a.rchunks, len(pieceHead))
	a.services = place(a.schunks, len(pieceHead)+sectionLen(a.rchunks)+len(pieceClose)+len(pieceServices))
}

// sectionLen is the length of a section's entries, comma-separated.
func sectionLen(chunks []*chunk) int {
	n := max(len(chunks)-1, 0)
	for _, c := range chunks {
		n += len(c.body)
	}
	return n
}
