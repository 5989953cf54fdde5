// Package fleetwrite is the node's write domain: every change to the fleet's state
// (applications, claims, path maps, tokens, this node's instances) is validated,
// CAS-written, audited and announced (serial bump) here, in one place, without HTTP.
//
// It knows nothing of HTTP: the node's handlers decode a request, call one method with
// the caller's Actor, and map the typed error (ErrInvalid, ErrConflict, ErrForbidden,
// ErrPrecondition, ErrNotFound, store.ErrUnavailable, ErrForeign) to a status. As seed
// 000 puts it for path maps: PublishPaths is the only writer of a claim's paths.
package fleetwrite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
)

// Config is what the write domain needs to know about its node.
type Config struct {
	// Node is this node's name (audit rows name it; instance answers carry it).
	Node string
	// PlatformDomains are the fleet's platform domains: names under them are never
	// claimed.
	PlatformDomains []string
	// APIPort is this node's API port (0: none); an application token may never point its
	// instance at it.
	APIPort int
	// Metrics, when set, is where the writer's series are registered (metrics.go).
	Metrics prometheus.Registerer
	// OnCommit runs after every change that bumped the serial (a reconcile kick); may
	// be nil.
	OnCommit func(action string)
	// OnInstances runs after this node's instances changed (a heartbeat kick); may be
	// nil.
	OnInstances func()
	// AuditRetention is how long audit records are kept (and how far back Audit reads).
	AuditRetention time.Duration
	// RouteBudget is each account's fleet-wide budget of routing changes (zero:
	// unlimited); OnRouteRefused, when set, runs for each change it refuses, with the
	// kind of change (instance, paths, app, claim).
	RouteBudget    RouteBudget
	OnRouteRefused func(change string)
	// Ports, when set, checks that a port of this node serves before an instance is
	// moved there (instancemove.go); nil: moves are not checked.
	Ports PortChecker
	// DomainGroups maps platform domains to ingress groups (--platform.groups; an
	// unmapped domain is in routing.DefaultGroup): an application whose group no
	// platform domain is in is warned at its write (AppWarnings).
	DomainGroups map[string]string
	// Middlewares are the Traefik middlewares the operator declares exist in their
	// ingresses (traefik.middlewares, "name@provider"): the only ones an application
	// may list (middlewares.go).
	Middlewares []string
}

// Writer is the write domain over one store.
type Writer struct {
	cfg     Config
	metrics *writeMetrics
	st      store.Store
	id      *store.Identity
	inst    *Registry
	log     *slog.Logger
	now     func() time.Time
	// pending holds the keys of stored changes not announced yet (their serial bump
	// has not succeeded); see settle. The bump names them.
	pendingMu sync.Mutex
	pending   map[string]struct{}
	mac       macCache   // the token MAC key (tokenmac.go)
	audit     *auditMemo // what Audit remembers between reads (auditread.go)
	// afterInstanceRead, when set (tests only), runs when SetInstance or
	// ReleaseInstance has read the instance to decide whether the write is a routing
	// change, before anything is charged or written: a test widens that window with it.
	afterInstanceRead func()
	// afterClaimsListed, when set (tests only), runs when DeleteApp has found the
	// application holds no claims, before it deletes it: a test runs a claim there.
	afterClaimsListed func()
	// appsSeen is what Apps last read: key → etag and application.
	appsMu   sync.Mutex
	appsSeen map[string]seenApp
}

// New builds the write domain. id is the store identity the reconcile loop maintains
// (writes bump the serial through it); inst is this node's instance registry.
func New(cfg Config, st store.Store, id *store.Identity, inst *Registry, log *slog.Logger) *Writer {
	return &Writer{cfg: cfg, st: st, id: id, inst: inst, log: log, now: time.Now, audit: newAuditMemo(), metrics: newWriteMetrics(cfg.Metrics)}
}

// load reads one stored object and decodes it (unknown fields tolerated on read).
func load[T any](ctx context.Context, st store.Store, key string) (T, string, error) {
	var v T
	obj, err := st.Get(ctx, key)
	if err != nil {
		return v, "", err
	}
	if err := json.Unmarshal(obj.Value, &v); err != nil {
		return v, "", &ErrCorrupt{Key: key, ETag: obj.ETag, Err: err}
	}
	return v, obj.ETag, nil
}

// ErrCorrupt is a store object that exists but does not decode (a hand edit, a bad
// restore, another program's write). It carries the object's etag, so the one thing
// that can be done with it, deleting it, is still a conditional write.
type ErrCorrupt struct {
	Key, ETag string
	Err       error
}

func (e *ErrCorrupt) Error() string { return fmt.Sprintf("decoding %s: %v", e.Key, e.Err) }
func (e *ErrCorrupt) Unwrap() error { return e.Err }

// prefixAudit is where audit records live in the store, one segment per UTC day:
// audit/<YYYYMMDD>/<HHMMSS.nnnnnnnnn>Z-<random>.json. Reading newest first lists
// today's segment, then yesterday's, and so on: never the whole log. Retention deletes
// whole days (SweepAudit).
const prefixAudit = "audit/"

const auditDay = "20060102"

func auditSegment(t time.Time) string { return prefixAudit + t.UTC().Format(auditDay) + "/" }

// AuditRecord is one change made through the API. Path-map records carry the prefix
// count, never the targets.
type AuditRecord struct {
	Time     time.Time `json:"time"`
	Actor    string    `json:"actor"`
	Node     string    `json:"node"`
	Action   string    `json:"action"`
	Account  string    `json:"account,omitempty"`
	App      string    `json:"app,omitempty"`
	Host     string    `json:"host,omitempty"`
	Prefixes int       `json:"prefixes"`
	Token    string    `json:"token,omitempty"`
	// FromPort and ToPort are an instance move's ports on Node (instance.move; FromPort
	// absent: the instance had none); Forced says the move skipped the check that the
	// new port serves, Checked that the check ran and passed (a move neither forced nor
	// checked was one the check does not cover: to a not-ready instance, or the first
	// declaration). Ready is the instance's readiness after the write (instance.move,
	// instance.ready: a readiness change on the same port, which routes or unroutes it).
	FromPort int   `json:"fromPort,omitempty"`
	ToPort   int   `json:"toPort,omitempty"`
	Forced   bool  `json:"forced,omitempty"`
	Checked  bool  `json:"checked,omitempty"`
	Ready    *bool `json:"ready,omitempty"`
}

// committed runs after every write that changed something: it appends the audit
// record, bumps the serial, and tells the node. A change whose bump fails is stored but
// not announced (no node re-reads it until its hourly full pass): that is an error the
// caller answers as 503, never a 2xx, and the writer remembers it, so that the client's
// retry (a no-op by then) bumps the serial and converges (see settle).
//
// keys are the fleet keys the change wrote or deleted (the audit record is not one):
// the bump names them, so a node one step behind reads just those.
func (w *Writer) committed(ctx context.Context, who Actor, rec AuditRecord, keys ...string) error {
	ctx = context.WithoutCancel(ctx)
	w.appendAudit(ctx, who, rec)
	w.pendingMu.Lock()
	if w.pending == nil {
		w.pending = map[string]struct{}{}
	}
	for _, k := range keys {
		w.pending[k] = struct{}{}
	}
	w.pendingMu.Unlock()
	if err := w.settle(ctx); err != nil {
		return err
	}
	w.metrics.committed(rec.Action)
	if w.cfg.OnCommit != nil {
		w.cfg.OnCommit(rec.Action)
	}
	return nil
}

// appendAudit writes rec, stamped with the time, who and this node, to the audit log
// (a failure is logged: the change it records is made), and logs the change.
func (w *Writer) appendAudit(ctx context.Context, who Actor, rec AuditRecord) {
	ctx = context.WithoutCancel(ctx)
	rec.Time = w.now().UTC()
	rec.Actor = who.Name()
	rec.Node = w.cfg.Node
	b, _ := jsonx.Marshal(rec)
	suffix := make([]byte, 4)
	rand.Read(suffix)
	key := auditSegment(rec.Time) + rec.Time.Format("150405.000000000Z") + "-" + hex.EncodeToString(suffix) + ".json"
	if _, err := w.st.Put(ctx, key, b, store.Condition{IfNoneMatch: true}); err != nil {
		w.log.Error("writing audit record", "action", rec.Action, "err", err)
	}
	attrs := []any{"action", rec.Action, "actor", rec.Actor, "account", rec.Account, "app", rec.App, "host", rec.Host, "prefixes", rec.Prefixes}
	if rec.ToPort != 0 {
		attrs = append(attrs, "fromPort", rec.FromPort, "toPort", rec.ToPort, "forced", rec.Forced)
	}
	w.log.Info("change", attrs...)
}

// settle bumps the serial if a change through this writer is still unannounced. Every
// operation that finds nothing to change calls it, so a retry of a request whose bump
// failed announces the change it stored the first time. The bump outlives ctx (a client
// that leaves does not leave its change unannounced).
func (w *Writer) settle(ctx context.Context) error {
	return w.announce(ctx, context.WithoutCancel(ctx))
}

// announce is settle, bumping under bctx (ctx carries the serial sink).
func (w *Writer) announce(ctx, bctx context.Context) error {
	w.pendingMu.Lock()
	names := make([]string, 0, len(w.pending))
	for k := range w.pending {
		names = append(names, k)
	}
	w.pendingMu.Unlock()
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	n, err := w.id.Bump(bctx, w.st, names...)
	if err != nil {
		w.log.Error("bumping serial: a stored change is not announced yet", "err", err)
		return fmt.Errorf("%w: the change is stored but not announced to the fleet (bumping the serial failed: %v); retry the same request", store.ErrUnavailable, err)
	}
	if sink, ok := ctx.Value(serialSinkKey{}).(*SerialSink); ok {
		sink.observe(n)
	}
	// Only what this bump named: a change committed meanwhile announces itself.
	w.pendingMu.Lock()
	for _, k := range names {
		delete(w.pending, k)
	}
	w.pendingMu.Unlock()
	return nil
}

// AnnouncePending bumps the serial for the changes stored through this writer whose
// bump failed (their write answered 503), if any: the heartbeat calls it, so such a
// change is announced within a heartbeat of the store answering again, not only at the
// next write through this node (fleetsim: an application stored by a write answered 503
// went unannounced until the next change). Unlike settle it keeps ctx's deadline and
// cancellation: the heartbeat's bound (reconcile.PassTimeout) holds, and a hung store
// does not hold the heartbeat, nor the node's stop, past it.
func (w *Writer) AnnouncePending(ctx context.Context) error { return w.announce(ctx, ctx) }

// SerialSink collects the store serial that announced the writes made under a context
// (WithSerialSink): a caller that waits until a write is live everywhere waits for
// that serial (the node's ?wait=applied).
type SerialSink struct {
	mu     sync.Mutex
	serial uint64
}

type serialSinkKey struct{}

// WithSerialSink returns ctx carrying sink: every serial bump a write under it makes
// is recorded there (the highest wins).
func WithSerialSink(ctx context.Context, sink *SerialSink) context.Context {
	return context.WithValue(ctx, serialSinkKey{}, sink)
}

func (s *SerialSink) observe(n uint64) {
	s.mu.Lock()
	s.serial = max(s.serial, n)
	s.mu.Unlock()
}

// Serial is the highest serial a write under the sink's context bumped to; 0 when none
// did (nothing changed, or the write failed).
func (s *SerialSink) Serial() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serial
}

// newID mints an application incarnation id.
func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// AuditSweep is one step of the audit sweep at now (the node schedules it at start and
// daily): SweepAudit, its outcome logged.
func (w *Writer) AuditSweep(ctx context.Context, now time.Time) {
	if n, err := w.SweepAudit(ctx, now); err != nil && ctx.Err() == nil {
		w.log.Warn("sweeping the audit log", "err", err)
	} else if n > 0 {
		w.log.Info("swept the audit log", "deleted", n, "retention", w.cfg.AuditRetention)
	}
}

// SweepAudit deletes the audit records older than the retention at now: whole day
// segments, and any record in the flat layout of earlier versions
// (audit/<time>-<random>.json) once it is that old. It lists the audit prefix once. It
// returns how many records it deleted.
func (w *Writer) SweepAudit(ctx context.Context, now time.Time) (int, error) {
	entries, err := w.st.List(ctx, prefixAudit)
	if err != nil {
		return 0, fmt.Errorf("listing audit: %w", err)
	}
	cutoff := now.UTC().Add(-w.cfg.AuditRetention).Format(auditDay)
	n := 0
	for _, e := range entries {
		rest := strings.TrimPrefix(e.Key, prefixAudit)
		if len(rest) < len(auditDay) || rest[:len(auditDay)] >= cutoff {
			continue
		}
		if err := w.st.Delete(ctx, e.Key, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
			return n, fmt.Errorf("deleting %s: %w", e.Key, err)
		}
		n++
	}
	return n, nil
}
