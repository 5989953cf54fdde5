package routing

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
)

// RevisionLen is the length of a revision in hex characters (128 bits of SHA-256).
const RevisionLen = 32

// ComputeRevision returns the content fingerprint of d: every field except Revision
// itself, hex SHA-256 truncated to RevisionLen characters.
//
// The encoding is unambiguous: every section and every route is introduced by its
// own marker, every list and map by its length, every string by its byte length. A
// value therefore can never migrate between sections (a host leaving api.hosts and
// appearing as a path target, say) and hash like the document it came from. Routes are
// hashed in host order and path maps in key order whatever order d holds them in, so
// the revision is the revision of the document Marshal would write. Compute it on the
// document as derived, before any Prefer reordering: upstream order is content.
//
// Routes are hashed in blocks of revisionBlock (in host order, blocks.go): the document
// hash covers each block's own SHA-256, not the routes' bytes, so that a change to a few
// routes re-hashes their blocks alone (Blocks.Reseal) and the revision of a
// fleet-sized document does not cost a pass over every route for every change. The
// blocks are a function of the document alone, so every node computes the same
// revision for the same content, whatever it derived before.
//
// A nil and an empty list (or map) hash alike, as they marshal alike where it matters.
func ComputeRevision(d *Document) string {
	routes := sortedRoutes(d.Routes)
	return revisionOf(d, len(routes), blockDigests(routes))
}

func revisionOf(d *Document, nRoutes int, blocks [][32]byte) string {
	e := revEncoder{h: sha256.New(), buf: make([]byte, 0, 4096)}
	e.marker("scafo-routing-document")
	e.marker("v")
	e.int(d.V)

	e.marker("routes")
	e.int(nRoutes)
	e.marker("route-blocks")
	e.int(len(blocks))
	for i := range blocks {
		e.buf = append(e.buf, blocks[i][:]...)
		e.flushIfFull()
	}

	e.api(d.API)
	sum := e.sum()
	return hex.EncodeToString(sum[:RevisionLen/2])
}

// api writes the API section and the end marker.
func (e *revEncoder) api(api *API) {
	e.marker("api")
	if api == nil {
		e.int(0)
	} else {
		e.int(1)
		e.marker("api.hosts")
		e.strs(api.Hosts)
		e.upstreams(api.Upstreams)
		e.marker("api.denied")
		e.strs(api.Denied)
	}
	e.marker("end")
}

// route writes one route.
func (e *revEncoder) route(r Route) {
	e.marker("route")
	e.str(r.Host)
	e.str(r.Application)
	e.str(r.HealthPath)
	if r.Group != "" {
		// Only when set, so that documents without groups keep their revisions.
		e.marker("group")
		e.str(r.Group)
	}
	if r.Passthrough || r.ProxyProtocol != 0 {
		// Only when set, so that documents without passthrough keep their revisions.
		e.marker("passthrough")
		e.int(boolInt(r.Passthrough))
		e.int(r.ProxyProtocol)
	}
	if len(r.Middlewares) > 0 {
		// Only when set, so that documents without middlewares keep their revisions;
		// a list with its length, each name with its own (strs), in order: order is
		// content.
		e.marker("middlewares")
		e.strs(r.Middlewares)
	}
	e.upstreams(r.Upstreams)
	e.marker("paths")
	e.int(len(r.Paths))
	for _, k := range sortedKeys(r.Paths) {
		e.str(k)
		e.str(r.Paths[k])
	}
}

// Seal sets d.V to Version and d.Revision to ComputeRevision(d). Seal the document as
// derived; never re-seal a Prefer result (its revision is the un-reordered one's).
func (d *Document) Seal() {
	d.V = Version
	d.Revision = ComputeRevision(d)
}

// sortedRoutes returns routes in host order, without copying when already sorted.
func sortedRoutes(routes []Route) []Route {
	if slices.IsSortedFunc(routes, compareRoutes) {
		return routes
	}
	out := slices.Clone(routes)
	slices.SortStableFunc(out, compareRoutes)
	return out
}

func compareRoutes(a, b Route) int { return cmp.Compare(a.Host, b.Host) }

func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// revEncoder writes a typed, length-prefixed stream into a hash, buffered.
type revEncoder struct {
	h   hash.Hash
	buf []byte
}

const (
	tagMarker = 'm'
	tagString = 's'
	tagInt    = 'i'
)

func (e *revEncoder) flushIfFull() {
	if len(e.buf) >= 3072 {
		e.h.Write(e.buf)
		e.buf = e.buf[:0]
	}
}

func (e *revEncoder) marker(name string) {
	e.buf = append(e.buf, tagMarker)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(name)))
	e.buf = append(e.buf, name...)
	e.flushIfFull()
}

func (e *revEncoder) str(s string) {
	e.buf = append(e.buf, tagString)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
	if len(s) > 1024 {
		e.h.Write(e.buf)
		e.h.Write([]byte(s))
		e.buf = e.buf[:0]
		return
	}
	e.buf = append(e.buf, s...)
	e.flushIfFull()
}

func (e *revEncoder) int(n int) {
	e.buf = append(e.buf, tagInt)
	e.buf = binary.AppendVarint(e.buf, int64(n))
	e.flushIfFull()
}

func (e *revEncoder) strs(ss []string) {
	e.int(len(ss))
	for _, s := range ss {
		e.str(s)
	}
}

func (e *revEncoder) upstreams(us []Upstream) {
	e.marker("upstreams")
	e.int(len(us))
	for _, u := range us {
		e.str(u.Node)
		e.str(u.Address)
		e.int(u.APIPort)
	}
}

func (e *revEncoder) sum() []byte {
	e.h.Write(e.buf)
	e.buf = e.buf[:0]
	return e.h.Sum(nil)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
