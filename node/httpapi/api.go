// Package httpapi is the node's HTTP API, by resource: a handler type per resource with
// its own small dependencies, adapters over the subsystems (pollHandler, statusHandler,
// appsHandler, instancesHandler, tokensHandler, auditHandler, healthHandler,
// appliedHandler, challengeHandler, storageAPI), and the guards in front of them, types
// too (authenticator, connGuard, deadlines, writeGuard, appliedWaiter, refusals).
// routes.go is the one route table: every path, method, handler and attribute of the
// API. A poll's inputs are parsed once, in poll_parse.go.
//
// The root package (node) builds the subsystems, hands them to New and owns the
// lifetimes; nothing here starts a goroutine that outlives a request, and nothing here
// imports the root.
package httpapi

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// Config is what the API reads of the node's configuration (node.Config's values, set
// once at construction).
type Config struct {
	NodeName    string // node.name
	NodeAddress string // node.address: where this node's instances listen
	StateDir    string // for the adopt hint of /v1/status

	Heartbeat       time.Duration // reconcile.heartbeat: the ingress fleet view's age
	NodeTTL         time.Duration // reconcile.nodeTTL
	PortsQuarantine time.Duration // ports.quarantine (an instance release's answer)

	// The request bounds (limits.*, limits.go).
	BodyTimeout, WriteTimeout, ConnMaxAge time.Duration
	RejectLog                             time.Duration // limits.rejectLog

	WriteRate  float64 // writes.rate
	WriteBurst int     // writes.burst

	// The tokens: the current ones and those still accepted during a rotation.
	IngressToken, AdminToken, ReadOnlyToken          string
	IngressPrevious, AdminPrevious, ReadOnlyPrevious []string

	// Hosts are the DNS names the API answers to besides IP addresses, localhost and
	// NodeName: the platform domains (the API apex) and api.allowedHosts (hosts.go).
	Hosts []string

	// ACMEInline: fleet certificates are delivered inside the rendered configuration
	// (acme.enabled with acme.delivery inline).
	ACMEInline bool

	// Middlewares are the Traefik middlewares this node's configuration declares
	// (traefik.middlewares): /v1/status warns of an application listing another.
	Middlewares []string
}

// Why a request or connection was refused (scafo_requests_refused_total's reason label;
// a fixed set, every one exported from the start at 0).
const (
	RefusedWriteRate     = "write_rate"      // 429: the token is past writes.rate (ratelimit.go)
	RefusedToken         = "token"           // 401 no or bad token, 403 a token the endpoint refuses (rejectRequest)
	RefusedTokenLookups  = "token_lookups"   // 429: the token's lookup budget is spent (auth.go, through rejectRequest)
	RefusedReadRate      = "read_rate"       // 429: the read-only token is past its store-read budget (auth.go)
	RefusedConnReserve   = "conn_reserve"    // 503 on a reserved connection: the general part is full (limits.go)
	RefusedConnPerSource = "conn_per_source" // 503: the address holds limits.maxConnsPerSource (limits.go)
	RefusedConnLimit     = "conn_limit"      // bare 503 and close: at limits.maxConns (limits.go)
)

// RefusalReasons are every reason label.
var RefusalReasons = []string{RefusedWriteRate, RefusedToken, RefusedTokenLookups, RefusedReadRate, RefusedConnReserve, RefusedConnPerSource, RefusedConnLimit}

// Deps are the subsystems the handlers adapt. Certs and Probes may be nil (no
// acme.enabled, probe.interval 0).
type Deps struct {
	Store     store.Store
	Identity  StoreIdentity
	Publisher Publisher
	Reconcile Reconciler
	Self      SelfRecord
	Ingresses *ingress.Book
	Instances Instances
	Writer    *fleetwrite.Writer
	Certs     *fleetcerts.Manager
	Probes    *probe.Prober
	// KickHeartbeat asks for this node's record to be rewritten now (a write with
	// ?wait=applied waits for it).
	KickHeartbeat func()
}

// Reconciler is what the API reads of the reconcile loop (*reconcile.Reconciler).
type Reconciler interface {
	Status() reconcile.Status
	KnownApps() reconcile.AppView
}

// Publisher is what the API reads of the published snapshot (*publish.Publisher).
type Publisher interface {
	Current() *publish.Snapshot
	Body(s *publish.Snapshot, req publish.Request) (*publish.Rendered, error)
}

// StoreIdentity is whether the store is the one this node served (*store.Identity).
type StoreIdentity interface {
	Foreign() bool
	ForeignReason() string
}

// SelfRecord is what the API reads of this node's own record (*self.Record): its
// heartbeat's health, a name conflict, a shared or loopback address, and the announcements ?wait=applied waits for.
type SelfRecord interface {
	Err() *string
	FailingSince() time.Time
	Conflict(now time.Time) *self.Conflict
	AddressReport() *self.AddressReport
	Generation() uint64
	Await(ctx context.Context, gen uint64, deadline time.Time, want func(map[string]fleet.Instance) string) (serial uint64, ok bool, why string)
}

// Instances are this node's declared instances (*fleetwrite.Registry).
type Instances interface {
	Get(app string) (fleet.Instance, bool)
	Records() map[string]fleet.Instance
}

var (
	_ Reconciler    = (*reconcile.Reconciler)(nil)
	_ Publisher     = (*publish.Publisher)(nil)
	_ StoreIdentity = (*store.Identity)(nil)
	_ SelfRecord    = (*self.Record)(nil)
	_ Instances     = (*fleetwrite.Registry)(nil)
)

// API is the node's HTTP API: the route table, with the handlers by resource, and the
// guards in front of them. Handler serves it; Listen wraps the listener it is served on;
// Close releases long-polls.
type API struct {
	table routeTable

	conns     *connGuard
	hosts     *hostGuard
	deadlines *deadlines
	auth      *authenticator
	writes    *writeGuard
	waiter    *appliedWaiter
	identity  StoreIdentity // writes are refused on a foreign store
	storage   *storageAPI   // /v1/storage, its metrics around its routes

	shutdown chan struct{} // closed on shutdown: releases long-polls
	once     sync.Once
}

// New builds the API over d, registering its series on reg (served on /metrics; a
// registry that holds them already is an error, not a panic). It starts no goroutine (TestAPIStartsNoGoroutine).
func New(cfg Config, log *slog.Logger, reg *prometheus.Registry, d Deps) (*API, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	tokens := &nodeTokens{ingress: cfg.IngressToken, admin: cfg.AdminToken, readOnly: cfg.ReadOnlyToken,
		ingressPrevious: cfg.IngressPrevious, adminPrevious: cfg.AdminPrevious, readOnlyPrevious: cfg.ReadOnlyPrevious}
	refused := &refusals{counter: m.refused, log: newRejectLogger(log, cfg.RejectLog)}
	dl := &deadlines{body: cfg.BodyTimeout, write: cfg.WriteTimeout}
	s := &API{
		deadlines: dl,
		writes:    &writeGuard{writes: newWriteLimiter(cfg.WriteRate, cfg.WriteBurst), refused: refused},
		identity:  d.Identity,
		storage:   newStorageAPI(d.Store, cfg.NodeName, log, reg),
		shutdown:  make(chan struct{}),
	}
	s.table = newRouteTable(handlers{
		health: &healthHandler{pub: d.Publisher, instances: d.Instances, probes: d.Probes, nodeAddress: cfg.NodeAddress},
		poll: &pollHandler{nodeName: cfg.NodeName, keysInline: cfg.ACMEInline, tokens: tokens, refused: refused,
			pub: d.Publisher, ingresses: d.Ingresses, writer: d.Writer, deadlines: dl, log: log,
			polls: m.polls, longPolls: m.longPolls, shutdown: s.shutdown},
		status: &statusHandler{nodeName: cfg.NodeName, stateDir: cfg.StateDir, nodeTTL: cfg.NodeTTL,
			rec: d.Reconcile, self: d.Self, identity: d.Identity, pub: d.Publisher, probes: d.Probes,
			instances: d.Instances, ingresses: d.Ingresses, certs: d.Certs, middlewares: cfg.Middlewares},
		apps:      &appsHandler{writer: d.Writer, log: log, pub: d.Publisher, rec: d.Reconcile, nodeName: cfg.NodeName},
		instances: &instancesHandler{writer: d.Writer, log: log, quarantine: cfg.PortsQuarantine},
		tokens:    &tokensHandler{writer: d.Writer, log: log},
		audit:     &auditHandler{writer: d.Writer, log: log},
		applied:   &appliedHandler{writer: d.Writer, ingresses: d.Ingresses},
		challenge: challengeHandler{certs: d.Certs},
		metrics:   reg,
		storage:   s.storage,
	})
	s.auth = newAuthenticator(cfg, tokens, d.Writer, refused, log, s.table.readOnly)
	s.hosts = newHostGuard(append(slices.Clone(cfg.Hosts), cfg.NodeName), s.table.anyHost, refused.log)
	s.conns = &connGuard{maxAge: cfg.ConnMaxAge, tokens: tokens, refused: refused, reserve: s.table.reserve}
	s.waiter = &appliedWaiter{st: d.Store, ingresses: d.Ingresses, self: d.Self, instances: d.Instances,
		probes: d.Probes, deadlines: dl, instanceWrite: s.table.instanceWrite, kickHeartbeat: d.KickHeartbeat}
	return s, nil
}

// Listen caps the connections of ln (the connection guard: total, of which reserved
// are the reserve, perSource general ones per remote address) and serves the
// requests' guards from it. Serve the API on the listener it returns, with
// ConnContext as the http.Server's ConnContext.
func (s *API) Listen(ln net.Listener, total, reserved, perSource int) net.Listener {
	return s.conns.listen(ln, total, reserved, perSource)
}

// Close releases long-polls (they answer 304). Safe to call more than once.
func (s *API) Close() {
	s.once.Do(func() { close(s.shutdown) })
}
