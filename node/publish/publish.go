// Package publish is the publisher: the current snapshot (one immutable published
// state, replaced whole), the render cache of its bodies, and the lineage of group
// selections. Publish (the reconciler's) and PublishCerts (the certificate manager's)
// are the only ways a snapshot is made, through one constructor.
package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/routing"
)

// Snapshot is one published state: immutable once stored, replaced whole. Handlers
// load it atomically and never see a half-built document.
type Snapshot struct {
	doc *routing.Document
	// since is when this revision was first published (for the revision-age metric).
	since time.Time
	// ups counts the upstreams of each node in doc (the API's included): a prefer target
	// without any is a retired node, and changes nothing.
	ups map[string]int
	// certs are the fleet certificates rendered with doc (nil without --acme.enabled):
	// a new certificate replaces the snapshot with the same doc (acme.go).
	certs *render.CertSet
	// superseded is closed when a newer snapshot replaces this one; long-polls wait on it.
	superseded chan struct{}
	// mark is the store serial (and epoch) the document was derived from, sent in
	// X-Scafo-Serial (and X-Scafo-Epoch) so the provider plugin never goes back to an
	// older one after switching nodes. It moves forward when a later pass derives the
	// same revision (the document is derived from that serial too), without waking
	// long-polls. nil when the publisher has no serial source (tests).
	mark atomic.Pointer[storeMark]
	// named are the groups known beyond the document's routes (platform.groups, and the
	// groups applications name): with routing.DefaultGroup and the groups with routes,
	// the groups a ?group= may select (KnownGroups). Like mark, it moves when a later
	// pass derives the same revision (an application names a group with no route yet),
	// without waking long-polls. Never modified once stored.
	named atomic.Pointer[map[string]bool]
	// groupRoutes counts the routes of each ingress group; groups caches the
	// documents of the selections asked for with ?group= (groups.go).
	groupRoutes map[string]int
	groups      groupDocs
	// delta says how doc was made from the previous snapshot's document (nil when it
	// was derived whole): the renders of the Traefik format build on their last bodies.
	delta *routing.Delta
	// lineage is the publisher's: how the last selections of groups were made; seq
	// counts the publisher's documents (a newer snapshot has a larger one).
	lineage *groupLineage
	seq     uint64
}

// storeMark is one store serial in its epoch.
type storeMark struct {
	serial uint64
	epoch  string
}

// Publisher holds the current Snapshot and the cache of Rendered bodies.
type Publisher struct {
	cur atomic.Pointer[Snapshot]
	// certs is the latest fleet-certificate set; every new snapshot carries it.
	certs atomic.Pointer[render.CertSet]
	// cache holds the rendered bodies of the outputs the fleet bounds (bodyCache).
	cache  *bodyCache
	render render.Options
	// frags renders the Traefik format incrementally: per-application fragments kept
	// across revisions, so a new revision re-renders what changed (render.Incremental).
	frags *render.Incremental

	// serialOf returns the store serial and epoch the document being published was
	// derived from: the reconcile loop publishes right after committing what it read,
	// so the identity's committed serial is that one. nil: no serial is sent.
	serialOf func() (uint64, string)

	// swap serialises snapshot replacement (publish, and publishCerts from the
	// certificate manager's goroutine); onPublish is told every new document.
	swap      sync.Mutex
	onPublish func(*routing.Document)

	mu       sync.Mutex
	inflight map[renderKey]*renderCall
	lineage  groupLineage
	seq      uint64       // documents published (under swap)
	renders  atomic.Int64 // bodies Rendered (cache misses that did the work)
	spillDir string
}

type renderKey struct {
	revision string // the document's; with ?group=, the selection's (routing.ForGroups)
	prefer   string
	format   string
	certs    string // the fleet certificates' fingerprint (traefik format only; of the selection's names with ?group=)
	groups   string // the ?group= selection, sorted, comma-separated; "" for every group
	probe    string // the applied probe's ingress, entry point and node (applied.go); "" for none
	base     string // with probe: the base body's ETag and the probe's MAC
}

// Rendered is one cached body, identity and gzip, with its strong ETag. The gzip body is
// made at the first poll that accepts it (gzipped), not at the render.
type Rendered struct {
	body     []byte
	etag     string // `"<hash>"`
	etagGzip string // `"<hash>-gzip"`: a strong validator names one representation
	// revision is the revision of what was rendered: the document's, or with ?group=
	// that of the group selection's document.
	revision string
	// probed: the body carries an applied probe (render.WithAppliedProbe).
	probed bool
	// file holds the same bytes on disk (page cache), so a poll can be answered with
	// sendfile(2) instead of copying megabytes through user space; "" when spilling
	// failed (the in-memory bytes are served then). The gzip body and its file: lazyGzip.
	file string
	lazyGzip
}

// New builds a publisher (see newPublisher). serialOf returns the store serial and
// epoch the document being published was derived from (nil: no serial is sent).
func New(opts render.Options, spillDir string, serialOf func() (uint64, string)) *Publisher {
	return NewWithCerts(opts, spillDir, serialOf, Certs{})
}

// Certs connects a publisher to the fleet certificates (the zero value: none).
type Certs struct {
	// Set is the certificate set the first snapshot carries; PublishCerts replaces it.
	Set *render.CertSet
	// OnPublish is told every new document.
	OnPublish func(*routing.Document)
}

// NewWithCerts is New with the fleet certificates connected.
func NewWithCerts(opts render.Options, spillDir string, serialOf func() (uint64, string), c Certs) *Publisher {
	p := newPublisher(opts, spillDir)
	p.serialOf, p.onPublish = serialOf, c.OnPublish
	if c.Set != nil {
		p.certs.Store(c.Set)
	}
	return p
}

// SpillDir is the directory bodies are spilled to ("": served from memory).
func (p *Publisher) SpillDir() string { return p.spillDir }

// Renders counts the bodies rendered (cache misses that did the work).
func (p *Publisher) Renders() int64 { return p.renders.Load() }

// newPublisher builds a publisher; spillDir, when not empty, is a private directory
// where rendered bodies are also written for sendfile (files are removed when their
// entry leaves the cache).
func newPublisher(opts render.Options, spillDir string) *Publisher {
	c := newBodyCache(func(r *Rendered) {
		// Unlinking while a poll still has the file open is fine: the open file stays
		// readable until closed (and a poll that finds it gone sends the bytes in memory).
		if r.file != "" {
			os.Remove(r.file)
		}
		r.evict()
	})
	inc, err := render.NewIncremental(opts)
	if err != nil {
		// The node validates its render options at startup (render.Options.Validate).
		panic(fmt.Sprintf("render options: %v", err))
	}
	// The Incremental keeps the per-output state of the Traefik outputs the cache keeps
	// before any other (its output names are the render keys' prefer and selection, as
	// renderNow names them).
	inc.SetPopularity(func(output string) int {
		prefer, groups, _ := strings.Cut(output, "|") // a node name holds no '|'
		if c.admits(renderKey{format: api.FormatTraefik, prefer: prefer, groups: groups}) {
			return 1
		}
		return 0
	})
	return &Publisher{cache: c, render: opts, frags: inc, inflight: map[renderKey]*renderCall{}, spillDir: spillDir,
		lineage: groupLineage{polled: c.polled}}
}

// spill writes b to a new file in the spill directory and returns its path ("" on any
// error: serving from memory is always possible).
func (p *Publisher) spill(b []byte) string {
	if p.spillDir == "" {
		return ""
	}
	f, err := os.CreateTemp(p.spillDir, "body-*")
	if err != nil {
		return ""
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr != nil || cerr != nil {
		os.Remove(f.Name())
		return ""
	}
	return f.Name()
}

// Publish swaps in a new document and wakes long-polls if the revision moved. It
// returns true when the revision changed. The groups known beyond its routes stay
// those last published (PublishNamed).
func (p *Publisher) Publish(doc *routing.Document, now time.Time) bool {
	return p.PublishDelta(doc, nil, now)
}

// PublishDelta is Publish for a document the Deriver made from the last one (delta,
// nil when it did not): the Traefik render of the new snapshot then re-renders the
// changed applications alone (render.Incremental.Render).
func (p *Publisher) PublishDelta(doc *routing.Document, delta *routing.Delta, now time.Time) bool {
	var named map[string]bool
	if prev := p.cur.Load(); prev != nil {
		if n := prev.named.Load(); n != nil {
			named = *n
		}
	}
	return p.PublishNamed(doc, delta, named, now)
}

// PublishNamed is PublishDelta with the groups known beyond the document's routes
// (named: platform.groups' and those applications name; not modified afterwards).
func (p *Publisher) PublishNamed(doc *routing.Document, delta *routing.Delta, named map[string]bool, now time.Time) bool {
	changed := p.swapDoc(doc, delta, named, now)
	if changed && p.onPublish != nil {
		p.onPublish(doc)
	}
	return changed
}

func (p *Publisher) swapDoc(doc *routing.Document, delta *routing.Delta, named map[string]bool, now time.Time) bool {
	p.swap.Lock()
	defer p.swap.Unlock()
	prev := p.cur.Load()
	var mark *storeMark
	if p.serialOf != nil {
		n, e := p.serialOf()
		mark = &storeMark{serial: n, epoch: e}
	}
	if prev != nil && prev.doc.Revision == doc.Revision {
		// Same routing content: keep the snapshot (and its waiters); it is now known to
		// be derived from this serial too.
		if old := prev.mark.Load(); mark != nil && (old == nil || old.epoch != mark.epoch || old.serial < mark.serial) {
			prev.mark.Store(mark)
		}
		prev.named.Store(&named)
		return false
	}
	if delta != nil && (prev == nil || delta.Base != prev.doc || prev.ups == nil) {
		delta = nil // not a patch of what is published
	}
	// How many upstreams each node has, and the routes of each group: for a patch, the
	// last counts with the changed routes' upstreams swapped (hosts and groups do not
	// move), not a walk of every route.
	var ups, groupRoutes map[string]int
	if delta != nil {
		ups, groupRoutes = maps.Clone(prev.ups), prev.groupRoutes
		for _, i := range delta.Changed {
			countUpstreams(ups, delta.Base.Routes[i].Upstreams, -1)
			countUpstreams(ups, doc.Routes[i].Upstreams, 1)
		}
	} else {
		ups = map[string]int{}
		for i := range doc.Routes {
			countUpstreams(ups, doc.Routes[i].Upstreams, 1)
		}
		if doc.API != nil {
			countUpstreams(ups, doc.API.Upstreams, 1)
		}
		_, groupRoutes = doc.Groups()
	}
	p.seq++
	next := p.newSnapshot(doc, now, ups, groupRoutes, delta, p.certs.Load(), p.seq, mark, named)
	if prev != nil {
		p.lineage.superseded(prev.doc)
	}
	p.replace(prev, next)
	return true
}

// PublishCerts swaps in a snapshot with the current document and the new certificate
// set, waking long-polls: the Traefik rendering changed, the document did not.
func (p *Publisher) PublishCerts(set *render.CertSet) {
	p.swap.Lock()
	defer p.swap.Unlock()
	p.certs.Store(set)
	prev := p.cur.Load()
	if prev == nil || (prev.certs != nil && prev.certs.Fingerprint == set.Fingerprint) {
		return
	}
	// The same document: no delta (the render of the new certificates is whole).
	var named map[string]bool
	if n := prev.named.Load(); n != nil {
		named = *n
	}
	p.replace(prev, p.newSnapshot(prev.doc, prev.since, prev.ups, prev.groupRoutes, nil, set, prev.seq, prev.mark.Load(), named))
}

// newSnapshot is the one constructor of a snapshot (under swap): every field a
// snapshot carries is set here, for a new document and for new certificates alike.
func (p *Publisher) newSnapshot(doc *routing.Document, since time.Time, ups, groupRoutes map[string]int,
	delta *routing.Delta, certs *render.CertSet, seq uint64, mark *storeMark, named map[string]bool) *Snapshot {
	next := &Snapshot{doc: doc, since: since, ups: ups, certs: certs, superseded: make(chan struct{}),
		groupRoutes: groupRoutes, delta: delta, lineage: &p.lineage, seq: seq}
	if mark != nil {
		next.mark.Store(mark)
	}
	next.named.Store(&named)
	return next
}

// replace makes next current and wakes the long-polls parked on prev (under swap).
func (p *Publisher) replace(prev, next *Snapshot) {
	p.cur.Store(next)
	if prev != nil {
		close(prev.superseded)
	}
}

// Current is the published snapshot (nil before the first publish).
func (p *Publisher) Current() *Snapshot { return p.cur.Load() }

// RemoveSpill deletes the spilled bodies (after the HTTP server has stopped).
func (p *Publisher) RemoveSpill() {
	if p.spillDir != "" {
		os.RemoveAll(p.spillDir)
	}
}

// Request is one poll's output and who polls it.
type Request struct {
	// Format is api.FormatRoutes or api.FormatTraefik.
	Format string
	// Prefer is a node name ("": none); a node without upstreams in the snapshot
	// changes nothing (it is served as none).
	Prefer string
	// Groups is the ?group= selection, sorted (nil: every group).
	Groups []string
	// Probe adds an HTTP-provider Traefik's applied probe to a Traefik body (nil: none).
	Probe *Probe
	// Ingress names the tracked ingress polling (its report was recorded; "": none):
	// its output is kept among the fleet's (bodyCache).
	Ingress string
}

// Body returns the rendered body of req for snapshot s, from the cache when it can.
// When a revision moves, every parked long-poll wakes at once and asks for the same
// key: one of them renders, the others wait for its result (no thundering herd of
// renders). A body with the applied probe says so (Rendered.Probed).
func (p *Publisher) Body(s *Snapshot, req Request) (*Rendered, error) {
	if req.Prefer != "" && s.Upstreams(req.Prefer) == 0 {
		req.Prefer = "" // a valid name not in the fleet changes nothing
	}
	sel := strings.Join(req.Groups, ",")
	if req.Ingress != "" {
		// What it polls is kept from its first poll on.
		t := trackedPoll{outputs: [2]string{outputOf(renderKey{format: req.Format, prefer: req.Prefer, groups: sel})}, selection: sel}
		if req.Probe != nil && req.Format == api.FormatTraefik {
			t.outputs[1] = outputOf(probeKey(req))
		}
		p.cache.track(req.Ingress, t)
	}
	base, err := p.body(s, req.Prefer, req.Format, req.Groups)
	if err != nil || req.Probe == nil || req.Format != api.FormatTraefik {
		return base, err
	}
	return p.applied(s, base, req)
}

// body is the body of (prefer, format, groups) without a probe.
func (p *Publisher) body(s *Snapshot, prefer, format string, groups []string) (*Rendered, error) {
	revision := s.doc.Revision
	if groups != nil {
		// A selection's body is a function of its own document (its revision), not of
		// the whole fleet's: a change in another group, which wakes its long-polls too,
		// finds it cached instead of rendering, compressing and hashing it again.
		revision = s.ForGroups(groups).Revision
	}
	k := renderKey{revision: revision, prefer: prefer, format: format, groups: strings.Join(groups, ",")}
	if format == api.FormatTraefik && s.certs != nil {
		k.certs = s.certsFingerprint(groups)
	}
	return p.once(s, k, func(spill bool) (*Rendered, error) { return p.renderNow(s, k, groups, spill) })
}

// once returns k's body from the cache, or renders it (one render per key at a time:
// concurrent asks wait for it) and keeps it when the cache admits k.
func (p *Publisher) once(s *Snapshot, k renderKey, render func(spill bool) (*Rendered, error)) (*Rendered, error) {
	if r, ok := p.cache.get(k); ok {
		return r, nil
	}
	p.mu.Lock()
	if c, ok := p.inflight[k]; ok {
		p.mu.Unlock()
		<-c.done
		return c.r, c.err
	}
	c := &renderCall{done: make(chan struct{})}
	p.inflight[k] = c
	p.mu.Unlock()
	c.r, c.err = render(p.cache.admits(k))
	if c.err == nil {
		p.cache.add(k, c.r, s.seq)
	}
	p.mu.Lock()
	delete(p.inflight, k)
	p.mu.Unlock()
	close(c.done)
	return c.r, c.err
}

type renderCall struct {
	done chan struct{}
	r    *Rendered
	err  error
}

// renderNow renders the body of k; spill says whether to write it to the spill
// directory too (not for a body the cache will not keep).
func (p *Publisher) renderNow(s *Snapshot, k renderKey, groups []string, spill bool) (*Rendered, error) {
	p.renders.Add(1)
	prefer, format := k.prefer, k.format
	doc, delta := s.doc, s.delta
	if groups != nil {
		doc, delta = s.forGroupsDelta(groups) // its own revision, before any prefer
	}
	revision := doc.Revision
	var fc *render.FleetCerts
	if s.certs != nil {
		fc = s.certs.FleetCerts
	}
	preferred := func() (*routing.Document, error) {
		if prefer == "" {
			return doc, nil
		}
		return routing.Prefer(doc, prefer)
	}
	var body []byte
	var err error
	switch format {
	case api.FormatRoutes:
		if doc, err = preferred(); err == nil {
			body, err = routing.Marshal(doc)
		}
	case api.FormatTraefik:
		// One output per (prefer, selection), each merging with its own last order. A
		// document the Deriver patched re-renders the changed applications alone,
		// whatever the prefer and selection (render.Incremental.Render). The body is
		// joined here: gzip and the ETag read it whole anyway.
		output := prefer
		if groups != nil {
			output = prefer + "|" + k.groups
		}
		var b render.Body
		b, err = p.frags.Render(render.Request{Doc: doc, Delta: delta, Prefer: prefer, Output: output, Groups: groups, Certs: fc})
		body = b.Bytes()
	default:
		return nil, fmt.Errorf("unknown format %q", format)
	}
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", format, err)
	}
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:16])
	r := &Rendered{body: body, etag: `"` + h + `"`, etagGzip: `"` + h + `-gzip"`, revision: revision}
	if spill {
		r.file, r.spillGz = p.spill(r.body), p.spill
	}
	return r, nil
}

// countUpstreams adds n to the count of each upstream's node, dropping nodes counted to
// zero.
func countUpstreams(counts map[string]int, us []routing.Upstream, n int) {
	for _, u := range us {
		counts[u.Node] += n
		if counts[u.Node] == 0 {
			delete(counts, u.Node)
		}
	}
}
