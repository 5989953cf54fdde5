package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// liveness lists nodes/ when a heartbeat interval has passed since the last list (a
// full read lists it too), and reports whether it did; the caller keeps the listing
// (mergeLive). A record rewritten since this
// node read it (its etag moved: a heartbeat, which bumps no serial) counts as seen at
// its modification time; see seen.
func (r *Reconciler) liveness(ctx context.Context, now time.Time) ([]store.Entry, bool, error) {
	if r.heartbeat <= 0 || now.Sub(r.lastLive) < r.heartbeat {
		return nil, false, nil
	}
	es, err := r.st.List(ctx, fleet.PrefixNodes)
	if err != nil {
		return nil, false, fmt.Errorf("listing %s: %w", fleet.PrefixNodes, err)
	}
	return es, true, nil
}

// mergeLive keeps a liveness listing taken without a full read. A record this node
// holds that the listing lacks keeps its previous entry: the listing may come from a
// store swapped (wiped, unmounted) since the serial read, and an empty listing must
// not make every peer fall back to its record's old `seen` and turn stale (withdrawing
// its routes) for a pass. A record really deleted moved the serial, and the full read
// that follows replaces the whole set (setLive). Costs no request (no serial re-read
// per heartbeat interval).
func (r *Reconciler) mergeLive(entries []store.Entry, now time.Time) {
	prev := r.live
	r.setLive(entries, now)
	for k, e := range prev {
		if _, ok := r.live[k]; ok {
			continue
		}
		if _, held := r.objects[k]; held {
			r.live[k] = e
		}
	}
}

func (r *Reconciler) setLive(entries []store.Entry, now time.Time) {
	live := make(map[string]store.Entry)
	for _, e := range entries {
		if strings.HasPrefix(e.Key, fleet.PrefixNodes) {
			live[e.Key] = e
		}
	}
	r.live, r.lastLive = live, now
}

// seen is when node record n (at key) was last written as far as this node knows: the
// newest of its `seen` and, when the last LIST found the record rewritten since it was
// read, that LIST's modification time. A record whose listed version is the one read
// keeps its own `seen` (a record planted with an old time stays stale).
func (r *Reconciler) seen(key string, n fleet.NodeRecord) time.Time {
	e, ok := r.live[key]
	if !ok || e.ETag == r.objects[key].etag || !e.ModTime.After(n.Seen) {
		return n.Seen
	}
	return e.ModTime
}
