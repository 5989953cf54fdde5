package render

import (
	"slices"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

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
