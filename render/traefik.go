package render

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/traefik/genconf/dynamic"
	"github.com/traefik/genconf/dynamic/types"

	"github.com/scafo/ingress/render/routing"
)

// Health checks.
const (
	// APIHealthPath is the node API's liveness path, the active check of API leaves.
	APIHealthPath = "/v1/healthz"
	// InstanceHealthPath is the node-delegated check of an application without its own
	// health path, asked of the node's API port: 200 while that node's instance of the
	// application is ready and accepts TCP connections.
	InstanceHealthPath = "/v1/health/instances/"

	// Passive checks (Traefik's PassiveServerHealthCheck). One failed request (no
	// response, or 5xx) marks the server down: that is Traefik's default and what the
	// docs/design.md §4 measurement "active+passive lose one request when a primary dies" was
	// taken with; a larger count loses that many requests on every node death. The
	// window is Traefik's default too; with an active check on the same load balancer
	// it only bounds the counting, because the active check, not a timer, marks the
	// server up again (within one interval). Both are written out, never left to
	// defaults: the plugin provider decodes with encoding/json, which applies none.
	passiveFailureWindow     = "10s"
	passiveMaxFailedAttempts = 1
)

// Traefik renders doc (already reordered by routing.Prefer when the poll asked for it)
// into a Traefik v3.6 dynamic configuration, JSON. It is a pure function of its
// arguments: the same document and options give the same bytes, whatever order maps
// iterate in. The output is compact JSON with sorted keys, no HTML escaping ("&&"
// stays "&&") and no trailing newline. A document with nothing to route renders as
// "{}", the one empty form Traefik's HTTP provider accepts ({"http":{}} it refuses).
//
// The document is checked with routing.Document.Validate, the one definition of a valid
// document, after its routes are put in host order (the render accepts them in any
// order, so route indices in errors count in host order, as Decode's do). The render
// adds one rule of its own: an upstream of a route without a health path needs its
// APIPort, which the node-delegated check asks.
//
// Errors: an invalid Options (errors.Is ErrOptions); a nil document; a document that
// breaks a rule, as a *routing.FieldError naming the field (errors.Is
// routing.ErrInvalid).
func Traefik(doc *routing.Document, opt Options) ([]byte, error) {
	return traefik(doc, opt, nil, nil)
}

// renderTraefik is Traefik with fleet certificates fc (nil: none), TraefikFleet.
func renderTraefik(doc *routing.Document, opt Options, fc *FleetCerts) ([]byte, error) {
	return traefik(doc, opt, nil, fc)
}

// TraefikGroups renders what the ingresses of groups load (keep selects routes; anything
// fleet-wide the render adds, such as the API apex or an ACME challenge router, is
// rendered whatever keep says): doc is
// routing.ForGroups(full, groups); its routes of those groups are rendered in full, the
// others (path-map targets in other groups) contribute their application's service
// only, never a router: their hosts are another group's. The API apex is rendered as
// in Traefik (it is fleet-wide); an apex's deny router looks at this output's custom
// wildcards only. With fleet certificates fc (nil: none), tls.certificates holds the
// certificates of the names this output routes (the hosts of the groups' routes and
// the API apexes) only.
func TraefikGroups(doc *routing.Document, opt Options, groups []string, fc *FleetCerts) ([]byte, error) {
	return traefik(doc, opt, groupFilter(groups), fc)
}

// groupFilter keeps the routes of groups.
func groupFilter(groups []string) func(*routing.Route) bool {
	return func(r *routing.Route) bool { return slices.Contains(groups, r.GroupOf()) }
}

func traefik(doc *routing.Document, opt Options, keep func(*routing.Route) bool, fc *FleetCerts) ([]byte, error) {
	o, err := opt.resolve()
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, errors.New("rendering Traefik configuration: nil document")
	}
	doc = routesInHostOrder(doc)
	return traefikResolved(doc, o, keep, fc)
}

// traefikResolved is traefik with resolved options; doc is in host order.
func traefikResolved(doc *routing.Document, o resolved, keep func(*routing.Route) bool, fc *FleetCerts) ([]byte, error) {
	if err := doc.Validate(); err != nil {
		return nil, fmt.Errorf("rendering Traefik configuration: %w", err)
	}
	r := renderer{
		keep:     keep,
		opt:      o,
		routers:  make(map[string]*dynamic.Router),
		services: make(map[string]*Service),
		tls:      make(map[string]*dynamic.RouterTLSConfig),
		fleet:    fc,
	}
	if err := r.render(doc); err != nil {
		return nil, fmt.Errorf("rendering Traefik configuration: %w", err)
	}
	if r.opt.interval == "" {
		// Automatic: sized once every check is known.
		iv := AutoHealthCheckInterval(len(r.checks)).String()
		for _, hc := range r.checks {
			hc.Interval = iv
		}
	}
	cfg := Configuration{TCP: r.tcpConfiguration()}
	r.acme(doc)
	cfg.TLS = fleetCertificates(fc, doc, keep)
	if len(r.routers) > 0 {
		cfg.HTTP = &HTTPConfiguration{Routers: r.routers, Services: r.services, Middlewares: middlewaresOf(r.opt)}
	}
	out, err := encodeConfiguration(&cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding Traefik configuration: %w", err)
	}
	return out, nil
}

// middlewaresOf is the http.middlewares of every configuration with routers: the
// retry middleware, or nil when retries are off. It is written whenever there are
// routers (every output with routers has an application or API router, which
// references it; an unreferenced middleware would be harmless anyway), so that it is
// a constant of the options and the incremental render writes it without looking.
func middlewaresOf(o resolved) map[string]*Middleware {
	if o.retry == nil {
		return nil
	}
	return map[string]*Middleware{RetryMiddleware: {Retry: o.retry}}
}

// routesInHostOrder returns doc, or when its routes are not sorted by host a shallow
// copy whose routes are (doc itself is never modified).
func routesInHostOrder(doc *routing.Document) *routing.Document {
	byHost := func(a, b routing.Route) int { return cmp.Compare(a.Host, b.Host) }
	if slices.IsSortedFunc(doc.Routes, byHost) {
		return doc
	}
	out := *doc
	out.Routes = slices.Clone(doc.Routes)
	slices.SortStableFunc(out.Routes, byHost)
	return &out
}

type renderer struct {
	// keep, when set, selects the routes whose routers are rendered (TraefikGroups).
	keep     func(*routing.Route) bool
	opt      resolved
	routers  map[string]*dynamic.Router
	services map[string]*Service
	tls      map[string]*dynamic.RouterTLSConfig // per host; nil entries when no TLS
	// checks are the active health checks written, for the automatic interval.
	checks []*dynamic.ServerHealthCheck
	// fleet is the fleet-certificate input (acme.go); nil without fleet certificates.
	fleet *FleetCerts
	// tcp* are the tcp section: the passthrough routes (passthrough.go), nil until one
	// is rendered.
	tcpRouters    map[string]*dynamic.TCPRouter
	tcpServices   map[string]*TCPService
	tcpTransports map[string]*TCPServersTransport
	// excluded are the passthrough hosts each custom wildcard covers (passthroughUnder):
	// its routers never match them.
	excluded map[string][]string
}

// app is one application's chain, shared by all its hosts and by every prefix that
// targets one of them.
type app struct {
	upstreams []routing.Upstream
	health    string
	service   string // what routers point at
	// mw are the middlewares of every router to the application: its own
	// (routing.Route.Middlewares), then the render's (routerMiddlewares).
	mw []string
	// passthrough: the application terminates TLS itself; service is its TCP service.
	passthrough   bool
	proxyProtocol int
}

// render renders doc, which routing.Document.Validate has accepted: every host, name,
// address and prefix is canonical, the hosts of one application agree on its upstreams
// and health path, and every path target is the exact host of a route.
func (r *renderer) render(doc *routing.Document) error {
	apps := make(map[string]*app)
	exact := make(map[string]*routing.Route, len(doc.Routes))
	for i := range doc.Routes {
		rt := &doc.Routes[i]
		if !routing.IsWildcard(rt.Host) {
			exact[rt.Host] = rt
		}
		if _, ok := apps[rt.Application]; ok {
			continue // the same chain (Validate: the hosts of an application agree)
		}
		if rt.Passthrough {
			// No HTTP health check asks anything of a passthrough application.
			apps[rt.Application] = &app{upstreams: rt.Upstreams, passthrough: true, proxyProtocol: rt.ProxyProtocol}
			continue
		}
		if rt.HealthPath == "" {
			if err := requireAPIPorts("routes["+strconv.Itoa(i)+"].upstreams", rt.Upstreams); err != nil {
				return err
			}
		}
		apps[rt.Application] = &app{upstreams: rt.Upstreams, health: rt.HealthPath, mw: rt.Middlewares}
	}

	for name, a := range apps {
		if a.passthrough {
			continue // its TCP service, made with its first kept route
		}
		a.service = r.chain(appServiceName(name), a.upstreams, func(u routing.Upstream) *dynamic.ServerHealthCheck {
			if a.health != "" {
				return r.healthCheck(a.health, 0)
			}
			return r.healthCheck(InstanceHealthPath+name, u.APIPort)
		})
	}

	svcOf := func(target string) (dest, bool) {
		t, ok := exact[target]
		if !ok {
			return dest{}, false
		}
		a := apps[t.Application]
		return dest{svc: a.service, mw: a.mw}, true
	}
	r.excluded = passthroughUnder(doc)
	var byTarget map[string][]string
	for i := range doc.Routes {
		rt := &doc.Routes[i]
		if r.keep != nil && !r.keep(rt) {
			continue // a path target of another group: its service only
		}
		if a := apps[rt.Application]; a.passthrough {
			if r.opt.front {
				continue // the layer-4 front routes it (Options.Front)
			}
			if a.service == "" {
				a.service = r.tcpService(rt.Application, a.upstreams, a.proxyProtocol)
			}
			r.tcpRouter(rt.Host, a.service)
			continue
		}
		a := apps[rt.Application]
		byTarget = r.routeRouters(rt, dest{svc: a.service, mw: a.mw}, svcOf, byTarget)
	}

	return r.api(doc)
}

// dest is where a router to an application goes: the service it points at, and the
// application's own middlewares (routing.Route.Middlewares), which every router to it
// lists before the render's (routerMiddlewares).
type dest struct {
	svc string
	mw  []string
}

// same reports whether d and o render the same routers.
func (d dest) same(o dest) bool { return d.svc == o.svc && slices.Equal(d.mw, o.mw) }

// routerMiddlewares is the middlewares list of a router to an application whose own
// middlewares are own: own in their order, then the render's retry middleware
// (r.opt.middlewares; none when retries are off). The retry goes last, next to the
// service, because Traefik runs a router's middlewares in list order, each wrapping
// the rest, and retry re-runs what comes after it: last, a retry re-sends the request
// to the service alone, never through the operator's middlewares again (a forwardAuth
// asked once per try, a rate limit counting one request several times); and a request
// an operator middleware answers (a redirect, a 401) never reaches the retry at all
// (docs/design.md §4).
func (r *renderer) routerMiddlewares(own []string) []string {
	if len(own) == 0 {
		return r.opt.middlewares
	}
	return append(slices.Clip(own), r.opt.middlewares...)
}

// routeRouters renders the routers of one route: its host router to d (the route's
// application), and, when it has a path map, its guard and its path routers to each
// target's application (svcOf; a target it does not know selects nothing), each path
// router with the middlewares of the application it selects (a prefix selects a
// route, and the route supplies everything else). byTarget is scratch space, returned
// for reuse. The full render and the fragment render (fragments.go) both call it, so
// the two write the same routers.
func (r *renderer) routeRouters(rt *routing.Route, d dest, svcOf func(target string) (dest, bool), byTarget map[string][]string) map[string][]string {
	hostMatch := hostMatcher(rt.Host)
	if ex := r.excluded[rt.Host]; len(ex) > 0 {
		hostMatch += " && " + passthroughExclusion(ex) // a wildcard covering passthrough hosts
	}
	hostPrio, guardPrio, pathPrio := PriorityHost, PriorityPathGuard, PriorityPath
	if routing.IsWildcard(rt.Host) {
		hostPrio, guardPrio, pathPrio = PriorityWildcard, PriorityWildcardPathGuard, PriorityWildcardPath
	}
	tls := r.tlsFor(rt.Host)
	r.router(hostRouterName(rt.Host), hostMatch, hostPrio, d.svc, tls, r.routerMiddlewares(d.mw))

	if len(rt.Paths) == 0 {
		return byTarget
	}
	clear(byTarget)
	if byTarget == nil {
		byTarget = make(map[string][]string)
	}
	for p, t := range rt.Paths {
		byTarget[t] = append(byTarget[t], p)
	}
	guarded := false
	for t, prefixes := range byTarget {
		td, ok := svcOf(t)
		if !ok {
			// Validate refuses such an entry (a target is the exact host of a route
			// of the document); were one here, a prefix without a route selects
			// nothing.
			continue
		}
		if !guarded {
			r.services[svcDeny] = emptyService()
			r.router(guardRouterName(rt.Host), guardRule(hostMatch), guardPrio, svcDeny, tls, nil)
			guarded = true
		}
		slices.Sort(prefixes)
		mw := r.routerMiddlewares(td.mw) // the selected application's
		if len(prefixes) <= r.opt.groupThreshold {
			for _, p := range prefixes {
				r.router(pathRouterName(rt.Host, p), prefixRule(hostMatch, p), pathPrio, td.svc, tls, mw)
			}
		} else {
			r.router(pathsRouterName(rt.Host, t), groupRule(hostMatch, prefixes), pathPrio, td.svc, tls, mw)
		}
	}
	return byTarget
}

// api renders the platform API apex: every node's API behind one chain, each apex
// routed to it except the denied prefixes.
func (r *renderer) api(doc *routing.Document) error {
	a := doc.API
	if a == nil || len(a.Hosts) == 0 {
		return nil
	}
	svc := r.chain(svcAPI, a.Upstreams, func(routing.Upstream) *dynamic.ServerHealthCheck {
		return r.healthCheck(APIHealthPath, 0)
	})
	for _, apex := range a.Hosts {
		tls := r.tlsFor(apex)
		// The apex gets the retry middleware too: a node's API process restarts in
		// place on every node upgrade, and a refused connection there is retried (on
		// the next node of the chain once the passive check has taken the first out)
		// instead of failing a deploy's PUT with 502. Writes are safe to retry this
		// way: Traefik retries only what never reached a backend's headers.
		r.router(apiRouterName(apex), apiRule(apex, a.Denied), PriorityAPI, svc, tls, r.opt.middlewares)
		// A denied request falls through to whatever else matches the apex. Normally
		// nothing does and Traefik answers 404; but a customer's wildcard covering the
		// apex would receive /v1/ingress/routes with the caller's token. Pin the denied
		// prefixes to a service without servers (503) in that case.
		if len(a.Denied) > 0 && r.wildcardCovers(doc, apex) {
			r.services[svcDeny] = emptyService()
			r.router(denyRouterName(apex), denyRule(apex, a.Denied), PriorityAPI, svcDeny, tls, nil)
		}
	}
	return nil
}

// wildcardCovers reports whether a custom wildcard route of doc matches host.
func (r *renderer) wildcardCovers(doc *routing.Document, host string) bool {
	for i := range doc.Routes {
		if r.keep != nil && !r.keep(&doc.Routes[i]) {
			continue
		}
		if routing.Covers(doc.Routes[i].Host, host) {
			return true
		}
	}
	return false
}

// requireAPIPorts is the render's own rule on top of routing.Document.Validate (where
// 0 means "unknown" and is valid): the upstreams of a route without a health path get
// the node-delegated check, asked of the upstream's APIPort. Without it the check
// would ask the instance itself for /v1/health/instances/<app>, fail, and take every
// upstream out.
func requireAPIPorts(field string, us []routing.Upstream) error {
	for j, u := range us {
		if u.APIPort == 0 {
			return &routing.FieldError{Field: field + "[" + strconv.Itoa(j) + "].apiPort", Value: "0",
				Rule: "is required when the route has no healthPath (the node-delegated health check asks that port)"}
		}
	}
	return nil
}

// chain renders ups as the service chain failover(u0, failover(u1, … u(n-1))) rooted at
// base and returns the name routers point at: base for a chain or for an empty list (a
// load balancer without servers, which answers 503: a host that has nothing ready must
// not fall through to another router), the leaf itself for one upstream.
//
// Which leaves are checked (docs/design.md §4): a failover switches to its fallback only when
// its main service reports down, which needs an active health check on the main; so
// every leaf with a fallback has one, and a passive one. The last leaf of a chain and a
// lone leaf have nothing to fail over to: they get neither. An active check there could
// only take the application offline when the check fails but the instance works (the
// node-delegated check while its node restarts), and a passive one could only turn one
// 5xx of a live instance into 503s for everyone until the next check.
//
// No failover carries healthCheck {}: Traefik (v3.6, getFailoverServiceHandler) then
// requires the fallback to report status, which the unchecked last leaf cannot, and a
// failover without it cannot report to its parent either. Routing does not need it: a
// failover whose fallback reports nothing treats it as up, so a request walks down the
// chain to the first leaf that is not marked down, and the last leaf answers for itself.
func (r *renderer) chain(base string, ups []routing.Upstream, hc func(routing.Upstream) *dynamic.ServerHealthCheck) string {
	n := len(ups)
	if n == 0 {
		r.services[base] = emptyService()
		return base
	}
	leaves := make([]string, n)
	for i, u := range ups {
		leaves[i] = leafName(base, i, u.Node)
		lb := &LoadBalancer{ServersLoadBalancer: dynamic.ServersLoadBalancer{
			Servers:        []dynamic.Server{{URL: "http://" + u.Address}},
			PassHostHeader: ptr(true),
		}}
		if i < n-1 {
			check := hc(u)
			r.checks = append(r.checks, check)
			lb.HealthCheck = check
			lb.PassiveHealthCheck = &PassiveHealthCheck{
				FailureWindow:     passiveFailureWindow,
				MaxFailedAttempts: passiveMaxFailedAttempts,
			}
		}
		r.services[leaves[i]] = &Service{LoadBalancer: lb}
	}
	if n == 1 {
		return leaves[0]
	}
	for i := 0; i < n-1; i++ {
		fallback := failoverName(base, i+1)
		if i == n-2 {
			fallback = leaves[n-1]
		}
		r.services[failoverName(base, i)] = &Service{Failover: &dynamic.Failover{
			Service:  leaves[i],
			Fallback: fallback,
		}}
	}
	return base
}

func emptyService() *Service {
	return &Service{LoadBalancer: &LoadBalancer{ServersLoadBalancer: dynamic.ServersLoadBalancer{PassHostHeader: ptr(true)}}}
}

// healthCheck is an active HTTP check of path, on the server's own port (port 0) or on
// port, at the configured interval ("" when automatic: filled in by Traefik once every
// check is known). followRedirects is written out (Traefik's default, true) because genconf's
// field has no omitempty and would otherwise say null.
func (r *renderer) healthCheck(path string, port int) *dynamic.ServerHealthCheck {
	return &dynamic.ServerHealthCheck{
		Path:            path,
		Port:            port,
		Interval:        r.opt.interval,
		Timeout:         r.opt.timeout,
		FollowRedirects: ptr(true),
	}
}

// router adds a router; mw is its middlewares: on the routers to an application its
// own and the retry middleware (routerMiddlewares), r.opt.middlewares (the retry
// middleware, or nil when retries are off) on those to the API, nil on those to the
// deny service (no servers: nothing to retry, nothing of an application's to run).
func (r *renderer) router(name, rule string, priority int, service string, tls *dynamic.RouterTLSConfig, mw []string) {
	r.routers[name] = &dynamic.Router{
		EntryPoints: r.opt.entryPoints,
		Middlewares: mw,
		Service:     service,
		Rule:        rule,
		Priority:    priority,
		TLS:         tls,
	}
}

// tlsFor is the tls section of every router of host: none without a cert resolver; a
// custom wildcard asks for its wildcard certificate (ACME cannot infer one from a
// HostRegexp); with platform wildcard certificates, a host directly under a platform
// domain, and the apex itself, ask for the one certificate main=apex, sans=[*.apex],
// which Traefik obtains once however many routers name it; anything else lets Traefik
// take the name from the Host rule.
func (r *renderer) tlsFor(host string) *dynamic.RouterTLSConfig {
	if r.managed(host) {
		return fleetTLS
	}
	if r.opt.certResolver == "" {
		return nil
	}
	if t, ok := r.tls[host]; ok {
		return t
	}
	t := &dynamic.RouterTLSConfig{CertResolver: r.opt.certResolver}
	if routing.IsWildcard(host) {
		t.Domains = []types.Domain{{Main: host}}
	} else if r.opt.wildcardCerts {
		if pd := r.platformDomainOf(host); pd != "" {
			t.Domains = []types.Domain{{Main: pd, SANs: []string{"*." + pd}}}
		}
	}
	r.tls[host] = t
	return t
}

// platformDomainOf returns the longest platform domain that host equals or sits one
// label under, or "". This is certificate coverage (main=apex, sans=["*.apex"] covers
// the apex and exactly one label below it), deliberately not fleet.PlatformOwner,
// which is ownership: any depth strictly below a platform domain, apex excluded.
func (r *renderer) platformDomainOf(host string) string {
	best := ""
	_, parent, _ := strings.Cut(host, ".")
	for _, pd := range r.opt.platformDomains {
		if (host == pd || parent == pd) && len(pd) > len(best) {
			best = pd
		}
	}
	return best
}

func ptr[T any](v T) *T { return &v }
