package publish

import (
	"maps"
	"slices"
	"time"

	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/routing"
)

// Doc is the snapshot's routing document.
func (s *Snapshot) Doc() *routing.Document { return s.doc }

// Since is when this revision was first published.
func (s *Snapshot) Since() time.Time { return s.since }

// Upstreams counts node's upstreams in the document (the API's included): a prefer
// target without any is a retired node, and changes nothing.
func (s *Snapshot) Upstreams(node string) int { return s.ups[node] }

// GroupRoutes counts the routes of group.
func (s *Snapshot) GroupRoutes(group string) int { return s.groupRoutes[group] }

// KnownGroups lists, sorted, the groups a ?group= may select: routing.DefaultGroup,
// the groups named beyond the document (platform.groups, and those applications name:
// PublishNamed) and the groups with routes.
func (s *Snapshot) KnownGroups() []string {
	set := map[string]bool{routing.DefaultGroup: true}
	for g := range *s.named.Load() {
		set[g] = true
	}
	for g := range s.groupRoutes {
		set[g] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// UnknownGroup returns the first of groups that is not known (KnownGroups), or "".
func (s *Snapshot) UnknownGroup(groups []string) string {
	named := *s.named.Load()
	for _, g := range groups {
		if g != routing.DefaultGroup && !named[g] && s.groupRoutes[g] == 0 {
			return g
		}
	}
	return ""
}

// Certs are the fleet certificates rendered with the document (nil without ACME).
func (s *Snapshot) Certs() *render.CertSet { return s.certs }

// Superseded is closed when a newer snapshot replaces this one: long-polls wait on it.
func (s *Snapshot) Superseded() <-chan struct{} { return s.superseded }

// Mark is the store serial and epoch the document is known to be derived from; ok is
// false when the publisher has no serial source.
func (s *Snapshot) Mark() (serial uint64, epoch string, ok bool) {
	m := s.mark.Load()
	if m == nil {
		return 0, "", false
	}
	return m.serial, m.epoch, true
}

// Patched reports whether the document was patched from the previous snapshot's
// (a delta) rather than derived whole.
func (s *Snapshot) Patched() bool { return s.delta != nil }

// Body is the identity body.
func (r *Rendered) Body() []byte { return r.body }

// Gzip is the gzip body (made at the first call: lazyGzip).
func (r *Rendered) Gzip() []byte { return r.gzipped().gz }

// ETag is the identity body's strong ETag; ETagGzip the gzip body's.
func (r *Rendered) ETag() string     { return r.etag }
func (r *Rendered) ETagGzip() string { return r.etagGzip }

// Revision is the revision of what was rendered (the selection's with ?group=).
func (r *Rendered) Revision() string { return r.revision }

// Probed says whether the body carries the poll's applied probe.
func (r *Rendered) Probed() bool { return r.probed }

// File and GzFile hold the same bytes on disk ("" when spilling failed, or the body
// left the cache before its gzip body was first asked for).
func (r *Rendered) File() string   { return r.file }
func (r *Rendered) GzFile() string { return r.gzipped().gzFile }

// GroupsPatched reports whether the document of the selection groups was patched from
// the last snapshot's selection (routing.ForGroupsDelta) rather than made whole.
func (s *Snapshot) GroupsPatched(groups []string) bool {
	_, d := s.forGroupsDelta(groups)
	return d != nil
}

// RenderOptions are the options the publisher renders the Traefik format with.
func (p *Publisher) RenderOptions() render.Options { return p.render }
