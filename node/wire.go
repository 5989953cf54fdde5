package node

// The object graph: NewWithStore's builders. Each subsystem gets, in its constructor,
// what it reads of the others (small interfaces, functions over values built before
// it); nothing is written into another object after construction.

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// renderOptions are the render's settings (traefik.*, platform.domains), checked.
func renderOptions(cfg *Config) (render.Options, error) {
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
		return render.Options{}, fmt.Errorf("traefik render options: %w", err)
	}
	return ropts, nil
}

// loadServed reads the state dir's memory of the store (node/reconcile/served.go); an
// unreadable one is an error unless the operator asked to adopt the store.
func loadServed(stateDir string, log *slog.Logger) (*reconcile.Memory, *routing.Document, error) {
	mem, memDoc, err := reconcile.LoadServed(stateDir)
	if err != nil {
		if !reconcile.AdoptRequested(stateDir) {
			return nil, nil, fmt.Errorf("%w: the state dir's memory of the store is unreadable; "+
				"if the store this node finds is the fleet's, run `scafo-node store adopt --stateDir=%s` and start it again", err, stateDir)
		}
		log.Warn("the state dir's memory of the store is unreadable; adopting the store as it is (operator request)", "err", err)
		return nil, nil, nil
	}
	return mem, memDoc, nil
}

// newSubsystems builds, over s's store, publisher and registry of instances, the
// metrics, the prober, this node's record, the ingress-report book, the fleet
// certificates and the fleet writer.
func newSubsystems(s *Server, nodeID string, storeRequests *prometheus.CounterVec) error {
	cfg, log, st := s.cfg, s.log, s.st
	s.metrics = newMetrics(s.pub, metricProbes{
		certRenewals: func() []fleetcerts.Renewal {
			if s.certs == nil { // set below, before anything scrapes
				return nil
			}
			return s.certs.Renewals()
		},
		storeForeign:    s.identity.Foreign,
		storeRequests:   storeRequests,
		nameConflict:    func() bool { return s.self.Conflict(time.Now()) != nil },
		addressConflict: func() bool { a := s.self.AddressReport(); return a != nil && len(a.SharedWith) > 0 },
		addressLoopback: func() bool { a := s.self.AddressReport(); return a != nil && a.Local },
	})
	s.probes = newProber(cfg, log, s.instances, s.kicks.Heartbeat, s.metrics.reg,
		func(app, appID string) string { return s.rec.KnownApps().HealthPath(app, appID) })
	s.self = self.New(self.Options{
		Store: st, Identity: s.identity, Log: log, NodeID: nodeID,
		Name: cfg.Node.Name, Address: cfg.Node.Address,
		APIPort:  func() int { return cfg.Node.APIPort },
		NodeTTL:  time.Duration(cfg.Reconcile.NodeTTL),
		Settings: func() fleet.NodeSettings { return nodeSettings(cfg) },
		// Declared AND probe up (node/probe).
		Instances:   func() map[string]fleet.Instance { return s.probes.Publish(s.instances.Records()) },
		OnAnnounced: s.kicks.Reconcile,
	})
	pub := s.pub
	s.ingresses = ingress.New(ingress.Options{
		Store: st, Log: log, Self: cfg.Node.Name,
		Config: ingress.Config{
			LostAfter:   time.Duration(cfg.Ingresses.LostAfter),
			ForgetAfter: time.Duration(cfg.Ingresses.ForgetAfter),
			MaxTracked:  cfg.Ingresses.MaxTracked,
		},
		Known:   func() (uint64, string) { return s.identity.Serial(), s.identity.Epoch() },
		Current: func() (string, uint64) { return publishedMark(pub) },
		Foreign: s.identity.Foreign,
		GroupRevision: func(groups string) string {
			snap := pub.Current()
			if snap == nil {
				return ""
			}
			return snap.ForGroups(strings.Split(groups, ",")).Revision
		},
	})
	s.metrics.reg.MustRegister(ingressCollector{book: s.ingresses, heartbeat: time.Duration(cfg.Reconcile.Heartbeat)})
	certs, err := newCertManager(cfg, st, log, pub)
	if err != nil {
		return err
	}
	if certs != nil {
		s.certs = certs
		s.metrics.reg.MustRegister(&certCollector{m: certs})
	}
	s.writer = fleetwrite.New(fleetwrite.Config{
		Node:            cfg.Node.Name,
		PlatformDomains: cfg.Platform.Domains,
		APIPort:         func() int { return cfg.Node.APIPort },
		OnCommit: func(action string) {
			s.metrics.storeWrites.WithLabelValues(action, "ok").Inc()
			s.kicks.Reconcile()
		},
		// A change of this node's instances: a new generation for waiters (node/self),
		// and the record rewritten now.
		OnInstances: func() {
			s.self.Changed()
			s.kicks.Heartbeat()
		},
		AuditRetention: time.Duration(cfg.Audit.Retention),
		RouteBudget:    fleetwrite.RouteBudget{Burst: cfg.Writes.RouteBurst, PerMinute: cfg.Writes.RoutePerMinute},
		OnRouteRefused: func(change string) { s.metrics.routeRefused.WithLabelValues(change).Inc() },
		DomainGroups:   cfg.Platform.DomainGroups(),
	}, st, s.identity, s.instances, log)
	return nil
}

// newReconciler builds the reconcile loop (the only publisher, node/reconcile).
func newReconciler(s *Server, groups *httpapi.Groups, mem *reconcile.Memory, memDoc *routing.Document) *reconcile.Reconciler {
	cfg := s.cfg
	return reconcile.New(reconcile.Options{
		Store: s.st, Publisher: s.pub, Log: s.log, Identity: s.identity,
		Self: nodeSettings(cfg), SelfName: cfg.Node.Name,
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
		OnAccepted: s.kicks.Heartbeat,
		OnGroups:   groups.SetApps,
		OnOwnRecord: func(rec fleet.NodeRecord) {
			s.self.See(rec, false, time.Now())
		},
	})
}

// apiConfig is what the HTTP API reads of cfg (limits filled in).
func apiConfig(cfg *Config, ingressTok, adminTok string) httpapi.Config {
	return httpapi.Config{
		NodeName: cfg.Node.Name, NodeAddress: cfg.Node.Address, StateDir: cfg.StateDir,
		Heartbeat:       time.Duration(cfg.Reconcile.Heartbeat),
		NodeTTL:         time.Duration(cfg.Reconcile.NodeTTL),
		PortsQuarantine: time.Duration(cfg.Ports.Quarantine),
		BodyTimeout:     time.Duration(cfg.Limits.BodyTimeout),
		WriteTimeout:    time.Duration(cfg.Limits.WriteTimeout),
		ConnMaxAge:      time.Duration(cfg.Limits.ConnMaxAge),
		RejectLog:       time.Duration(cfg.Limits.RejectLog),
		WriteRate:       cfg.Writes.Rate, WriteBurst: cfg.Writes.Burst,
		IngressToken: ingressTok, AdminToken: adminTok,
		IngressPrevious: cfg.Ingress.Previous, AdminPrevious: cfg.Admin.Previous,
		ACMEInline: cfg.ACME.Enabled && cfg.ACME.Delivery == DeliveryInline,
	}
}

// nodeSettings are this node's settings as its record announces them.
func nodeSettings(cfg *Config) fleet.NodeSettings {
	return fleet.NodeSettings{PlatformDomains: cfg.Platform.Domains, APIPublic: cfg.API.Public, DomainGroups: cfg.Platform.DomainGroups()}
}

// newProber builds the prober of this node's instances (nil when probe.interval is 0).
func newProber(c *Config, log *slog.Logger, inst *fleetwrite.Registry, onChange func(), reg prometheus.Registerer,
	healthPath func(app, appID string) string) *probe.Prober {
	cfg := c.Probe
	if cfg.Interval <= 0 {
		return nil
	}
	addr, err := netip.ParseAddr(c.Node.Address)
	if err != nil {
		log.Warn("not probing instances: node.address is not an IP", "address", c.Node.Address)
		return nil
	}
	return probe.New(probe.Options{
		Config: cfg, Addr: addr, Log: log,
		APIPort:    func() int { return c.Node.APIPort },
		Instances:  inst.Records,
		Declared:   inst.Get,
		HealthPath: healthPath,
		OnChange:   onChange,
		Metrics:    reg,
	})
}

// healthCheckInterval is the render's interval setting: "" (automatic, sized for the
// fleet) for the default 0, the configured duration otherwise.
func healthCheckInterval(d ptypes.Duration) string {
	if d == 0 {
		return ""
	}
	return time.Duration(d).String()
}
