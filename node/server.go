package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/node/store/s3"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// Server is one scafo node.
type Server struct {
	// groups knows the ingress groups beyond the document's routes (groups.go).
	groups *groupKnowledge
	// storeRequests counts this node's store requests by op (a metric).
	storeRequests *prometheus.CounterVec
	// self is this node's own record: heartbeat, name guard, boot id, and the
	// announcements instance writes with ?wait=applied wait for (node/self).
	self *self.Record
	cfg  *Config
	log  *slog.Logger
	st   store.Store

	ingressToken string
	adminToken   string

	pub       *publish.Publisher
	certs     *fleetcerts.Manager // fleet certificates; nil without --acme.enabled (acme.go)
	rec       *reconcile.Reconciler
	metrics   *metrics
	writes    *writeLimiter
	identity  *store.Identity      // the store's serial and epoch: one owner
	writer    *fleetwrite.Writer   // every fleet write
	ingresses *ingress.Book        // ingress reports (node/ingress)
	instances *fleetwrite.Registry // this node's instances (ports, readiness)
	probes    *probe.Prober        // probes of those instances; nil when probe.interval is 0

	conns     atomic.Pointer[connLimiter]      // the API listener's cap (set by Run)
	rejects   *rejectLogger                    // rejection log lines, rate-limited per source
	badTokens *expirable.LRU[string, struct{}] // hashes of recently rejected application tokens
	goodIDs   *expirable.LRU[string, struct{}] // ids of application tokens found valid lately
	lookups   *writeLimiter                    // the budget for store reads of other tokens
	// sourceLookups is that budget per remote address; knownLookups is the budget of
	// each token seen valid lately (keyed by its hash).
	sourceLookups *writeLimiter
	knownLookups  *writeLimiter
	trusted       trustedProxies // limits.trustedProxies (clientaddr.go)

	kick     chan struct{} // run a reconcile pass now
	beat     chan struct{} // rewrite this node's record now
	shutdown chan struct{} // closed on shutdown: releases long-polls
	once     sync.Once
}

// New builds a node from cfg. It mints tokens if needed and opens the store; it does
// not start serving (see Run).
func New(ctx context.Context, cfg *Config, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state dir: %w", err)
	}
	ingressTok, err := loadOrMintToken(cfg.Ingress.Token, cfg.StateDir, "ingress-token")
	if err != nil {
		return nil, fmt.Errorf("ingress token: %w", err)
	}
	adminTok, err := loadOrMintToken(cfg.Admin.Token, cfg.StateDir, "admin-token")
	if err != nil {
		return nil, fmt.Errorf("admin token: %w", err)
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return NewWithStore(cfg, log, st, ingressTok, adminTok)
}

// NewWithStore builds a node over an already opened store (tests use it).
func NewWithStore(cfg *Config, log *slog.Logger, st store.Store, ingressTok, adminTok string) (*Server, error) {
	inst, err := fleetwrite.OpenRegistry(filepath.Join(cfg.StateDir, "instances.json"),
		cfg.Ports.Min, cfg.Ports.Max, time.Duration(cfg.Ports.Quarantine))
	if err != nil {
		return nil, fmt.Errorf("instance registry: %w", err)
	}
	ropts := render.Options{
		EntryPoints:           cfg.Traefik.EntryPoints,
		CertResolver:          cfg.Traefik.CertResolver,
		PlatformWildcardCerts: cfg.Traefik.PlatformWildcardCerts,
		PlatformDomains:       cfg.Platform.Domains,
		HealthCheckInterval:   healthCheckInterval(cfg.Traefik.HealthCheck.Interval),
		HealthCheckTimeout:    time.Duration(cfg.Traefik.HealthCheck.Timeout).String(),
		PathGroupThreshold:    cfg.Traefik.PathGroupThreshold,
		RetryAttempts:         cfg.Traefik.Retry.Attempts,
		RetryInitialInterval:  time.Duration(cfg.Traefik.Retry.InitialInterval).String(),
	}
	if err := ropts.Validate(); err != nil {
		return nil, fmt.Errorf("traefik render options: %w", err)
	}
	nodeID, err := self.LoadOrMintNodeID(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	mem, memDoc, err := reconcile.LoadServed(cfg.StateDir)
	if err != nil {
		if !reconcile.AdoptRequested(cfg.StateDir) {
			return nil, fmt.Errorf("%w: the state dir's memory of the store is unreadable; "+
				"if the store this node finds is the fleet's, run `scafo-node store adopt --stateDir=%s` and start it again", err, cfg.StateDir)
		}
		log.Warn("the state dir's memory of the store is unreadable; adopting the store as it is (operator request)", "err", err)
		mem, memDoc = nil, nil
	}
	cfg.Limits.fillDefaults()
	trusted, err := parseTrustedProxies(cfg.Limits.TrustedProxies)
	if err != nil {
		return nil, err
	}
	storeRequests := newStoreRequests()
	st = newRequestCounter(st, storeRequests)
	// The reconcile loop publishes right after committing the serial it read (or, on a
	// foreign store at start, the remembered document under the seeded serial).
	identity := &store.Identity{}
	pub := publish.New(ropts, openSpillDir(cfg.StateDir, log),
		func() (uint64, string) { return identity.Serial(), identity.Epoch() })
	groups := &groupKnowledge{configured: map[string]bool{}}
	for _, g := range cfg.Platform.DomainGroups() {
		groups.configured[g] = true
	}
	s := &Server{
		cfg: cfg, log: log, st: st, groups: groups,
		ingressToken: ingressTok, adminToken: adminTok,
		pub: pub, instances: inst, identity: identity, storeRequests: storeRequests,
		writes:    newWriteLimiter(cfg.Writes.Rate, cfg.Writes.Burst),
		rejects:   newRejectLogger(log, time.Duration(cfg.Limits.RejectLog)),
		badTokens: expirable.NewLRU[string, struct{}](badTokenCacheSize, nil, badTokenTTL),
		goodIDs:   expirable.NewLRU[string, struct{}](16384, nil, 10*time.Minute),
		lookups:   newWriteLimiter(unknownLookupRate, unknownLookupBurst),

		sourceLookups: newWriteLimiter(sourceUnknownLookupRate, sourceUnknownLookupBurst),
		trusted:       trusted,
		knownLookups:  newWriteLimiter(max(knownTokenRate, 4*cfg.Writes.Rate), max(knownTokenBurst, 2*cfg.Writes.Burst)),
		kick:          make(chan struct{}, 1),
		beat:          make(chan struct{}, 1),
		shutdown:      make(chan struct{}),
	}
	s.self = self.New(self.Options{
		Store: st, Identity: identity, Log: log, NodeID: nodeID,
		Name: cfg.Node.Name, Address: cfg.Node.Address,
		APIPort:  func() int { return cfg.Node.APIPort },
		NodeTTL:  time.Duration(cfg.Reconcile.NodeTTL),
		Settings: s.settings,
		// Declared AND probe up (node/probe).
		Instances:   func() map[string]fleet.Instance { return s.probes.Publish(s.instances.Records()) },
		OnAnnounced: s.kickReconcile,
	})
	s.metrics = newMetrics(pub, metricProbes{
		certRenewals:  s.certRenewals,
		storeForeign:  s.identity.Foreign,
		storeRequests: storeRequests,
		nameConflict:  func() bool { return s.self.Conflict(time.Now()) != nil },
	})
	s.ingresses = ingress.New(ingress.Options{
		Store: st, Log: log, Self: cfg.Node.Name,
		Config: ingress.Config{
			LostAfter:   time.Duration(cfg.Ingresses.LostAfter),
			ForgetAfter: time.Duration(cfg.Ingresses.ForgetAfter),
			MaxTracked:  cfg.Ingresses.MaxTracked,
		},
		Known:   func() (uint64, string) { return s.identity.Serial(), s.identity.Epoch() },
		Current: s.publishedMark, Foreign: s.identity.Foreign,
		GroupRevision: func(groups string) string {
			snap := s.pub.Current()
			if snap == nil {
				return ""
			}
			return snap.ForGroups(strings.Split(groups, ",")).Revision
		},
	})
	s.metrics.reg.MustRegister(ingressCollector{s})
	if err := s.setupACME(); err != nil {
		return nil, err
	}
	s.writer = fleetwrite.New(fleetwrite.Config{
		Node:            cfg.Node.Name,
		PlatformDomains: cfg.Platform.Domains,
		APIPort:         func() int { return cfg.Node.APIPort },
		OnCommit: func(action string) {
			s.metrics.storeWrites.WithLabelValues(action, "ok").Inc()
			s.kickReconcile()
		},
		OnInstances:    s.instancesChanged,
		AuditRetention: time.Duration(cfg.Audit.Retention),
		RouteBudget:    fleetwrite.RouteBudget{Burst: cfg.Writes.RouteBurst, PerMinute: cfg.Writes.RoutePerMinute},
		OnRouteRefused: func(change string) { s.metrics.routeRefused.WithLabelValues(change).Inc() },
		DomainGroups:   cfg.Platform.DomainGroups(),
	}, st, s.identity, inst, log)
	s.probes = s.newProber()
	s.rec = reconcile.New(reconcile.Options{
		Store: st, Publisher: pub, Log: log, Identity: s.identity,
		Self: s.settings(), SelfName: cfg.Node.Name,
		FleetOptions: func() fleet.Options {
			return fleet.Options{
				PlatformDomains: cfg.Platform.Domains,
				APIPublic:       cfg.API.Public,
				NodeTTL:         time.Duration(cfg.Reconcile.NodeTTL),
				DomainGroups:    cfg.Platform.DomainGroups(),
			}
		},
		OnPass:     s.metrics.observePass,
		Heartbeat:  time.Duration(cfg.Reconcile.Heartbeat),
		StateDir:   cfg.StateDir,
		Memory:     mem,
		MemoryDoc:  memDoc,
		OnAccepted: s.kickHeartbeat,
		OnGroups:   groups.setApps,
		OnOwnRecord: func(rec fleet.NodeRecord) {
			s.self.See(rec, false, time.Now())
		},
	})
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

func (s *Server) settings() fleet.NodeSettings {
	return fleet.NodeSettings{PlatformDomains: s.cfg.Platform.Domains, APIPublic: s.cfg.API.Public, DomainGroups: s.cfg.Platform.DomainGroups()}
}

// newProber builds the prober of this node's instances (nil when probe.interval is 0).
func (s *Server) newProber() *probe.Prober {
	cfg := s.cfg.Probe
	if cfg.Interval <= 0 {
		return nil
	}
	addr, err := netip.ParseAddr(s.cfg.Node.Address)
	if err != nil {
		s.log.Warn("not probing instances: node.address is not an IP", "address", s.cfg.Node.Address)
		return nil
	}
	return probe.New(probe.Options{
		Config: cfg, Addr: addr, Log: s.log,
		APIPort:    func() int { return s.cfg.Node.APIPort },
		Instances:  s.instances.Records,
		Declared:   s.instances.Get,
		HealthPath: func(app, appID string) string { return s.rec.KnownApps().HealthPath(app, appID) },
		OnChange:   s.kickHeartbeat,
		Metrics:    s.metrics.reg,
	})
}

// kickReconcile asks for a pass now (after a write through this node).
func (s *Server) kickReconcile() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// instancesChanged notes a change of this node's instances (a new generation for
// waiters, node/self) and asks for the record to be rewritten now.
func (s *Server) instancesChanged() {
	s.self.Changed()
	s.kickHeartbeat()
}

// kickHeartbeat asks for this node's record to be rewritten now (instances changed).
func (s *Server) kickHeartbeat() {
	select {
	case s.beat <- struct{}{}:
	default:
	}
}

// Run serves on ln until ctx ends, then shuts down gracefully: long-polls are released
// (they answer 304), in-flight requests finish within a grace period. It refuses to
// start (closing ln) when another live node holds this node's name (node/self).
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	if err := s.self.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	if s.cfg.Node.APIPort == 0 {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			s.cfg.Node.APIPort = a.Port
		}
	}
	s.instances.Reserve(s.cfg.Node.APIPort) // an application never gets the API's port
	loopCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The saver outlives the loops: it writes what the last pass handed it.
	saverCtx, stopSaver := context.WithCancel(context.Background())
	saverDone := make(chan struct{})
	go func() {
		defer close(saverDone)
		s.rec.RunSaver(saverCtx)
	}()
	var wg sync.WaitGroup
	if s.probes != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.probes.Run(loopCtx)
		}()
	}
	wg.Add(4)
	go func() {
		defer wg.Done()
		s.ingresses.Run(loopCtx)
	}()
	go func() {
		defer wg.Done()
		s.auditSweepLoop(loopCtx)
	}()
	go func() {
		defer wg.Done()
		s.rec.Run(loopCtx, time.Duration(s.cfg.Reconcile.Interval), time.Duration(s.cfg.Reconcile.FullInterval),
			time.Duration(s.cfg.Reconcile.PublishWindow), s.kick)
	}()
	go func() {
		defer wg.Done()
		s.heartbeatLoop(loopCtx)
	}()

	// No ReadTimeout or WriteTimeout: they would cut long-polls. A request's body and its
	// answer are bounded per request instead (boundRequest, limits.go).
	lim := s.cfg.Limits
	total, reserved := lim.conns()
	limiter := newConnLimiter(ln, total, reserved, lim.perSource(total-reserved), func(remote string) {
		s.refuseConn(remote, total)
	})
	s.conns.Store(limiter)
	ln = limiter
	s.startACME(ln.Addr())
	defer s.stopACME()
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: time.Duration(lim.HeaderTimeout),
		IdleTimeout:       time.Duration(lim.IdleTimeout),
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("scafo-node serving", "addr", ln.Addr().String(), "node", s.cfg.Node.Name, "stateDir", s.cfg.StateDir,
		"ingressToken", tokenSource(s.cfg.Ingress.Token, s.cfg.StateDir, "ingress-token"),
		"adminToken", tokenSource(s.cfg.Admin.Token, s.cfg.StateDir, "admin-token"),
		"maxConns", total, "reservedConns", reserved)

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.Close()
	shCtx, shCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer shCancel()
	if serr := srv.Shutdown(shCtx); serr != nil && err == nil {
		err = serr
	}
	cancel()
	wg.Wait()
	stopSaver()
	<-saverDone
	s.pub.RemoveSpill()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	s.log.Info("scafo-node stopped")
	return err
}

// Close releases long-polls. Safe to call more than once.
func (s *Server) Close() {
	s.once.Do(func() { close(s.shutdown) })
}

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

// healthCheckInterval is the render's interval setting: "" (automatic, sized for the
// fleet) for the default 0, the configured duration otherwise.
func healthCheckInterval(d ptypes.Duration) string {
	if d == 0 {
		return ""
	}
	return time.Duration(d).String()
}
