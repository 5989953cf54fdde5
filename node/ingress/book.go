package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scafo/ingress/internal/bucket"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
)

// localIngress is an ingress whose polls reach this node.
type localIngress struct {
	rep      Report
	inflight int // polls being served (a long-poll: it is there)
	// served is what an HTTP-provider Traefik was answered last (serial, epoch,
	// revision), counted at its next poll.
	served    *Report
	written   Report // as last written to the store (zero: never)
	etag      string
	lastWrite time.Time
	// probe is what its applied probe told (applied.go).
	probe probeState
}

// Book is a node's view of ingress reports: the ones it receives (local) and,
// on demand, the fleet's (the store).
type Book struct {
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

	// Now is the book's clock (time.Now); ViewTimeout bounds one read of the fleet's
	// reports (2s; a test on a loaded machine that counts requests, not time,
	// lengthens it); ViewMax bounds the reports one view reads (MaxObjects; a test
	// lowers it). Set them, if at all, before the book is used.
	Now         func() time.Time
	ViewTimeout time.Duration
	ViewMax     int

	mu    sync.Mutex
	local map[string]*localIngress
	// gone are the last reports of local ingresses dropped from memory (not heard from
	// for lostAfter), so this node keeps showing them lost between store reads; at
	// most maxTracked, the oldest dropped first.
	gone    map[string]Report
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
	rep  Report
	bad  string // why the object was skipped
}

// Options is what the book is built from.
type Options struct {
	Store store.Store
	Log   *slog.Logger
	// Self is this node's name (a report's Node).
	Self   string
	Config Config
	// Known returns the store serial and epoch this node has (reported serials above
	// it are clamped); Current returns the published revision and the serial it is
	// known to be derived from ("" before the first pass).
	Known   func() (uint64, string)
	Current func() (revision string, serial uint64)
	// Foreign (nil: never) says the store is not the one this node served; nothing
	// is written to it.
	Foreign func() bool
	// GroupRevision (nil: every selection is served the whole document's revision)
	// returns the revision published to a ?group= selection.
	GroupRevision func(groups string) string
}

// New builds the book.
func New(o Options) *Book {
	return &Book{
		st: o.Store, log: o.Log, self: o.Self,
		lostAfter: time.Duration(o.Config.LostAfter), forgetAfter: time.Duration(o.Config.ForgetAfter), maxTracked: o.Config.MaxTracked,
		known: o.Known, current: o.Current, foreign: o.Foreign, groupRevision: o.GroupRevision,
		Now: time.Now, ViewTimeout: defaultViewTimeout, ViewMax: MaxObjects,
		local: map[string]*localIngress{}, gone: map[string]Report{}, changed: make(chan struct{}),
		budget: bucket.New(writeRate, writeBurst), refused: map[string]time.Time{},
		view:    map[string]viewObject{},
		waiters: make(chan struct{}, maxWaiters),
		waiting: map[string]int{},
	}
}

// Poll is a poll's report being served (see Begin and End).
type Poll struct {
	name string
	kind string
}

// Begin marks the ingress of a parsed report as polling; why says why it was not
// recorded ("" when it was).
func (b *Book) Begin(rep Report) (p *Poll, why string) {
	now := b.Now()
	rep.Node = b.self
	if Applies(rep.Kind) {
		// A serial this node has not reached is believed only up to its own: it may
		// have been applied from a node a tick ahead, or be made up.
		known, _ := b.known()
		rep.Serial = min(rep.Serial, known)
	}
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
	if rep.Kind == api.KindHTTP && rep.Probe {
		// It declares an applied probe: it holds what its callback said it serves.
		rep.Serial, rep.Epoch, rep.Revision = li.probe.held()
	} else if rep.Kind == api.KindHTTP {
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
	return &Poll{name: rep.Name, kind: rep.Kind}, ""
}

// Mark is what a 200 of the routing endpoints served: the store serial and epoch
// of its snapshot and the revision of its body.
type Mark struct {
	Serial   uint64
	Epoch    string
	Revision string
	// Probed: the body carried the applied probe (render.WithAppliedProbe).
	Probed bool
}

// End closes a poll begun with a report. served is what a 200 answer carried (nil for
// any other answer): for an HTTP-provider Traefik, what it is served now.
func (b *Book) End(p *Poll, served *Mark) {
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
	li.rep.Seen = b.Now()
	if p.kind == api.KindHTTP && served != nil {
		li.served = &Report{Serial: served.Serial, Epoch: served.Epoch, Revision: served.Revision}
		if served.Probed {
			li.probe.served(*served)
		}
	}
}

// ReportHeaders are the report headers of a poll, as sent ("" for one absent): the
// HTTP layer reads them (node/httpapi), ParseReport validates them.
type ReportHeaders struct {
	Name            string // api.HeaderIngress
	Kind            string // api.HeaderIngressKind
	AppliedSerial   string // api.HeaderAppliedSerial
	AppliedEpoch    string // api.HeaderAppliedEpoch
	AppliedRevision string // api.HeaderAppliedRevision
	Probe           bool   // api.HeaderAppliedProbe is present (its URL validated by the caller)
}

// ParseReport validates a poll's report headers; every error names the header. Begin
// fills in this node's name and believes a plugin's serial only up to its own.
func ParseReport(h ReportHeaders) (Report, error) {
	rep := Report{Name: h.Name}
	if err := ValidName(rep.Name); err != nil {
		return rep, fmt.Errorf("%s: %v", api.HeaderIngress, err)
	}
	switch h.Kind {
	case "", api.KindHTTP:
		rep.Kind = api.KindHTTP
	case api.KindPlugin, api.KindFront:
		rep.Kind = h.Kind
	default:
		return rep, fmt.Errorf("%s: %.20q: want plugin, front or http", api.HeaderIngressKind, h.Kind)
	}
	if rep.Kind == api.KindHTTP {
		rep.Probe = h.Probe
		if h.AppliedSerial != "" || h.AppliedRevision != "" {
			return rep, fmt.Errorf("%s/%s: only a plugin reports what it applied (send %s: plugin)", api.HeaderAppliedSerial, api.HeaderAppliedRevision, api.HeaderIngressKind)
		}
		return rep, nil
	}
	if v := h.AppliedSerial; v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return rep, fmt.Errorf("%s: %.24q: want a decimal serial", api.HeaderAppliedSerial, v)
		}
		rep.Serial = n
	}
	if v := h.AppliedEpoch; v != "" {
		if !isHex(v, 16) {
			return rep, fmt.Errorf("%s: %.24q: want 16 lowercase hex characters", api.HeaderAppliedEpoch, v)
		}
		rep.Epoch = v
	}
	if v := h.AppliedRevision; v != "" {
		if !isHex(v, 32) {
			return rep, fmt.Errorf("%s: %.40q: want 32 lowercase hex characters", api.HeaderAppliedRevision, v)
		}
		rep.Revision = v
	}
	return rep, nil
}

// Refuse logs that the report of a poll from remote, naming the ingress name (as sent),
// was not recorded, and why, once a minute per header at fault (the caller answers it:
// the poll is still served, a report never changes routing).
func (b *Book) Refuse(remote, name, why string) {
	now := b.Now()
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
		b.log.Warn("ingress report refused (the poll is served)", "ingress", name, "remote", remote, "reason", why)
	}
}

// RefusePoll records that a poll naming the ingress name was refused (answered 4xx
// instead of a configuration), or served without its report recorded, and why; the
// caller has checked the poll's credential (the ingress or admin token: the same trust
// as a report's). Only an ingress this node tracks is marked (a name never polled here
// costs nothing): it is listed "refused" with why until a poll of it is recorded again
// (Begin). A refusal does not count as hearing from it: its seen time stays that of its
// last recorded poll, so an ingress that stopped polling goes lost on time even while a
// holder of the ingress token keeps sending refused polls under its name (hostile
// review 2), and its listing keeps the reason. It reports whether the name was tracked.
func (b *Book) RefusePoll(name, why string) bool {
	if len(why) > MaxRefusedLen {
		why = strings.ToValidUTF8(why[:MaxRefusedLen-3], "") + "..."
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	li, ok := b.local[name]
	if !ok {
		return false
	}
	prev := li.rep
	li.rep.Refused = why
	if !prev.sameState(li.rep) {
		b.notifyLocked()
	}
	return true
}

func (b *Book) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Flush is one step of the book at now (the node schedules it every MinWriteGap): it
// writes the local reports that changed, or whose `seen` is due a refresh, within the
// write budget; and drops from memory the ingresses not seen for lostAfter (their
// objects stay until forgetAfter).
func (b *Book) Flush(ctx context.Context, now time.Time) {
	if b.foreign != nil && b.foreign() {
		return // a foreign store is written nothing, reports included
	}
	refresh := b.lostAfter / 4
	type job struct {
		rep  Report
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
		if now.Sub(li.lastWrite) < MinWriteGap {
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

func (b *Book) rememberGoneLocked(rep Report) {
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
func (b *Book) write(ctx context.Context, rep Report, etag string) {
	key := Prefix + rep.Name + ".json"
	rep.Seen = rep.Seen.UTC().Truncate(time.Millisecond)
	val, err := jsonx.Marshal(rep)
	if err != nil {
		return
	}
	cond := store.Condition{IfMatch: etag, IfNoneMatch: etag == ""}
	newTag, err := b.st.Put(ctx, key, val, cond)
	if errors.Is(err, store.ErrPreconditionFailed) {
		obj, gerr := b.st.Get(ctx, key)
		var other Report
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
