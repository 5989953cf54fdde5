package reconcile

import (
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// TestWipedStoreLivenessListingTurnsNoPeerStale: a liveness listing (no full read) taken
// from a store wiped since the serial read lists no peer; a peer whose liveness came
// from an earlier listing (a heartbeat rewrite, newer than its record's `seen`) keeps
// it, instead of falling back to its old `seen` and turning stale for a pass.
func TestWipedStoreLivenessListingTurnsNoPeerStale(t *testing.T) {
	key := fleet.NodeKey("vps-b")
	old := time.Now().Add(-time.Hour).UTC()
	beat := time.Now().UTC()
	r := &Reconciler{objects: map[string]cachedObject{key: {etag: "read"}}}
	r.setLive([]store.Entry{{Key: key, ETag: "rewritten", ModTime: beat}}, beat)
	rec := fleet.NodeRecord{Name: "vps-b", Seen: old}
	if got := r.seen(key, rec); !got.Equal(beat) {
		t.Fatalf("seen before the wipe: %v, want the listing's %v", got, beat)
	}
	r.mergeLive(nil, beat.Add(time.Second)) // the wiped store lists nothing
	if got := r.seen(key, rec); !got.Equal(beat) {
		t.Fatalf("seen after an empty liveness listing: %v, want %v kept (not the record's %v)", got, beat, old)
	}
	// A record this node no longer holds (deleted, read in full) is not kept.
	delete(r.objects, key)
	r.mergeLive(nil, beat.Add(2*time.Second))
	if _, ok := r.live[key]; ok {
		t.Fatal("a record this node no longer holds kept its liveness entry")
	}
}
