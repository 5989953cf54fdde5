package httpapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

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
	handle          func(*API, http.ResponseWriter, *http.Request)
	build           func(*API) http.Handler // instead of handle: built once per Handler
	storage         func(*storageAPI, http.ResponseWriter, *http.Request)
	// reserve: a GET or HEAD without a body on this route is admitted from the
	// connection reserve (with the ingress or admin token for reserveIngress). A pattern
	// with {params} admits everything under its literal prefix (reserveRoute).
	reserve reserveKind
	// instanceWrite: a write of this node's instance {app}: with ?wait=applied it waits
	// for this node's record to announce it too (waitapplied.go).
	instanceWrite bool
}

// routes is the node's HTTP API.
var routes = []route{
	{group: groupPublic, method: http.MethodGet, pattern: api.PathHealthz, handle: (*API).handleHealthz, reserve: reserveAnyone},
	{group: groupPublic, method: http.MethodGet, pattern: api.PathReadyz, handle: (*API).handleReadyz, reserve: reserveAnyone},
	{group: groupPublic, method: http.MethodGet, pattern: api.PathInstanceHealth + "{app}", handle: (*API).handleInstanceHealth, reserve: reserveAnyone},
	{group: groupPublic, method: http.MethodGet, pattern: render.ACMEChallengePath + "{token}", handle: (*API).handleACMEChallenge},
	{group: groupPublic, method: http.MethodGet, pattern: api.PathMetrics, build: (*API).metricsHandler},
	// The status page: static assets holding no data (its script calls the API with the
	// operator's token), on the node's own listener only (ui.go).
	{group: groupPublic, method: http.MethodGet, pattern: api.PathUIRoot, handle: (*API).handleUIRoot},
	{group: groupPublic, method: http.MethodGet, pattern: api.PathUI + "*", handle: (*API).handleUI},
	// The applied probe's callback: Traefik's own traffic (from the address its apex
	// clients share), a GET without a body verified by its MAC: admitted like a health probe.
	{group: groupPublic, method: http.MethodGet, pattern: api.PathIngressApplied + "{ingress}/{revision}/{mac}", handle: (*API).handleApplied, reserve: reserveAnyone},

	{group: groupIngress, method: http.MethodGet, pattern: api.PathStatus, handle: (*API).handleStatus, reserve: reserveIngress},
	{group: groupIngress, method: http.MethodGet, pattern: api.PathIngress + "{format}", handle: (*API).handleIngress, reserve: reserveIngress},

	{group: groupWrite, method: http.MethodGet, pattern: api.PathApps + "/{app}/domains/{host}/paths", handle: (*API).handleGetPaths},
	{group: groupWrite, method: http.MethodPut, pattern: api.PathApps + "/{app}/domains/{host}/paths", handle: (*API).handlePutPaths},
	{group: groupWrite, method: http.MethodPost, pattern: api.PathNodeInstances + "/{app}", handle: (*API).handleAllocateInstance, instanceWrite: true},
	{group: groupWrite, method: http.MethodPut, pattern: api.PathNodeInstances + "/{app}", handle: (*API).handlePutInstance, instanceWrite: true},
	{group: groupWrite, method: http.MethodDelete, pattern: api.PathNodeInstances + "/{app}", handle: (*API).handleDeleteInstance, instanceWrite: true},

	{group: groupAdmin, method: http.MethodGet, pattern: api.PathApps, handle: (*API).handleListApps},
	{group: groupAdmin, method: http.MethodGet, pattern: api.PathApps + "/{app}", handle: (*API).handleGetApp},
	{group: groupAdmin, method: http.MethodPut, pattern: api.PathApps + "/{app}", handle: (*API).handlePutApp},
	{group: groupAdmin, method: http.MethodDelete, pattern: api.PathApps + "/{app}", handle: (*API).handleDeleteApp},
	{group: groupAdmin, method: http.MethodGet, pattern: api.PathApps + "/{app}/domains/{host}", handle: (*API).handleGetClaim},
	{group: groupAdmin, method: http.MethodPut, pattern: api.PathApps + "/{app}/domains/{host}", handle: (*API).handlePutClaim},
	{group: groupAdmin, method: http.MethodDelete, pattern: api.PathApps + "/{app}/domains/{host}", handle: (*API).handleDeleteClaim},
	{group: groupAdmin, method: http.MethodGet, pattern: api.PathNodeInstances, handle: (*API).handleListInstances},
	{group: groupAdmin, method: http.MethodPost, pattern: api.PathTokens, handle: (*API).handleCreateToken},
	{group: groupAdmin, method: http.MethodDelete, pattern: api.PathTokens + "/{id}", handle: (*API).handleDeleteToken},
	{group: groupAdmin, method: http.MethodGet, pattern: api.PathAudit, handle: (*API).handleAudit},

	{group: groupStorage, method: http.MethodGet, pattern: "/keys", storage: (*storageAPI).get},
	{group: groupStorage, method: http.MethodGet, pattern: "/keys/*", storage: (*storageAPI).get},
	{group: groupStorage, method: http.MethodHead, pattern: "/keys/*", storage: (*storageAPI).head},
	{group: groupStorageWrite, method: http.MethodPut, pattern: "/keys/*", storage: (*storageAPI).put},
	{group: groupStorageWrite, method: http.MethodDelete, pattern: "/keys/*", storage: (*storageAPI).delete},
	{group: groupStorageWrite, method: http.MethodPost, pattern: "/locks/*", storage: (*storageAPI).lock},
	{group: groupStorageWrite, method: http.MethodDelete, pattern: "/locks/*", storage: (*storageAPI).unlock},
}

// Handler is the node's HTTP API: every route of the table, behind its guards.
func (s *API) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.guardReserve, s.boundRequest, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not found", r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method not allowed", r.Method+" "+r.URL.Path)
	})
	s.mount(r, groupPublic)
	r.Group(func(r chi.Router) {
		r.Use(s.requireIngress) // the ingress token, or the admin's
		s.mount(r, groupIngress)
	})
	r.Group(func(r chi.Router) {
		r.Use(s.refuseWritesToAForeignStore)
		r.Use(s.authenticate)
		r.Use(s.limitWrites)
		r.Use(s.waitApplied)
		s.mount(r, groupWrite)
		r.Group(func(r chi.Router) {
			r.Use(adminOnly)
			s.mount(r, groupAdmin)
		})
	})
	a := s.newStorageAPI()
	r.Route(api.PathStorage, func(r chi.Router) {
		r.Use(a.measure, s.requireStorageToken)
		a.mount(r, groupStorage)
		r.Group(func(r chi.Router) {
			r.Use(s.refuseWritesToAForeignStore)
			a.mount(r, groupStorageWrite)
		})
	})
	return r
}

// mount registers the routes of group g.
func (s *API) mount(r chi.Router, g routeGroup) {
	for _, rt := range routes {
		switch {
		case rt.group != g:
		case rt.build != nil:
			r.Method(rt.method, rt.pattern, rt.build(s))
		default:
			h := rt.handle
			r.MethodFunc(rt.method, rt.pattern, func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
		}
	}
}

// mount registers the storage routes of group g.
func (a *storageAPI) mount(r chi.Router, g routeGroup) {
	for _, rt := range routes {
		if rt.group == g {
			h := rt.storage
			r.MethodFunc(rt.method, rt.pattern, func(w http.ResponseWriter, r *http.Request) { h(a, w, r) })
		}
	}
}

// reserveRoute reports what of the connection reserve path may use (the routes'
// reserve attribute: an exact path, or, for a pattern with {params}, everything under
// the literal prefix before its first one; the longest such prefix decides, so
// /v1/ingress/applied/… is the callback's, not the polls' /v1/ingress/{format}).
func reserveRoute(path string) reserveKind {
	kind, longest := reserveNo, -1
	for _, rt := range routes {
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

// isInstanceWrite reports whether the matched route of r is an instance write (its
// instanceWrite attribute; r has been routed).
func isInstanceWrite(r *http.Request) bool {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil {
		return false
	}
	pattern := rctx.RoutePattern()
	for _, rt := range routes {
		if rt.instanceWrite && rt.method == r.Method && rt.pattern == pattern {
			return true
		}
	}
	return false
}
