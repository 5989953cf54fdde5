package publish

import (
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
)

// TestThrashingSelectionsHoldBoundedMemory (hostile review, round four): an
// ingress-token holder asking for 100 distinct selections (more than the 64 kept), each
// under three prefers (300 outputs, more than the 256 bodies kept), grows none of the
// publisher's maps past its bound: bodies (maxBodies) and the outputs' newest bodies,
// the snapshot's selection documents, deltas and certificate fingerprints and the
// lineage (maxGroupDocs each), and no render stays in flight.
func TestThrashingSelectionsHoldBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 300 outputs")
	}
	_, _, _, doc := thrashFleet(10)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
	s := p.cur.Load()
	for _, q := range thrashSelections(100) {
		for _, prefer := range []string{"", "vps-a", "vps-b"} {
			if _, err := p.Body(s, Request{Prefer: prefer, Format: api.FormatTraefik, Groups: q.groups}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.cache.mu.Lock()
	entries, latest := p.cache.lru.Len()+p.cache.other.Len(), len(p.cache.lru.Keys())+len(p.cache.other.Keys()) // one body per output: its newest
	p.cache.mu.Unlock()
	s.groups.mu.Lock()
	docs, deltas, fps := len(s.groups.docs), len(s.groups.deltas), len(s.groups.fps)
	s.groups.mu.Unlock()
	p.lineage.mu.Lock()
	lineage := len(p.lineage.last)
	p.lineage.mu.Unlock()
	p.mu.Lock()
	inflight := len(p.inflight)
	p.mu.Unlock()
	t.Logf("bodies %d, newest %d, selection docs %d, deltas %d, fingerprints %d, lineage %d, in flight %d", entries, latest, docs, deltas, fps, lineage, inflight)
	if entries > maxBodies || latest > entries {
		t.Errorf("bodies %d (bound %d), outputs' newest %d", entries, maxBodies, latest)
	}
	for name, n := range map[string]int{"selection docs": docs, "deltas": deltas, "fingerprints": fps, "lineage": lineage} {
		if n > maxGroupDocs {
			t.Errorf("%s: %d, bound %d", name, n, maxGroupDocs)
		}
	}
	if inflight != 0 {
		t.Errorf("%d renders in flight after every poll returned", inflight)
	}
}
