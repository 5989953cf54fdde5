package reconcile

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// staleKey names the set of stale nodes, so a TTL crossing triggers a re-derive.
func (r *Reconciler) staleKey(now time.Time) string {
	ttl := r.opts().NodeTTL
	var keys []string
	if r.fold != nil {
		keys = r.fold.nodeKeys // what the last derivation read: sorted
	} else {
		for k := range r.objects {
			if strings.HasPrefix(k, fleet.PrefixNodes) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
	}
	var b strings.Builder
	for _, k := range keys {
		if n, ok := r.objects[k].value.(fleet.NodeRecord); ok && !fleet.NodeLive(r.seen(k, n), now, ttl) {
			b.WriteString(k)
			b.WriteByte(',')
		}
	}
	return b.String()
}

// derive folds the cached objects into a document and publishes it. changed names the
// keys of the objects that changed since the last derivation (nil: unknown, after a
// full read): the fold changes those entries alone, and the Deriver patches the last
// document when it can.
func (r *Reconciler) derive(now time.Time, changed []string) int {
	var f *fold
	if changed != nil && r.fold != nil {
		f = r.fold.patched(r.objects, changed)
	}
	if f == nil {
		f = buildFold(r.objects)
	}
	r.fold = f
	st := fleet.State{Apps: f.apps, Claims: f.claims, UnreadableClaims: f.unreadableClaims}
	skipped := slices.Clone(f.bad)
	var nodes []fleet.NodeRecord
	var mismatched []string
	for _, k := range f.nodeKeys {
		v, ok := r.objects[k].value.(fleet.NodeRecord)
		if !ok {
			continue // malformed: in f.bad
		}
		v.Seen = r.seen(k, v)
		nodes = append(nodes, v)
		if v.Settings != nil && !sameSettings(*v.Settings, r.self) {
			mismatched = append(mismatched, v.Name)
		}
	}
	st.Nodes = nodes
	r.warnAhead(nodes, now)
	opt := r.opts()
	opt.Now = now
	doc, dskipped, delta := r.deriver.Derive(st, opt, changed)
	skipped = append(skipped, dskipped...)
	if r.pub.PublishNamed(doc, delta, namedGroups(opt, f.namedGroups()), now) {
		r.lastPublish = time.Now()
		r.log.Info("published routing document", "revision", doc.Revision, "routes", len(doc.Routes), "skipped", len(skipped))
	}
	r.remember(doc, now)
	// Log what the derivation dropped whenever that set changes (a dropped entry may not
	// move the revision at all: it contributes nothing), once per object per pass.
	if key := skippedKey(dskipped); key != r.lastSkipped {
		r.lastSkipped = key
		for _, s := range dskipped {
			r.log.Warn("skipped", "object", s.Object, "reason", s.Reason)
		}
	}
	r.lastStale = r.staleKey(now)

	r.mu.Lock()
	if !slices.Equal(mismatched, r.status.Mismatched) && len(mismatched) > 0 {
		r.log.Warn("nodes run with different fleet settings (platform domains, api.public)", "nodes", mismatched)
	}
	r.status.Skipped = skipped
	r.status.Nodes = nodes
	r.status.Mismatched = mismatched
	r.status.Remembered = false
	r.apps = AppView(f.apps)
	if r.apps == nil {
		r.apps = AppView{} // a view of no application, which is not no view
	}
	r.known.set(r.apps)
	r.mu.Unlock()
	if r.onOwnRecord != nil {
		for _, n := range nodes {
			if n.Name == r.selfName {
				r.onOwnRecord(n)
			}
		}
	}
	return len(skipped)
}

// remember keeps the published document and the store's identity in the state dir
// when either changed (not every pass): the revision moves with routing content only;
// a serial that moved alone rewrites served-serial only (served.go).
func (r *Reconciler) remember(doc *routing.Document, now time.Time) {
	r.remembered = nil
	if r.saver == nil {
		return
	}
	serial, epoch := r.id.Mark()
	switch {
	case r.saved.epoch == epoch && r.saved.revision == doc.Revision && r.saved.serial == serial:
		return
	case r.saved.epoch == epoch && r.saved.revision == doc.Revision:
		r.saver.save(Memory{Epoch: epoch, Serial: serial, SavedAt: now.UTC()}, nil)
	default:
		r.saver.save(Memory{Epoch: epoch, Serial: serial, SavedAt: now.UTC()}, doc)
	}
	r.saved.epoch, r.saved.revision, r.saved.serial = epoch, doc.Revision, serial
}

// sameSettings reports whether two nodes' settings are the same: their JSON, as
// written in their records. Settings equal by value marshal alike, so they are compared
// by value first (each derivation compares every node's, and marshalling both was a
// hundredth of the fleet simulator's CPU under -race); settings that differ by value are
// compared by their JSON, which tells a nil list from an empty one and no map from an
// empty one as the records do. TestSameSettingsIsTheirJSON holds the fields compared to
// NodeSettings'.
func sameSettings(a, b fleet.NodeSettings) bool {
	if a.APIPublic == b.APIPublic && (a.PlatformDomains == nil) == (b.PlatformDomains == nil) &&
		slices.Equal(a.PlatformDomains, b.PlatformDomains) && maps.Equal(a.DomainGroups, b.DomainGroups) {
		return true
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// Status is the reconciler's state as of its last pass.
func (r *Reconciler) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// warnAhead logs each node record dated more than reconcile.nodeTTL ahead of this node's
// clock (not live: fleet.NodeLive), naming the record and the skew, when that set changes.
func (r *Reconciler) warnAhead(nodes []fleet.NodeRecord, now time.Time) {
	ttl := r.opts().NodeTTL
	var b strings.Builder
	for _, n := range nodes {
		if ahead, _ := fleet.NodeAhead(n.Seen, now, ttl); ahead {
			b.WriteString(n.Name + "\x00" + n.Seen.String() + "\x00")
		}
	}
	if b.String() == r.lastAhead {
		return
	}
	r.lastAhead = b.String()
	for _, n := range nodes {
		if ahead, skew := fleet.NodeAhead(n.Seen, now, ttl); ahead {
			r.log.Warn("a node record is dated ahead of this node's clock by more than reconcile.nodeTTL: it is not live and not routed; fix the clock (NTP) of the node that writes it, or remove the record if no node does",
				"record", fleet.NodeKey(n.Name), "seen", n.Seen.UTC(), "skew", skew.Round(time.Second), "nodeTTL", ttl)
		}
	}
}
