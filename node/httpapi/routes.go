package httpapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
)

// The route table: every route of the node's HTTP API, once, with its attributes. The
// guards read the attributes (the connection reserve, ?wait=applied on instance
// writes) instead of matching path literals of their own.

// routeGroup is the middleware a route sits behind.
type routeGroup int

const (
	// groupPublic: anonymous (health probes, the ACME challenge, metrics).
	groupPublic routeGroup = iota
	// groupIngress: the ingress token, or the admin's (requireIngress).
	groupIngress
	// groupWrite: the write API (a foreign store refused, authenticated, rate-limited,
	// ?wait=applied).
	groupWrite
	// groupAdmin: the write API, admin only.
	groupAdmin
	// groupStorage and groupStorageWrite: /v1/storage (the ingress token only), its
	// patterns relative to it; writes refused on a foreign store.
	groupStorage
	groupStorageWrite
)

// reserveKind says whether a request may use the connection reserve (limits.go).
type reserveKind int

const (
	reserveNo reserveKind = iota
	// reserveAnyone: a health probe or the applied probe's callback, without a token.
	reserveAnyone
	// reserveIngress: with the ingress (or admin) token.
	reserveIngress
)

// route is one route of the table.
type route struct {
	group           routeGroup
	method, pattern string
	h               http.Handler
	// reserve: a GET or HEAD without a body on this route is admitted from the
	// connection reserve (with the ingress or admin token for reserveIngress). A pattern
	// with {params} admits everything under its literal prefix (routeTable.reserve).
	reserve reserveKind
	// instanceWrite: a write of this node's instance {app}: with ?wait=applied it waits
	// for this node's record to announce it too (waitapplied.go).
	instanceWrite bool
	// anyHost: answered whatever the request's Host (the Host guard, hosts.go, lets it
	// through); a pattern with {params} covers everything under its literal prefix.
	anyHost bool
	// readOnly: the read-only token may make this request (a GET that changes nothing:
	// status, the keyless routing document, applications, claims, instances, audit);
	// the guards (auth.go) refuse it on every other route, 403 naming its role.
	readOnly bool
}

// handlers are the API's handlers by resource, which the route table routes to.
type handlers struct {
	health    *healthHandler
	poll      *pollHandler
	status    *statusHandler
	apps      *appsHandler
	instances *instancesHandler
	tokens    *tokensHandler
	audit     *auditHandler
	applied   *appliedHandler
	challenge challengeHandler
	metrics   *prometheus.Registry // served on /metrics
	storage   *storageAPI
}

// routeTable is the node's HTTP API: every route, once, with its handler and attributes.
type routeTable []route

type hf = http.HandlerFunc

func newRouteTable(h handlers) routeTable {
	return routeTable{
		{group: groupPublic, method: http.MethodGet, pattern: api.PathHealthz, h: hf(healthz), reserve: reserveAnyone},
		{group: groupPublic, method: http.MethodGet, pattern: api.PathReadyz, h: hf(h.health.readyz), reserve: reserveAnyone},
		{group: groupPublic, method: http.MethodGet, pattern: api.PathInstanceHealth + "{app}", h: hf(h.health.instanceHealth), reserve: reserveAnyone},
		{group: groupPublic, method: http.MethodGet, pattern: render.ACMEChallengePath + "{token}", h: h.challenge,
			// Asked by the CA for an application's host, through an ingress that passes the
			// Host on; the handler answers only the fleet's names (fleetcerts.HandleChallenge).
			anyHost: true},
		{group: groupPublic, method: http.MethodGet, pattern: api.PathMetrics, h: promhttp.HandlerFor(h.metrics, promhttp.HandlerOpts{})},
		// The status page: static assets holding no data (its script calls the API with the
		// operator's token), on the node's own listener only (ui.go).
		{group: groupPublic, method: http.MethodGet, pattern: api.PathUIRoot, h: hf(handleUIRoot)},
		{group: groupPublic, method: http.MethodGet, pattern: api.PathUI + "*", h: hf(handleUI)},
		// The applied probe's callback: Traefik's own traffic (from the address its apex
		// clients share), a GET without a body verified by its MAC: admitted like a health probe.
		{group: groupPublic, method: http.MethodGet, pattern: api.PathIngressApplied + "{ingress}/{revision}/{mac}", h: h.applied, reserve: reserveAnyone},

		{group: groupIngress, method: http.MethodGet, pattern: api.PathStatus, h: h.status, reserve: reserveIngress, readOnly: true},
		// The read-only token reads the routing document here (the status page's hosts and
		// upstreams), never as an ingress: the poll handler refuses it the Traefik
		// configuration (it can carry private keys) and any report or applied probe.
		{group: groupIngress, method: http.MethodGet, pattern: api.PathIngress + "{format}", h: h.poll, reserve: reserveIngress, readOnly: true},

		{group: groupWrite, method: http.MethodGet, pattern: api.PathApps + "/{app}/domains/{host}/paths", h: hf(h.apps.getPaths)},
		{group: groupWrite, method: http.MethodPut, pattern: api.PathApps + "/{app}/domains/{host}/paths", h: hf(h.apps.putPaths)},
		{group: groupWrite, method: http.MethodPost, pattern: api.PathNodeInstances + "/{app}", h: hf(h.instances.allocate), instanceWrite: true},
		{group: groupWrite, method: http.MethodPut, pattern: api.PathNodeInstances + "/{app}", h: hf(h.instances.put), instanceWrite: true},
		{group: groupWrite, method: http.MethodDelete, pattern: api.PathNodeInstances + "/{app}", h: hf(h.instances.release), instanceWrite: true},

		{group: groupAdmin, method: http.MethodGet, pattern: api.PathApps, h: hf(h.apps.listApps), readOnly: true},
		{group: groupAdmin, method: http.MethodGet, pattern: api.PathApps + "/{app}", h: hf(h.apps.getApp), readOnly: true},
		{group: groupAdmin, method: http.MethodPut, pattern: api.PathApps + "/{app}", h: hf(h.apps.putApp)},
		{group: groupAdmin, method: http.MethodDelete, pattern: api.PathApps + "/{app}", h: hf(h.apps.deleteApp)},
		{group: groupAdmin, method: http.MethodGet, pattern: api.PathApps + "/{app}/domains/{host}", h: hf(h.apps.getClaim), readOnly: true},
		{group: groupAdmin, method: http.MethodPut, pattern: api.PathApps + "/{app}/domains/{host}", h: hf(h.apps.putClaim)},
		{group: groupAdmin, method: http.MethodDelete, pattern: api.PathApps + "/{app}/domains/{host}", h: hf(h.apps.deleteClaim)},
		{group: groupAdmin, method: http.MethodGet, pattern: api.PathNodeInstances, h: hf(h.instances.list), readOnly: true},
		{group: groupAdmin, method: http.MethodPost, pattern: api.PathTokens, h: hf(h.tokens.create)},
		{group: groupAdmin, method: http.MethodDelete, pattern: api.PathTokens + "/{id}", h: hf(h.tokens.revoke)},
		{group: groupAdmin, method: http.MethodGet, pattern: api.PathAudit, h: h.audit, readOnly: true},

		// /v1/storage, its patterns relative to it (storage.measure and the storage token
		// in front).
		{group: groupStorage, method: http.MethodGet, pattern: "/keys", h: hf(h.storage.get)},
		{group: groupStorage, method: http.MethodGet, pattern: "/keys/*", h: hf(h.storage.get)},
		{group: groupStorage, method: http.MethodHead, pattern: "/keys/*", h: hf(h.storage.head)},
		{group: groupStorageWrite, method: http.MethodPut, pattern: "/keys/*", h: hf(h.storage.put)},
		{group: groupStorageWrite, method: http.MethodDelete, pattern: "/keys/*", h: hf(h.storage.delete)},
		{group: groupStorageWrite, method: http.MethodPost, pattern: "/locks/*", h: hf(h.storage.lock)},
		{group: groupStorageWrite, method: http.MethodDelete, pattern: "/locks/*", h: hf(h.storage.unlock)},
	}
}

// Handler is the node's HTTP API: every route of the table, behind its guards.
func (s *API) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(noStore, s.conns.guard, s.hosts.check, s.deadlines.bound, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not found", r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method not allowed", r.Method+" "+r.URL.Path)
	})
	s.table.mount(r, groupPublic)
	r.Group(func(r chi.Router) {
		r.Use(s.auth.requireIngress) // the ingress token, or the admin's
		s.table.mount(r, groupIngress)
	})
	r.Group(func(r chi.Router) {
		r.Use(refuseWritesToAForeignStore(s.identity))
		r.Use(s.auth.authenticate)
		r.Use(s.writes.limit)
		r.Use(s.waiter.wait)
		s.table.mount(r, groupWrite)
		r.Group(func(r chi.Router) {
			r.Use(adminOnly)
			s.table.mount(r, groupAdmin)
		})
	})
	r.Route(api.PathStorage, func(r chi.Router) {
		r.Use(s.storage.measure, s.auth.requireStorageToken)
		s.table.mount(r, groupStorage)
		r.Group(func(r chi.Router) {
			r.Use(refuseWritesToAForeignStore(s.identity))
			s.table.mount(r, groupStorageWrite)
		})
	})
	return r
}

// mount registers the routes of group g.
func (t routeTable) mount(r chi.Router, g routeGroup) {
	for _, rt := range t {
		if rt.group == g {
			r.Method(rt.method, rt.pattern, rt.h)
		}
	}
}

// reserve reports what of the connection reserve path may use (the routes'
// reserve attribute: an exact path, or, for a pattern with {params}, everything under
// the literal prefix before its first one; the longest such prefix decides, so
// /v1/ingress/applied/… is the callback's, not the polls' /v1/ingress/{format}).
func (t routeTable) reserve(path string) reserveKind {
	kind, longest := reserveNo, -1
	for _, rt := range t {
		if rt.reserve == reserveNo {
			continue
		}
		if i := strings.Index(rt.pattern, "{"); i >= 0 {
			if prefix := rt.pattern[:i]; strings.HasPrefix(path, prefix) && len(prefix) > longest {
				kind, longest = rt.reserve, len(prefix)
			}
		} else if path == rt.pattern {
			return rt.reserve
		}
	}
	return kind
}

// anyHost reports whether path is answered whatever the request's Host (the routes'
// anyHost attribute: an exact path, or everything under the literal prefix of a pattern
// with {params}).
func (t routeTable) anyHost(path string) bool {
	for _, rt := range t {
		if !rt.anyHost {
			continue
		}
		if i := strings.Index(rt.pattern, "{"); i >= 0 && strings.HasPrefix(path, rt.pattern[:i]) || path == rt.pattern {
			return true
		}
	}
	return false
}

// instanceWrite reports whether the matched route of r is an instance write (its
// instanceWrite attribute; r has been routed).
func (t routeTable) instanceWrite(r *http.Request) bool {
	rt := t.matched(r)
	return rt != nil && rt.instanceWrite
}

// readOnly reports whether the read-only token may make r (the matched route's readOnly
// attribute; r has been routed). A HEAD is a GET's (middleware.GetHead routes it so).
func (t routeTable) readOnly(r *http.Request) bool {
	rt := t.matched(r)
	return rt != nil && rt.readOnly && (r.Method == http.MethodGet || r.Method == http.MethodHead)
}

// matched is the route r was routed to (nil: none, or r not routed). A HEAD matches its
// GET route.
func (t routeTable) matched(r *http.Request) *route {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil {
		return nil
	}
	pattern, method := rctx.RoutePattern(), r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	for i, rt := range t {
		if rt.pattern == pattern && (rt.method == r.Method || rt.method == method) {
			return &t[i]
		}
	}
	return nil
}
