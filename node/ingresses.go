package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/internal/bucket"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/routing"
)

// Ingress reports (docs/design.md §11): every ingress says, on its polls, what it holds.
//
//   - The provider plugin sends X-Scafo-Ingress (its name), X-Scafo-Ingress-Kind:
//     plugin, and the serial, epoch and revision of the configuration it applied
//     (X-Scafo-Applied-Serial, -Epoch, -Revision; absent before it applied one).
//   - A Traefik on the HTTP provider sends X-Scafo-Ingress from its `headers` option
//     and nothing else: the node records what it served it (the serial and revision of
//     a 200), and counts it once that Traefik polls again (its next poll comes a
//     pollInterval later, after it took the answer): "served", never "applied".
//
// A report is not routing state: it is kept in ingresses/<name>.json, a key the
// reconcile pass never reads, written without a serial bump, so no report ever moves
// the serial or the revision. The node that receives an ingress's polls writes its
// object when the report changes, and at most every lostAfter/4 to refresh `seen`
// (a heartbeat per ingress); never more often than ingressMinWriteGap per ingress nor
// ingressWriteRate per node. Any node lists ingresses/ to answer for the fleet, only
// when asked (status, a write waiting with ?wait=applied), at most once per
// ingressViewMaxAge (statusViewMaxAge for status), and GETs the reports whose etag
// moved, viewReadConcurrency at once; a read cut short keeps what it got.
//
// Names are not authenticated beyond the ingress token, which every ingress shares: a
// holder can report under any name (another ingress's included) and invent names. So
// names are bounded (ingressNameRE, ≤ 63 bytes), a node tracks at most
// ingresses.maxTracked names at once (new names beyond are refused; a name not seen
// for lostAfter frees its place), a reported serial above the node's own is clamped
// to it, and a report never changes what is served.

const (
	prefixIngresses = "ingresses/"

	// ingressMinWriteGap: an ingress's object is rewritten at most this often.
	ingressMinWriteGap = 250 * time.Millisecond
	// ingressWriteRate/Burst bound this node's report writes, whatever the reports.
	ingressWriteRate  = 20
	ingressWriteBurst = 40
	// ingressViewMaxAge: a fleet view younger than this is reused by waiters.
	ingressViewMaxAge = 200 * time.Millisecond
	// statusViewMaxAge: a fleet view younger than this is reused by /v1/status.
	statusViewMaxAge = time.Second
	// maxIngressObjects bounds the fleet view read from the store.
	maxIngressObjects = 4096
	// ingressViewTimeout bounds one read of the fleet's reports.
	ingressViewTimeout = 2 * time.Second
	// viewReadConcurrency bounds the GETs of one read of the fleet's reports in flight.
	viewReadConcurrency = 16
	// maxWaiters bounds the writes waiting with ?wait=applied at once on a node.
	maxWaiters = 64
	// maxApplyWait caps ?timeout= of wait=applied; defaultApplyWait is its default.
	maxApplyWait     = 60 * time.Second
	defaultApplyWait = 10 * time.Second
)

// validIngressName: 1..63 bytes of [a-z0-9.-], starting and ending with a letter or
// digit (a host name's first label, or a whole short host name).
func validIngressName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%d bytes: want 1..63", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || (c == '-' || c == '.') && i > 0 && i < len(s)-1) {
			return fmt.Errorf("%q: want [a-z0-9.-], starting and ending with a letter or digit", s)
		}
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ingressReport is one ingress's object in the store (ingresses/<name>.json).
type ingressReport struct {
	Name string `json:"name"`
	// Kind is "plugin" (Serial/Revision applied) or "http" (served).
	Kind string `json:"kind"`
	// Node is the node whose polls it reported on (the node it polls).
	Node string `json:"node"`
	// Serial, Epoch and Revision name the configuration it holds; Serial 0: none yet.
	Serial   uint64 `json:"serial"`
	Epoch    string `json:"epoch,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Groups is the ?group= selection its polls ask for, canonical (sorted,
	// comma-separated; "" for every group): Revision is that selection's.
	Groups string `json:"groups,omitempty"`
	// Seen is when that node last heard from it.
	Seen time.Time `json:"seen"`
}

func (r ingressReport) sameState(o ingressReport) bool {
	return r.Name == o.Name && r.Kind == o.Kind && r.Node == o.Node && r.Serial == o.Serial &&
		r.Epoch == o.Epoch && r.Revision == o.Revision && r.Groups == o.Groups
}

// localIngress is an ingress whose polls reach this node.
type localIngress struct {
	rep      ingressReport
	inflight int // polls being served (a long-poll: it is there)
	// served is what an HTTP-provider Traefik was answered last (serial, epoch,
	// revision), counted at its next poll.
	served    *ingressReport
	written   ingressReport // as last written to the store (zero: never)
	etag      string
	lastWrite time.Time
}

// ingressBook is a node's view of ingress reports: the ones it receives (local) and,
// on demand, the fleet's (the store).
type ingressBook struct {
	st          store.Store
	log         *slog.Logger
	self        string
	lostAfter   time.Duration
	forgetAfter time.Duration
	maxTracked  int
	// known returns the store serial and epoch this node has (reported serials above
	// it are clamped); current returns the published revision and the serial it is
	// known to be derived from ("" before the first pass); groupRevision the revision
	// published to a ?group= selection (nil: the whole document's).
	known         func() (uint64, string)
	current       func() (revision string, serial uint64)
	groupRevision func(groups string) string
	// foreign: the store is not the one this node served; nothing is written to it.
	foreign func() bool
	now     func() time.Time
	// viewTimeout bounds one read of the fleet's reports (ingressViewTimeout; a test on
	// a loaded machine that counts requests, not time, lengthens it).
	viewTimeout time.Duration
	// viewMax bounds the reports one view reads (maxIngressObjects; a test lowers it).
	viewMax int

	mu    sync.Mutex
	local map[string]*localIngress
	// gone are the last reports of local ingresses dropped from memory (not heard from
	// for lostAfter), so this node keeps showing them lost between store reads; at
	// most maxTracked, the oldest dropped first.
	gone    map[string]ingressReport
	changed chan struct{}        // closed and replaced when a local report changes
	budget  bucket.Bucket        // this node's report writes
	refused map[string]time.Time // reasons logged lately, to log each once a minute

	viewMu  sync.Mutex // one store read at a time; waiters share it
	view    map[string]viewObject
	viewAt  time.Time
	viewErr error

	waiters chan struct{}  // a slot per write waiting with ?wait=applied
	waiting map[string]int // waiting writes by account (application tokens), under mu
}

type viewObject struct {
	etag string
	rep  ingressReport
	bad  string // why the object was skipped
}

// newIngressBook builds the book; foreign and groupRevision may be nil (never foreign;
// every selection is served the whole document's revision).
func newIngressBook(st store.Store, log *slog.Logger, self string, cfg IngressesConfig,
	known func() (uint64, string), current func() (string, uint64),
	foreign func() bool, groupRevision func(groups string) string) *ingressBook {
	return &ingressBook{
		st: st, log: log, self: self,
		lostAfter: time.Duration(cfg.LostAfter), forgetAfter: time.Duration(cfg.ForgetAfter), maxTracked: cfg.MaxTracked,
		known: known, current: current, foreign: foreign, groupRevision: groupRevision, now: time.Now, viewTimeout: ingressViewTimeout, viewMax: maxIngressObjects,
		local: map[string]*localIngress{}, gone: map[string]ingressReport{}, changed: make(chan struct{}),
		budget: bucket.New(ingressWriteRate, ingressWriteBurst), refused: map[string]time.Time{},
		view:    map[string]viewObject{},
		waiters: make(chan struct{}, maxWaiters),
		waiting: map[string]int{},
	}
}

// pollReport is a poll's report being served (see begin and end).
type pollReport struct {
	name string
	kind string
}

// readReport reads the report a poll carries (nil when it carries none, or a refused
// one), begins it and says in the answer whether it was recorded.
func (b *ingressBook) readReport(w http.ResponseWriter, r *http.Request) *pollReport {
	if r.Header.Get(api.HeaderIngress) == "" {
		return nil
	}
	rep, err := b.parse(r.Header)
	if err != nil {
		b.refuse(w, r, err.Error())
		return nil
	}
	// Its revision is its selection's: a write elsewhere moves no byte it serves.
	if vals := r.URL.Query()["group"]; len(vals) == 1 {
		if gs, err := routing.ParseGroups(vals[0]); err == nil {
			rep.Groups = strings.Join(gs, ",")
		}
	}
	p, why := b.begin(rep)
	if why != "" {
		b.refuse(w, r, why)
		return nil
	}
	w.Header().Set(api.HeaderIngressReport, "recorded")
	return p
}

// begin marks the ingress of a parsed report as polling; why says why it was not
// recorded ("" when it was).
func (b *ingressBook) begin(rep ingressReport) (p *pollReport, why string) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	li, ok := b.local[rep.Name]
	if !ok {
		if len(b.local) >= b.maxTracked {
			return nil, fmt.Sprintf("this node tracks %d ingresses already (ingresses.maxTracked); a name frees its place once not seen for ingresses.lostAfter", b.maxTracked)
		}
		li = &localIngress{}
		b.local[rep.Name] = li
		delete(b.gone, rep.Name)
	}
	prev := li.rep
	if rep.Kind == api.KindHTTP {
		// What it was served before this poll, it has taken.
		if li.served != nil {
			rep.Serial, rep.Epoch, rep.Revision = li.served.Serial, li.served.Epoch, li.served.Revision
		} else if prev.Kind == api.KindHTTP {
			rep.Serial, rep.Epoch, rep.Revision = prev.Serial, prev.Epoch, prev.Revision
		}
	}
	rep.Seen = now
	li.rep = rep
	li.inflight++
	if !prev.sameState(rep) {
		b.notifyLocked()
	}
	return &pollReport{name: rep.Name, kind: rep.Kind}, ""
}

// servedMark is what a 200 of the routing endpoints served: the store serial and epoch
// of its snapshot and the revision of its body.
type servedMark struct {
	serial   uint64
	epoch    string
	revision string
}

// end closes a poll begun with a report: for an HTTP-provider Traefik, a 200 is what
// it is served now (served: what the answer carried).
func (b *ingressBook) end(p *pollReport, code int, served servedMark) {
	if p == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	li, ok := b.local[p.name]
	if !ok {
		return
	}
	li.inflight--
	li.rep.Seen = b.now()
	if p.kind == api.KindHTTP && code == http.StatusOK {
		li.served = &ingressReport{Serial: served.serial, Epoch: served.epoch, Revision: served.revision}
	}
}

// parse validates a poll's report headers; every error names the header.
func (b *ingressBook) parse(h http.Header) (ingressReport, error) {
	rep := ingressReport{Name: h.Get(api.HeaderIngress), Node: b.self}
	if err := validIngressName(rep.Name); err != nil {
		return rep, fmt.Errorf("%s: %v", api.HeaderIngress, err)
	}
	switch k := h.Get(api.HeaderIngressKind); k {
	case "", api.KindHTTP:
		rep.Kind = api.KindHTTP
	case api.KindPlugin:
		rep.Kind = api.KindPlugin
	default:
		return rep, fmt.Errorf("%s: %.20q: want plugin or http", api.HeaderIngressKind, k)
	}
	if rep.Kind == api.KindHTTP {
		if h.Get(api.HeaderAppliedSerial) != "" || h.Get(api.HeaderAppliedRevision) != "" {
			return rep, fmt.Errorf("%s/%s: only a plugin reports what it applied (send %s: plugin)", api.HeaderAppliedSerial, api.HeaderAppliedRevision, api.HeaderIngressKind)
		}
		return rep, nil
	}
	if v := h.Get(api.HeaderAppliedSerial); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return rep, fmt.Errorf("%s: %.24q: want a decimal serial", api.HeaderAppliedSerial, v)
		}
		// A serial this node has not reached is believed only up to its own: it may
		// have been applied from a node a tick ahead, or be made up.
		known, _ := b.known()
		rep.Serial = min(n, known)
	}
	if v := h.Get(api.HeaderAppliedEpoch); v != "" {
		if !isHex(v, 16) {
			return rep, fmt.Errorf("%s: %.24q: want 16 lowercase hex characters", api.HeaderAppliedEpoch, v)
		}
		rep.Epoch = v
	}
	if v := h.Get(api.HeaderAppliedRevision); v != "" {
		if !isHex(v, 32) {
			return rep, fmt.Errorf("%s: %.40q: want 32 lowercase hex characters", api.HeaderAppliedRevision, v)
		}
		rep.Revision = v
	}
	return rep, nil
}

// refuse answers that a report was not recorded (the poll is still served: a report
// never changes routing) and logs the reason once a minute.
func (b *ingressBook) refuse(w http.ResponseWriter, r *http.Request, why string) {
	w.Header().Set(api.HeaderIngressReport, "refused: "+why)
	now := b.now()
	// One line a minute per header at fault (the reason may quote what was sent: a
	// flood of made-up names must not become a flood of lines).
	key, _, _ := strings.Cut(why, ":")
	b.mu.Lock()
	last, ok := b.refused[key]
	if !ok && len(b.refused) > 64 {
		clear(b.refused)
	}
	log := !ok || now.Sub(last) > time.Minute
	if log {
		b.refused[key] = now
	}
	b.mu.Unlock()
	if log {
		b.log.Warn("ingress report refused (the poll is served)", "remote", r.RemoteAddr, "reason", why)
	}
}

func (b *ingressBook) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// run writes local reports to the store until ctx ends.
func (b *ingressBook) run(ctx context.Context) {
	t := time.NewTicker(ingressMinWriteGap)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.flush(ctx)
	}
}

// flush writes the local reports that changed, or whose `seen` is due a refresh, within
// the write budget; and drops from memory the ingresses not seen for lostAfter (their
// objects stay until forgetAfter).
func (b *ingressBook) flush(ctx context.Context) {
	if b.foreign != nil && b.foreign() {
		return // a foreign store is written nothing, reports included
	}
	now := b.now()
	refresh := b.lostAfter / 4
	type job struct {
		rep  ingressReport
		etag string
	}
	var jobs []job
	b.mu.Lock()
	for _, name := range slices.Sorted(mapKeys(b.local)) {
		li := b.local[name]
		if li.inflight > 0 {
			li.rep.Seen = now
		}
		due := !li.rep.sameState(li.written) || li.rep.Seen.Sub(li.written.Seen) >= refresh
		if !due {
			if now.Sub(li.rep.Seen) > b.lostAfter {
				delete(b.local, name)
				b.rememberGoneLocked(li.rep)
			}
			continue
		}
		if now.Sub(li.lastWrite) < ingressMinWriteGap {
			continue
		}
		if ok, _ := b.budget.Take(now); !ok {
			continue
		}
		li.lastWrite = now
		jobs = append(jobs, job{rep: li.rep, etag: li.etag})
	}
	b.mu.Unlock()
	for _, j := range jobs {
		b.write(ctx, j.rep, j.etag)
	}
}

func (b *ingressBook) rememberGoneLocked(rep ingressReport) {
	if len(b.gone) >= b.maxTracked {
		oldest := ""
		for k, r := range b.gone {
			if oldest == "" || r.Seen.Before(b.gone[oldest].Seen) {
				oldest = k
			}
		}
		delete(b.gone, oldest)
	}
	b.gone[rep.Name] = rep
}

// write stores one report: If-Match this node's last write of it (create-only before
// one). Losing means another node (or a restarted this one) wrote it since: when that
// report is newer, the ingress polls elsewhere now and this node forgets it.
func (b *ingressBook) write(ctx context.Context, rep ingressReport, etag string) {
	key := prefixIngresses + rep.Name + ".json"
	rep.Seen = rep.Seen.UTC().Truncate(time.Millisecond)
	val, err := jsonx.Marshal(rep)
	if err != nil {
		return
	}
	cond := store.Condition{IfMatch: etag, IfNoneMatch: etag == ""}
	newTag, err := b.st.Put(ctx, key, val, cond)
	if errors.Is(err, store.ErrPreconditionFailed) {
		obj, gerr := b.st.Get(ctx, key)
		var other ingressReport
		b.mu.Lock()
		defer b.mu.Unlock()
		li, ok := b.local[rep.Name]
		if !ok {
			return
		}
		switch {
		case errors.Is(gerr, store.ErrNotFound):
			li.etag = ""
		case gerr != nil:
		case json.Unmarshal(obj.Value, &other) == nil && other.Node != b.self && other.Seen.After(li.rep.Seen):
			delete(b.local, rep.Name) // it polls another node now
		default:
			li.etag = obj.ETag // take it over at the next flush
		}
		return
	}
	if err != nil {
		b.log.Debug("writing ingress report", "ingress", rep.Name, "err", err)
		return
	}
	b.mu.Lock()
	if li, ok := b.local[rep.Name]; ok {
		li.written, li.etag = rep, newTag
	}
	b.mu.Unlock()
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ingressView is the fleet's ingresses as one node sees them.
type ingressView struct {
	Ingresses []api.Ingress `json:"ingresses"`
	Skipped   []api.Skipped `json:"skipped,omitempty"`
	// Error: the store could not be listed; only this node's own ingresses are shown.
	Error string `json:"error,omitempty"`
	// held is each ingress's report (held[i] is Ingresses[i]'s), for waiters.
	held []ingressReport
}

// fleet returns every ingress: the store's objects (read at most every maxAge),
// overlaid with what this node heard more recently, sorted by name.
func (b *ingressBook) fleet(ctx context.Context, maxAge time.Duration) ingressView {
	objs, skipped, verr := b.readView(ctx, maxAge)
	reps := map[string]ingressReport{}
	for _, o := range objs {
		reps[o.Name] = o
	}
	b.mu.Lock()
	now := b.now()
	for name, rep := range b.gone {
		switch o, ok := reps[name]; {
		case now.Sub(rep.Seen) > b.forgetAfter:
			delete(b.gone, name)
		case !ok || rep.Seen.After(o.Seen):
			reps[name] = rep
		}
	}
	for name, li := range b.local {
		rep := li.rep
		if li.inflight > 0 {
			rep.Seen = now
		}
		if o, ok := reps[name]; !ok || !o.Seen.After(rep.Seen) {
			reps[name] = rep
		}
	}
	b.mu.Unlock()
	v := ingressView{Ingresses: []api.Ingress{}, Skipped: skipped}
	if verr != nil {
		v.Error = verr.Error()
	}
	knownSerial, knownEpoch := b.known()
	full, _ := b.current()
	revs := map[string]string{} // by selection: reports share a few
	for _, name := range slices.Sorted(mapKeys(reps)) {
		rep := reps[name]
		rev, ok := revs[rep.Groups]
		if !ok {
			rev = b.revisionFor(rep, full)
			revs[rep.Groups] = rev
		}
		st := api.Ingress{Name: name, Kind: rep.Kind, Node: rep.Node, Groups: rep.Groups, Seen: rep.Seen.UTC(),
			Age: now.Sub(rep.Seen).Round(time.Second).Seconds()}
		held := &api.Held{Serial: rep.Serial, Revision: rep.Revision}
		if rep.Kind == api.KindPlugin {
			st.Applied = held
		} else {
			st.Served = held
		}
		sameEpoch := rep.Epoch == "" || knownEpoch == "" || rep.Epoch == knownEpoch
		switch {
		case rep.Revision != "" && rep.Revision == rev && sameEpoch:
			// The content this node publishes now: whatever serial it was derived at.
		case !sameEpoch || rep.Serial == 0:
			st.Behind = max(knownSerial, 1)
		case rep.Serial < knownSerial:
			st.Behind = knownSerial - rep.Serial
		}
		switch {
		case now.Sub(rep.Seen) > b.lostAfter:
			st.State = "lost"
		case st.Behind > 0:
			st.State = "behind"
		default:
			st.State = "current"
		}
		v.Ingresses = append(v.Ingresses, st)
		v.held = append(v.held, rep)
	}
	return v
}

// revisionFor is the revision published to what rep's ingress polls: full (the whole
// document's) or its group selection's.
func (b *ingressBook) revisionFor(rep ingressReport, full string) string {
	if rep.Groups == "" || b.groupRevision == nil {
		return full
	}
	return b.groupRevision(rep.Groups)
}

// readView lists ingresses/ and reads the objects whose etag moved, at most once per
// maxAge (callers share a read); objects not seen for forgetAfter are deleted.
func (b *ingressBook) readView(ctx context.Context, maxAge time.Duration) ([]ingressReport, []api.Skipped, error) {
	b.viewMu.Lock()
	defer b.viewMu.Unlock()
	if !b.viewAt.IsZero() && b.now().Sub(b.viewAt) < maxAge {
		return b.viewList()
	}
	// A hung store delays a status answer (and whoever shares this read) by this much
	// at most; the answer then says the reports could not be read.
	ctx, cancel := context.WithTimeout(ctx, b.viewTimeout)
	defer cancel()
	entries, err := b.st.List(ctx, prefixIngresses)
	if err != nil {
		b.viewErr = fmt.Errorf("listing %s: %w", prefixIngresses, err)
		b.viewAt = b.now()
		return b.viewList()
	}
	now := b.now()
	foreign := b.foreign != nil && b.foreign()
	// More reports than a view reads (a flood of made-up names, or a fleet past the
	// bound): the most recently written are read (a live ingress's report is rewritten
	// at least every lostAfter/4; key order would let names such as "0000" push every
	// real one out), the view is marked partial, so ?wait=applied never answers
	// "applied" on it and status says so, and the reports left out that no one has
	// written for forgetAfter are deleted by their LIST time, without a read.
	var cutErr error
	if len(entries) > b.viewMax {
		slices.SortStableFunc(entries, func(x, y store.Entry) int { return y.ModTime.Compare(x.ModTime) })
		rest := entries[b.viewMax:]
		entries = entries[:b.viewMax]
		cutErr = fmt.Errorf("partial view: the store holds %d ingress reports, more than the %d a view reads; the %d written least recently are not known",
			len(entries)+len(rest), b.viewMax, len(rest))
		for _, e := range rest {
			if !foreign && !e.ModTime.IsZero() && now.Sub(e.ModTime) > b.forgetAfter {
				if err := b.st.Delete(ctx, e.Key, e.ETag); err == nil || errors.Is(err, store.ErrNotFound) {
					b.log.Info("forgot an ingress report past the view's bound", "key", e.Key, "written", e.ModTime)
				}
			}
		}
	}
	next := make(map[string]viewObject, len(entries))
	var changed []store.Entry
	for _, e := range entries {
		if old, ok := b.view[e.Key]; ok && old.etag == e.ETag {
			next[e.Key] = old
			continue
		}
		changed = append(changed, e)
	}
	read, err := b.readReports(ctx, changed, now.Add(b.lostAfter))
	maps.Copy(next, read)
	if err != nil {
		// Keep what was read (and the last known state of the rest): the next read GETs
		// only what is still missing, so a cold view of many reports from a slow store
		// completes over a few reads instead of starting over every time. The view is
		// marked partial meanwhile.
		for _, e := range changed {
			if _, ok := next[e.Key]; !ok {
				if old, ok := b.view[e.Key]; ok {
					next[e.Key] = old
				}
			}
		}
		b.view, b.viewAt, b.viewErr = next, now, errors.Join(err, cutErr)
		return b.viewList()
	}
	for k, o := range next {
		if o.bad == "" && now.Sub(o.rep.Seen) > b.forgetAfter && !foreign {
			if err := b.st.Delete(ctx, k, o.etag); err == nil || errors.Is(err, store.ErrNotFound) {
				b.log.Info("forgot an ingress", "ingress", o.rep.Name, "seen", o.rep.Seen)
			}
			delete(next, k)
		}
	}
	b.view, b.viewAt, b.viewErr = next, now, cutErr
	return b.viewList()
}

// readReports GETs entries, at most viewReadConcurrency at once (one after another, a
// store 25 ms away reads 80 reports within ingressViewTimeout; 16 at once, 1 280). It
// returns the objects read (those deleted since the LIST left out) and, when a GET
// failed, the first error; it then starts no more GETs.
func (b *ingressBook) readReports(ctx context.Context, entries []store.Entry, horizon time.Time) (map[string]viewObject, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		read     = make(map[string]viewObject, len(entries))
		firstErr error
		wg       sync.WaitGroup
	)
	slots := make(chan struct{}, viewReadConcurrency)
	started := 0
	for _, e := range entries {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			obj, err := b.st.Get(ctx, e.Key)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				if firstErr == nil {
					firstErr = fmt.Errorf("reading %s: %w", e.Key, err)
					cancel()
				}
			default:
				read[e.Key] = decodeIngress(obj, horizon)
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && started < len(entries) {
		firstErr = fmt.Errorf("reading %s: %w", prefixIngresses, ctx.Err())
	}
	return read, firstErr
}

func (b *ingressBook) viewList() ([]ingressReport, []api.Skipped, error) {
	var reps []ingressReport
	var skipped []api.Skipped
	for _, k := range slices.Sorted(mapKeys(b.view)) {
		o := b.view[k]
		if o.bad != "" {
			skipped = append(skipped, api.Skipped{Object: k, Reason: o.bad})
			continue
		}
		reps = append(reps, o.rep)
	}
	return reps, skipped, b.viewErr
}

// decodeIngress checks one stored report; a malformed one is skipped with the reason
// (it hides nothing else). A report seen after horizon (this node's clock plus
// lostAfter) is skipped too: it would never be lost nor forgotten, and every write
// with ?wait=applied would wait for it.
func decodeIngress(o store.Object, horizon time.Time) viewObject {
	name := strings.TrimSuffix(strings.TrimPrefix(o.Key, prefixIngresses), ".json")
	var rep ingressReport
	bad := ""
	switch {
	case !strings.HasSuffix(o.Key, ".json"):
		bad = "not a .json object"
	case json.Unmarshal(o.Value, &rep) != nil:
		bad = "malformed JSON"
	case rep.Name != name:
		bad = fmt.Sprintf("name %.70q does not match key", rep.Name)
	case validIngressName(rep.Name) != nil:
		bad = "invalid name"
	case rep.Kind != api.KindPlugin && rep.Kind != api.KindHTTP:
		bad = fmt.Sprintf("kind %.20q: want plugin or http", rep.Kind)
	case rep.Seen.IsZero():
		bad = "no seen time"
	case rep.Seen.After(horizon):
		bad = fmt.Sprintf("seen %s, in the future (beyond this node's clock plus ingresses.lostAfter)", rep.Seen.UTC().Format(time.RFC3339))
	case rep.Revision != "" && !isHex(rep.Revision, 32):
		bad = "malformed revision"
	case rep.Groups != "" && !canonicalGroups(rep.Groups):
		bad = fmt.Sprintf("groups %.70q: want a ?group= selection, sorted", rep.Groups)
	}
	return viewObject{etag: o.ETag, rep: rep, bad: bad}
}

// canonicalGroups reports whether s is a valid group selection in its canonical spelling.
func canonicalGroups(s string) bool {
	gs, err := routing.ParseGroups(s)
	return err == nil && strings.Join(gs, ",") == s
}

// publishedMark is the published revision and the store serial it is known to be
// derived from ("", 0 before the first pass).
func (s *Server) publishedMark() (string, uint64) {
	snap := s.pub.Current()
	if snap == nil {
		return "", 0
	}
	n, _, _ := snap.Mark()
	return snap.Doc().Revision, n
}

// ingressCollector exports the fleet's ingresses at scrape time, from a view read at
// most once per heartbeat interval (a LIST of ingresses/, and a GET per changed
// report): every node exports the whole fleet, so aggregate with max, not sum.
type ingressCollector struct{ s *Server }

var (
	ingressesDesc = prometheus.NewDesc("scafo_ingresses",
		"Ingresses by state: current (holds what this node publishes), behind (reports an older serial), lost (not heard from for ingresses.lostAfter).",
		[]string{"state"}, nil)
	ingressAgeDesc = prometheus.NewDesc("scafo_ingress_oldest_report_seconds",
		"Age of the oldest report of a live (not lost) ingress; 0 when there is none.", nil, nil)
)

func (c ingressCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ingressesDesc
	ch <- ingressAgeDesc
}

func (c ingressCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v := c.s.ingresses.fleet(ctx, time.Duration(c.s.cfg.Reconcile.Heartbeat))
	counts := map[string]int{"current": 0, "behind": 0, "lost": 0}
	oldest := 0.0
	for _, in := range v.Ingresses {
		counts[in.State]++
		if in.State != "lost" {
			oldest = max(oldest, in.Age)
		}
	}
	for _, st := range []string{"current", "behind", "lost"} {
		ch <- prometheus.MustNewConstMetric(ingressesDesc, prometheus.GaugeValue, float64(counts[st]), st)
	}
	ch <- prometheus.MustNewConstMetric(ingressAgeDesc, prometheus.GaugeValue, oldest)
}
