package routing

// Route blocks: how a revision stays cheap to recompute after a patch.
//
// ComputeRevision hashes a document's routes (in host order) in blocks of
// revisionBlock; the document hash covers each block's own SHA-256. A document patched
// from another (the fleet Deriver's upstream changes, ForGroupsDelta's selection of
// them) differs in a few routes: holding the last document's Blocks, its revision
// re-hashes the blocks holding those routes alone (Blocks.Reseal), not every route.
// Blocks are opaque outside this package: SealBlocks makes them, Reseal moves them on,
// and the revision they give is always ComputeRevision's
// (TestUpdatedBlockDigestsGiveTheRevisionOfTheDocument).

import (
	"crypto/sha256"
	"slices"
)

// Blocks are the block digests of one sealed document's routes, from which its
// revision is computed. Keep them beside that document to reseal a patch of it.
type Blocks struct{ d [][32]byte }

// SealBlocks sets d.Revision for d, whose routes are in host order, and returns its
// blocks.
func SealBlocks(d *Document) Blocks {
	b := Blocks{blockDigests(d.Routes)}
	d.Revision = revisionOf(d, len(d.Routes), b.d)
	return b
}

// Reseal is SealBlocks for d, whose routes differ from those of the document b was
// computed for only at the indices in changed (ascending; the same hosts, so the same
// number of routes): the blocks holding a changed route are hashed again, the others
// are b's. b is not modified.
func (b Blocks) Reseal(d *Document, changed []int) Blocks {
	out := Blocks{updateBlockDigests(d.Routes, b.d, changed)}
	d.Revision = revisionOf(d, len(d.Routes), out.d)
	return out
}

// revisionBlock is how many routes (in host order) one block digest covers.
const revisionBlock = 64

// blockDigests returns the digest of each block of routes, which must be in host order
// (a sealed document's are).
func blockDigests(routes []Route) [][32]byte {
	out := make([][32]byte, (len(routes)+revisionBlock-1)/revisionBlock)
	e := revEncoder{h: sha256.New(), buf: make([]byte, 0, 4096)}
	for b := range out {
		out[b] = e.block(routes[b*revisionBlock : min((b+1)*revisionBlock, len(routes))])
	}
	return out
}

// updateBlockDigests returns the block digests of routes given prev, the digests of
// routes that differ from these only at the indices in changed (ascending): the blocks
// holding a changed route are hashed again, the others are prev's. The host set, and so
// the number of routes, must be the same. prev is not modified.
func updateBlockDigests(routes []Route, prev [][32]byte, changed []int) [][32]byte {
	out := slices.Clone(prev)
	e := revEncoder{h: sha256.New(), buf: make([]byte, 0, 4096)}
	last := -1
	for _, i := range changed {
		b := i / revisionBlock
		if b == last {
			continue
		}
		last = b
		out[b] = e.block(routes[b*revisionBlock : min((b+1)*revisionBlock, len(routes))])
	}
	return out
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
