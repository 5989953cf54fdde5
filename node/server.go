package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/internal/statedir"
	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/node/store/s3"
)

// Server is one scafo node: the composition root. It builds the subsystems (each owns
// its state) and the HTTP API over them, and owns their lifetimes: the start and stop
// order, the spill directory, shutdown.
type Server struct {
	cfg *Config
	log *slog.Logger
	st  store.Store // the store, its requests counted

	identity  *store.Identity    // the store's serial and epoch: one owner
	pub       *publish.Publisher // the published snapshot (node/publish)
	rec       *reconcile.Reconciler
	self      *self.Record         // this node's own record (node/self)
	ingresses *ingress.Book        // ingress reports (node/ingress)
	instances *fleetwrite.Registry // this node's instances (ports, readiness)
	probes    *probe.Prober        // probes of those instances; nil when probe.interval is 0
	writer    *fleetwrite.Writer   // every fleet write
	certs     *fleetcerts.Manager  // fleet certificates; nil without --acme.enabled (acme.go)
	metrics   *metrics
	http      *httpapi.API     // the HTTP API (node/httpapi)
	kicks     *kicks           // "reconcile now", "rewrite the record now"
	lock      *statedir.Lock   // the state dir, held from New to the end of Run (nil from NewWithStore)
	bucket    s3.BucketChecker // the S3 store's check at the start of Run (nil: a directory store, or NewWithStore)
	serving   chan struct{}    // closed once Run serves the API (Serving)
}

// Serving is closed once Run serves the API: its checks passed (the node's name is its
// own) and its listener accepts. The command tells the service manager then (READY=1).
func (s *Server) Serving() <-chan struct{} { return s.serving }

// New builds a node from cfg. It mints tokens if needed and opens the store; it does
// not start serving (see Run).
func New(ctx context.Context, cfg *Config, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state dir: %w", err)
	}
	// One node per state dir, before anything in it is read or written (a second node
	// would empty the first one's spill directory and allocate its ports again).
	lock, err := statedir.Acquire(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	s, err := newLocked(ctx, cfg, log)
	if err != nil {
		lock.Release()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// storeChecker is the S3 store's check (nil for a directory store).
func storeChecker(st store.Store) s3.BucketChecker {
	if b, ok := st.(s3.BucketChecker); ok {
		return b
	}
	return nil
}

func newLocked(ctx context.Context, cfg *Config, log *slog.Logger) (*Server, error) {
	ingressTok, err := statedir.LoadOrMintToken(cfg.Ingress.Token, cfg.StateDir, "ingress-token")
	if err != nil {
		return nil, fmt.Errorf("ingress token: %w", err)
	}
	adminTok, err := statedir.LoadOrMintToken(cfg.Admin.Token, cfg.StateDir, "admin-token")
	if err != nil {
		return nil, fmt.Errorf("admin token: %w", err)
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s, err := NewWithStore(cfg, log, st, ingressTok, adminTok)
	if err != nil {
		return nil, err
	}
	s.bucket = storeChecker(st)
	return s, nil
}

// NewWithStore builds a node over an already opened store (tests use it). The read-only
// token is loaded, or minted, here (readonly.token, or <stateDir>/readonly-token).
func NewWithStore(cfg *Config, log *slog.Logger, st store.Store, ingressTok, adminTok string) (*Server, error) {
	readOnlyTok, err := statedir.LoadOrMintToken(cfg.Readonly.Token, cfg.StateDir, "readonly-token")
	if err != nil {
		return nil, fmt.Errorf("read-only token: %w", err)
	}
	// No token for two roles, the token files' included (tokenroles.go).
	if err := errors.Join(rolesOverlap(cfg.resolvedRoleTokens("ingress", cfg.Ingress, ingressTok), cfg.resolvedRoleTokens("admin", cfg.Admin, adminTok),
		cfg.resolvedRoleTokens("readonly", cfg.Readonly, readOnlyTok))...); err != nil {
		return nil, &ConfigError{Err: err}
	}
	inst, err := fleetwrite.OpenRegistry(filepath.Join(cfg.StateDir, "instances.json"),
		cfg.Ports.Min, cfg.Ports.Max, time.Duration(cfg.Ports.Quarantine))
	if err != nil {
		return nil, fmt.Errorf("instance registry: %w", err)
	}
	ropts, err := cfg.Traefik.RenderOptions(cfg.Platform.Domains) // checked by the render
	if err != nil {
		return nil, err
	}
	nodeID, err := self.LoadOrMintNodeID(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	mem, memDoc, err := loadServed(cfg.StateDir, log)
	if err != nil {
		return nil, err
	}
	cfg.Limits.FillDefaults()
	inst.Reserve(cfg.Node.APIPort) // an application never gets the API's port
	inst.RequireLastRecord()       // a new state dir issues no port before its last record is read
	storeRequests := newStoreRequests()
	st = newRequestCounter(st, storeRequests)
	identity := &store.Identity{}
	s := &Server{cfg: cfg, log: log, st: st, instances: inst, identity: identity, kicks: newKicks(), serving: make(chan struct{})}
	mp := metricProbes{storeForeign: identity.Foreign, storeRequests: storeRequests}
	if err := newSubsystems(s, ropts, nodeID, mp, mem, memDoc); err != nil {
		return nil, err
	}
	pub := s.pub
	if s.http, err = httpapi.New(apiConfig(cfg, ingressTok, adminTok, readOnlyTok), log, s.metrics.reg, httpapi.Deps{
		Store: st, Identity: identity, Publisher: pub, Reconcile: s.rec, Self: s.self,
		Ingresses: s.ingresses, Instances: inst, Writer: s.writer, Certs: s.certs, Probes: s.probes,
		KickHeartbeat: s.kicks.Heartbeat,
	}); err != nil {
		return nil, err
	}
	if mem != nil {
		// A restart: the store must be the one this node served (node/reconcile/served.go).
		if mem.Seeds() {
			s.identity.Seed(mem.Serial, mem.Epoch)
		}
		log.Info("remembered store", "epoch", mem.Epoch, "serial", mem.Serial, "revision", mem.Revision, "savedAt", mem.SavedAt)
	}
	return s, nil
}

func openStore(ctx context.Context, cfg *Config) (store.Store, error) {
	if c := cfg.Store.S3; c.Endpoint != "" {
		st, err := s3.New(ctx, s3.Config{
			Endpoint: c.Endpoint, Bucket: c.Bucket, Prefix: c.Prefix, Region: c.Region,
			AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, Insecure: c.Insecure,
		})
		if err != nil {
			return nil, fmt.Errorf("opening s3 store: %w", err)
		}
		return st, nil
	}
	st, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		return nil, fmt.Errorf("opening dir store: %w", err)
	}
	return st, nil
}

// ownRecordWait bounds how long the reconciler's first pass waits for this node's
// first record write, so the first document served has the node in it.
const ownRecordWait = 5 * time.Second

// Run serves on ln until ctx ends, then shuts down gracefully: long-polls are released
// (they answer 304), the connections queued on ln are accepted and answered rather than
// reset (drainSocket: ln from listengate.Listen), in-flight requests finish within a
// grace period. It refuses to start (closing ln) when another live node holds this
// node's name (node/self).
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	defer s.lock.Release()
	if s.cfg.Node.APIPort == 0 {
		ln.Close()
		return errors.New("node.apiPort: 0: the node was built without the port its API is reached on (open the listener before New, and set node.apiPort to its port)")
	}
	if s.bucket != nil {
		_ = s3.CheckAtStart(ctx, s.cfg.Store.S3, s.bucket, s.log) // logged; the node starts unready
	}
	if err := s.self.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The saver outlives the loops: it writes what the last pass handed it.
	saverCtx, stopSaver := context.WithCancel(context.Background())
	saverDone := make(chan struct{})
	go func() {
		defer close(saverDone)
		s.rec.RunSaver(saverCtx)
	}()
	loops := startLoops(loopCtx, s)

	// No ReadTimeout or WriteTimeout: they would cut long-polls. A request's body and its
	// answer are bounded per request instead (node/httpapi, limits.go).
	lim := s.cfg.Limits
	total, reserved := lim.Conns()
	raw := ln // the socket itself, for drainSocket
	ln = s.http.Listen(ln, total, reserved, lim.PerSource(total-reserved))
	startCerts(s.certs, s.pub, ln.Addr())
	defer stopCerts(s.certs)
	var fresh freshConns
	srv := &http.Server{
		Handler:           s.http.Handler(),
		ReadHeaderTimeout: time.Duration(lim.HeaderTimeout),
		IdleTimeout:       time.Duration(lim.IdleTimeout),
		ConnContext:       httpapi.ConnContext,
		ConnState:         fresh.track,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	close(s.serving)
	s.log.Info("scafo-node serving", "addr", ln.Addr().String(), "node", s.cfg.Node.Name, "stateDir", s.cfg.StateDir,
		"store", s.cfg.Store.String(),
		"ingressToken", statedir.TokenSource(s.cfg.Ingress.Token, s.cfg.StateDir, "ingress-token"),
		"adminToken", statedir.TokenSource(s.cfg.Admin.Token, s.cfg.StateDir, "admin-token"),
		"readonlyToken", statedir.TokenSource(s.cfg.Readonly.Token, s.cfg.StateDir, "readonly-token"),
		"maxConns", total, "reservedConns", reserved)

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.Close()
	if err == nil { // still serving: accepting what queued, then closing ln
		s.drainSocket(raw, ln, errc, &fresh)
	}
	shCtx, shCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer shCancel()
	if serr := srv.Shutdown(shCtx); serr != nil && err == nil {
		err = serr
	}
	cancel()
	loops.Wait()
	stopSaver()
	<-saverDone
	s.pub.RemoveSpill()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	s.log.Info("scafo-node stopped")
	return err
}

// startLoops starts the node's loops under ctx: the prober, the ingress book, the fleet
// certificates' republication, the audit sweep, the heartbeat and the reconcile loop
// (whose first pass waits for the first heartbeat, ownRecordWait at most). Wait on the
// group after ctx ends.
func startLoops(ctx context.Context, s *Server) *sync.WaitGroup {
	var wg sync.WaitGroup
	steps := s.Steps()
	if steps.ProbeRound != nil {
		wg.Go(schedule{every: s.probes.Interval(), atStart: true, step: steps.ProbeRound}.on(ctx))
	}
	wg.Go(schedule{every: ingressFlushEvery, clock: func() time.Time { return s.ingresses.Now() }, step: steps.FlushIngresses}.on(ctx))
	if s.certs != nil {
		wg.Go(schedule{kick: s.kicks.certs, step: func(context.Context, time.Time) { s.pub.PublishCerts(s.certs.Current()) }}.on(ctx))
	}
	wg.Go(schedule{every: 24 * time.Hour, atStart: true, step: steps.AuditSweep}.on(ctx))
	firstBeat := make(chan struct{})
	wg.Go(func() {
		// This node's own record first (the heartbeat), for at most ownRecordWait: a
		// store that does not answer a write in that time delays nothing longer.
		select {
		case <-firstBeat:
		case <-time.After(ownRecordWait):
		case <-ctx.Done():
			return
		}
		s.rec.Run(ctx, time.Duration(s.cfg.Reconcile.Interval), time.Duration(s.cfg.Reconcile.FullInterval),
			time.Duration(s.cfg.Reconcile.PublishWindow), s.kicks.reconcile)
	})
	// The first write at once (asynchronously to serving, so a hung store never delays
	// /v1/healthz or SIGTERM), then every heartbeat and on change; the reconciler's first
	// pass waits for it, so the first document a node serves after ready already has
	// this node's own record (its API upstream) in it, even on a brand-new store.
	wg.Go(schedule{every: time.Duration(s.cfg.Reconcile.Heartbeat), kick: s.kicks.heartbeat, atStart: true,
		bound: reconcile.PassTimeout, first: firstBeat, step: steps.Heartbeat}.on(ctx))
	return &wg
}

// Handler is the node's HTTP API (node/httpapi), without the connection guard of Run.
func (s *Server) Handler() http.Handler { return s.http.Handler() }

// Close releases long-polls. Safe to call more than once.
func (s *Server) Close() { s.http.Close() }

// openSpillDir empties and returns <stateDir>/bodies, the private directory where
// rendered bodies are spilled for sendfile; "" (serve from memory) when it cannot.
// Its owner, the server, removes it after the HTTP server stops.
func openSpillDir(stateDir string, log *slog.Logger) string {
	dir := filepath.Join(stateDir, "bodies")
	err := os.RemoveAll(dir) // a crashed run's bodies
	if err == nil {
		err = os.Mkdir(dir, 0o700)
	}
	if err != nil {
		log.Warn("no spill directory for rendered bodies; serving from memory", "err", err)
		return ""
	}
	return dir
}
