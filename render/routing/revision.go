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
// Routes are hashed in blocks of RevisionBlock (in host order): the document hash
// covers each block's own SHA-256, not the routes' bytes, so that a change to a few
// routes re-hashes their blocks alone (UpdateBlockDigests) and the revision of a
// fleet-sized document does not cost a pass over every route for every change. The
// blocks are a function of the document alone, so every node computes the same
// revision for the same content, whatever it derived before.
//
// A nil and an empty list (or map) hash alike, as they marshal alike where it matters.
func ComputeRevision(d *Document) string {
	routes := sortedRoutes(d.Routes)
	return revisionOf(d, len(routes), BlockDigests(routes))
}

// RevisionBlock is how many routes (in host order) one block digest covers.
const RevisionBlock = 64

// BlockDigests returns the digest of each block of routes, which must be in host order
// (a sealed document's are).
func BlockDigests(routes []Route) [][32]byte {
	out := make([][32]byte, (len(routes)+RevisionBlock-1)/RevisionBlock)
	e := revEncoder{h: sha256.New(), buf: make([]byte, 0, 4096)}
	for b := range out {
		out[b] = e.block(routes[b*RevisionBlock : min((b+1)*RevisionBlock, len(routes))])
	}
	return out
}

// UpdateBlockDigests returns the block digests of routes given prev, the digests of
// routes that differ from these only at the indices in changed (ascending): the blocks
// holding a changed route are hashed again, the others are prev's. The host set, and so
// the number of routes, must be the same. prev is not modified.
func UpdateBlockDigests(routes []Route, prev [][32]byte, changed []int) [][32]byte {
	out := slices.Clone(prev)
	e := revEncoder{h: sha256.New(), buf: make([]byte, 0, 4096)}
	last := -1
	for _, i := range changed {
		b := i / RevisionBlock
		if b == last {
			continue
		}
		last = b
		out[b] = e.block(routes[b*RevisionBlock : min((b+1)*RevisionBlock, len(routes))])
	}
	return out
}

// RevisionWithBlocks is ComputeRevision for a document whose routes are in host order
// and whose block digests are blocks (BlockDigests, UpdateBlockDigests).
func RevisionWithBlocks(d *Document, blocks [][32]byte) string {
	return revisionOf(d, len(d.Routes), blocks)
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

// block returns the digest of one block of routes, resetting e's hash.
func (e *revEncoder) block(routes []Route) [32]byte {
	e.h.Reset()
	e.buf = e.buf[:0]
	e.marker("block")
	e.int(len(routes))
	for _, r := range routes {
		e.route(r)
	}
	var out [32]byte
	copy(out[:], e.sum())
	return out
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
