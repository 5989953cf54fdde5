package node

// The object graph: NewWithStore's builders, in dependency order. Each subsystem gets,
// in its constructor, what it reads of those built before it (small interfaces, method
// values); an event that flows back up goes through something built earlier
// (reconcile.Apps, the kicks the root drains). Nothing is written into an object after
// its construction.

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/ingress/ingressmetrics"
	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

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
	if mem != nil && mem.SerialProblem != "" {
		log.Warn("the state dir's last served serial is unreadable", "problem", mem.SerialProblem)
	}
	return mem, memDoc, nil
}

// newSubsystems builds, over s's store, identity, registry of instances and kicks, in
// this order: the fleet certificates, the publisher, the metrics, the prober, this
// node's record, the ingress-report book, the fleet writer and the reconciler. Each
// package registers its own collectors.
func newSubsystems(s *Server, ropts render.Options, nodeID string, mp metricProbes,
	mem *reconcile.Memory, memDoc *routing.Document) error {
	cfg, log, st := s.cfg, s.log, s.st
	certs, err := newCertManager(cfg, st, log, s.kicks.Certs)
	if err != nil {
		return err
	}
	s.certs = certs
	// The reconcile loop publishes right after committing the serial it read (or, on a
	// foreign store at start, the remembered document under the seeded serial).
	s.pub = publish.NewWithCerts(ropts, openSpillDir(cfg.StateDir, log), s.identity.Mark, publishCerts(certs))
	s.metrics = newMetrics(s.pub, mp)
	if certs != nil {
		certs.RegisterMetrics(s.metrics.reg)
	}
	apps := &reconcile.Apps{} // the reconciler's applications, for the prober built before it
	s.probes = newProber(cfg, log, s.instances, s.kicks, s.metrics.reg, apps.HealthPath)
	probes, instances := s.probes, s.instances
	s.self = self.New(self.Options{
		Store: st, Identity: s.identity, Log: log, NodeID: nodeID,
		Name: cfg.Node.Name, Address: cfg.Node.Address, APIPort: cfg.Node.APIPort,
		NodeTTL:  time.Duration(cfg.Reconcile.NodeTTL),
		Settings: cfg.nodeSettings,
		// Declared AND probe up (node/probe).
		Instances: func() map[string]fleet.Instance { return probes.Publish(instances.Records()) },
		// A record of this process announced: the ports its last run's record published
		// start their quarantine (fleetwrite/registry_lastrecord.go).
		OnAnnounced: func() {
			if err := instances.RecordAnnounced(); err != nil {
				log.Warn("starting the quarantine of the ports of this node's last record", "err", err)
			}
			s.kicks.Reconcile()
		},
		LastRecord: instances.HoldLastRecord,
		// The writer and the reconciler are built after the record (they use it).
		SweepOrphans: orphanSweep(func() *reconcile.Reconciler { return s.rec }, s.identity,
			func() *fleetwrite.Writer { return s.writer }, log),
		Peers: func() []fleet.NodeRecord { return s.rec.Status().Nodes },
	})
	s.self.RegisterMetrics(s.metrics.reg)
	s.ingresses = newIngressBook(cfg, st, log, s.identity, s.pub)
	ingressmetrics.Register(s.metrics.reg, s.ingresses, time.Duration(cfg.Reconcile.Heartbeat))
	s.writer = newWriter(cfg, s, log)
	s.rec = newReconciler(s, mem, memDoc, apps)
	return nil
}

// publishCerts connects the publisher to the fleet certificates (none without m): the
// set its first snapshot carries, and m told every new document.
func publishCerts(m *fleetcerts.Manager) publish.Certs {
	if m == nil {
		return publish.Certs{}
	}
	return publish.Certs{Set: m.Current(), OnPublish: m.Sync}
}

// newIngressBook builds the book of ingress reports (node/ingress).
func newIngressBook(cfg *Config, st store.Store, log *slog.Logger, id *store.Identity, pub *publish.Publisher) *ingress.Book {
	return ingress.New(ingress.Options{
		Store: st, Log: log, Self: cfg.Node.Name,
		Config:        cfg.Ingresses,
		Known:         id.Mark,
		Current:       published{pub}.mark,
		Foreign:       id.Foreign,
		GroupRevision: published{pub}.groupRevision,
	})
}

// published reads the publisher's current snapshot for the ingress book.
type published struct{ pub *publish.Publisher }

func (p published) mark() (string, uint64) { return publishedMark(p.pub) }

// publishedMark is the published revision and the store serial it is known to be
// derived from ("", 0 before the first pass).
func publishedMark(pub *publish.Publisher) (string, uint64) {
	snap := pub.Current()
	if snap == nil {
		return "", 0
	}
	n, _, _ := snap.Mark()
	return snap.Doc().Revision, n
}

// groupRevision is the revision of the selection of groups (comma-separated).
func (p published) groupRevision(groups string) string {
	snap := p.pub.Current()
	if snap == nil {
		return ""
	}
	return snap.ForGroups(strings.Split(groups, ",")).Revision
}

// newWriter builds every fleet write (node/fleetwrite) over what s built before it.
func newWriter(cfg *Config, s *Server, log *slog.Logger) *fleetwrite.Writer {
	m, k, rec := s.metrics, s.kicks, s.self
	return fleetwrite.New(fleetwrite.Config{
		Node:            cfg.Node.Name,
		PlatformDomains: cfg.Platform.Domains,
		APIPort:         cfg.Node.APIPort,
		Metrics:         m.reg,
		OnCommit:        func(string) { k.Reconcile() },
		// A change of this node's instances: a new generation for waiters (node/self),
		// and the record rewritten now.
		OnInstances: func() {
			rec.Changed()
			k.Heartbeat()
		},
		AuditRetention: time.Duration(cfg.Audit.Retention),
		RouteBudget:    cfg.Writes.RouteBudget(),
		DomainGroups:   cfg.Platform.DomainGroups(),
		Ports:          newPortChecker(cfg, log),
		Middlewares:    cfg.Traefik.Middlewares,
	}, s.st, s.identity, s.instances, log)
}

// newPortChecker builds the instance move's check of the new port (node/probe's
// Checker, with probing on or off): each check takes at most the probe timeout, at
// least 2 s and at most 5 s.
func newPortChecker(c *Config, log *slog.Logger) fleetwrite.PortChecker {
	addr, err := netip.ParseAddr(c.Node.Address)
	if err != nil {
		return nil // validated at load: node.address is an IP
	}
	return probe.NewChecker(addr, min(max(c.Probe.EffectiveTimeout(), 2*time.Second), 5*time.Second), log)
}

// newReconciler builds the reconcile loop (the only publisher, node/reconcile).
func newReconciler(s *Server, mem *reconcile.Memory, memDoc *routing.Document, apps *reconcile.Apps) *reconcile.Reconciler {
	cfg, rec := s.cfg, s.self
	return reconcile.New(reconcile.Options{
		Store: s.st, Publisher: s.pub, Log: s.log, Identity: s.identity,
		Self: cfg.nodeSettings(), SelfName: cfg.Node.Name,
		FleetOptions: cfg.fleetOptions,
		Metrics:      s.metrics.reg,
		Heartbeat:    time.Duration(cfg.Reconcile.Heartbeat),
		StateDir:     cfg.StateDir,
		Memory:       mem,
		MemoryDoc:    memDoc,
		OnAccepted:   s.kicks.Heartbeat,
		OnOwnRecord:  func(r fleet.NodeRecord) { rec.See(r, false, time.Now()) },
		Apps:         apps,
	})
}

// apiConfig hands the HTTP API the sections it reads, whole (httpapi.Sections), with
// each role's token in force (configured, else read from or minted to the state dir).
func apiConfig(cfg *Config, ingressTok, adminTok, readOnlyTok string) httpapi.Config {
	ing, adm, ro := cfg.Ingress, cfg.Admin, cfg.Readonly
	ing.Token, adm.Token, ro.Token = ingressTok, adminTok, readOnlyTok
	return httpapi.Sections{
		NodeName: cfg.Node.Name, NodeAddress: cfg.Node.Address, StateDir: cfg.StateDir,
		PlatformDomains: cfg.Platform.Domains,
		Ingress:         ing, Admin: adm, Readonly: ro,
		API: cfg.API, Limits: cfg.Limits, Writes: cfg.Writes, Ports: cfg.Ports,
		Reconcile: cfg.Reconcile, ACME: cfg.ACME, Traefik: cfg.Traefik,
	}.Config()
}

// nodeSettings are this node's settings as its record announces them.
func (c *Config) nodeSettings() fleet.NodeSettings {
	return fleet.NodeSettings{PlatformDomains: c.Platform.Domains, APIPublic: c.API.Public, DomainGroups: c.Platform.DomainGroups()}
}

// fleetOptions are the derivation's options (the reconciler fills Now per pass).
func (c *Config) fleetOptions() fleet.Options {
	return fleet.Options{
		PlatformDomains: c.Platform.Domains,
		APIPublic:       c.API.Public,
		NodeTTL:         time.Duration(c.Reconcile.NodeTTL),
		DomainGroups:    c.Platform.DomainGroups(),
	}
}

// newProber builds the prober of this node's instances (nil when probe.interval is 0).
func newProber(c *Config, log *slog.Logger, inst *fleetwrite.Registry, k *kicks, reg prometheus.Registerer,
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
		APIPort:    c.Node.APIPort,
		Instances:  inst.Records,
		Declared:   inst.Get,
		HealthPath: healthPath,
		OnChange:   k.Heartbeat,
		Metrics:    reg,
	})
}
