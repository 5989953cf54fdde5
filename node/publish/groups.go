package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/scafo/ingress/render/routing"
)

// groupDocs caches, per snapshot, the documents of the group selections asked for (with
// how each was patched from the last snapshot's, nil when made whole), and the
// fingerprints of their fleet certificates.
type groupDocs struct {
	mu     sync.Mutex
	docs   map[string]*routing.Document
	deltas map[string]*routing.Delta
	fps    map[string]string
}

// maxGroupDocs bounds the selections cached per snapshot (a selection is a sorted set
// of known groups: distinct sets beyond this are computed per request).
const maxGroupDocs = 64

// groupLineage keeps, per selection, the last selection document made, with its block
// digests and the full document it was made from: when the Deriver patched the next
// full document from that one, the selection is patched too (routing.ForGroupsDelta,
// the changed routes alone) and its render builds on the last body
// (render.Incremental.Render). Only entries made from the document being
// superseded can serve the next snapshot: swapDoc drops the others.
type groupLineage struct {
	mu   sync.Mutex
	last map[string]groupMade
	// polled says whether a tracked ingress polls a selection (the publisher's cache):
	// when a map of selections is full, one no tracked ingress polls gives way to one
	// polled (makeRoom), so selections asked for once cannot take every place from
	// those real ingresses poll. nil: first come, first kept.
	polled func(selection string) bool
}

// makeRoom says whether key may be added to m (len(m) bounded by maxGroupDocs): there
// is room, or key is polled by a tracked ingress and a selection that is not is deleted
// (drop is told it; the least of them in sort order, for a stable choice). The caller
// holds m's lock.
func makeRoom[V any](m map[string]V, key string, polled func(string) bool, drop func(string)) bool {
	if len(m) < maxGroupDocs {
		return true
	}
	if polled == nil || !polled(key) {
		return false
	}
	victim := ""
	for k := range m {
		if (victim == "" || k < victim) && !polled(k) {
			victim = k
		}
	}
	if victim == "" {
		return false // every place is a polled selection's
	}
	delete(m, victim)
	if drop != nil {
		drop(victim)
	}
	return true
}

// polledBy is the lineage's test of a selection (nil without a lineage).
func (l *groupLineage) polledBy() func(string) bool {
	if l == nil {
		return nil
	}
	return l.polled
}

type groupMade struct {
	base, doc *routing.Document
	blocks    routing.Blocks
	seq       uint64 // of the Snapshot it was made for: a late request for an older one does not replace it
}

// made returns how the selection key was made from base, if it was.
func (l *groupLineage) made(key string, base *routing.Document) (groupMade, bool) {
	if l == nil {
		return groupMade{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.last[key]
	return m, ok && m.base == base
}

func (l *groupLineage) keep(key string, m groupMade) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]groupMade{}
	}
	if was, ok := l.last[key]; ok && was.seq > m.seq {
		return // made for a newer Snapshot
	} else if ok || makeRoom(l.last, key, l.polled, nil) {
		l.last[key] = m
	}
}

// superseded drops what was not made from doc, the document of the snapshot being
// replaced: the next snapshot's delta, if any, is from doc.
func (l *groupLineage) superseded(doc *routing.Document) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	maps.DeleteFunc(l.last, func(_ string, m groupMade) bool { return m.base != doc })
}

// ForGroups returns routing.ForGroups(snap.doc, groups), cached.
func (s *Snapshot) ForGroups(groups []string) *routing.Document {
	d, _ := s.forGroupsDelta(groups)
	return d
}

// forGroupsDelta is ForGroups with how the selection's document was patched from the
// last snapshot's (nil: made whole).
func (s *Snapshot) forGroupsDelta(groups []string) (*routing.Document, *routing.Delta) {
	key := strings.Join(groups, ",")
	s.groups.mu.Lock()
	d, ok := s.groups.docs[key]
	delta := s.groups.deltas[key]
	s.groups.mu.Unlock()
	if ok {
		return d, delta
	}
	var blocks routing.Blocks
	if m, ok := s.lineage.made(key, s.deltaBase()); ok {
		d, blocks, delta = routing.ForGroupsDelta(s.doc, groups, m.doc, m.blocks, s.delta)
	} else {
		d, blocks = routing.ForGroupsBlocks(s.doc, groups)
	}
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	if d0, ok := s.groups.docs[key]; ok {
		return d0, s.groups.deltas[key] // made meanwhile by another request: one document per selection
	}
	if s.groups.docs == nil {
		s.groups.docs, s.groups.deltas = map[string]*routing.Document{}, map[string]*routing.Delta{}
	}
	if makeRoom(s.groups.docs, key, s.lineage.polledBy(), func(k string) { delete(s.groups.deltas, k) }) {
		s.groups.docs[key], s.groups.deltas[key] = d, delta
		s.lineage.keep(key, groupMade{base: s.doc, doc: d, blocks: blocks, seq: s.seq})
	}
	return d, delta
}

// deltaBase is the document s.doc was patched from, or nil.
func (s *Snapshot) deltaBase() *routing.Document {
	if s.delta == nil {
		return nil
	}
	return s.delta.Base
}

// EmptyGroups returns those of groups without a route in snap, comma-separated.
func (s *Snapshot) EmptyGroups(groups []string) string {
	var empty []string
	for _, g := range groups {
		if s.groupRoutes[g] == 0 {
			empty = append(empty, g)
		}
	}
	return strings.Join(empty, ",")
}

// certsFingerprint is the render-cache key part of the fleet certificates (s.certs not
// nil): for every group (groups nil) the set's fingerprint; for a selection, a
// fingerprint of what its Traefik configuration reads of the set, which is what
// render.TraefikGroups keeps: the challenge router's entry points, and the fleet-issued
// names it routes (the hosts of the selection's routes and the API apexes) with their
// certificates. A certificate issued in one group leaves the others' keys, and their
// cached bodies, alone.
func (s *Snapshot) certsFingerprint(groups []string) string {
	if groups == nil || s.certs.FleetCerts == nil {
		return s.certs.Fingerprint
	}
	key := strings.Join(groups, ",")
	s.groups.mu.Lock()
	fp, ok := s.groups.fps[key]
	s.groups.mu.Unlock()
	if ok {
		return fp
	}
	doc := s.ForGroups(groups)
	routed := map[string]bool{}
	for _, r := range doc.Routes {
		if slices.Contains(groups, r.GroupOf()) {
			routed[r.Host] = true
		}
	}
	if doc.API != nil {
		for _, h := range doc.API.Hosts {
			routed[h] = true
		}
	}
	fc := s.certs.FleetCerts
	h := sha256.New()
	for _, ep := range fc.HTTPEntryPoints {
		h.Write([]byte(ep + "\x00"))
	}
	h.Write([]byte{1})
	for _, n := range slices.Sorted(maps.Keys(fc.Managed)) {
		if fc.Managed[n] && routed[n] {
			h.Write([]byte(n + "\x00"))
		}
	}
	h.Write([]byte{1})
	var certs []string
	for _, c := range fc.Certificates {
		if slices.ContainsFunc(c.Names, func(n string) bool { return routed[n] }) {
			certs = append(certs, strings.Join(c.Names, "\x00")+"\x01"+c.CertFile+"\x01"+c.KeyFile)
		}
	}
	slices.Sort(certs)
	for _, c := range certs {
		h.Write([]byte(c + "\x02"))
	}
	fp = "g" + hex.EncodeToString(h.Sum(nil)[:12])
	s.groups.mu.Lock()
	if s.groups.fps == nil {
		s.groups.fps = map[string]string{}
	}
	if makeRoom(s.groups.fps, key, s.lineage.polledBy(), nil) {
		s.groups.fps[key] = fp
	}
	s.groups.mu.Unlock()
	return fp
}
