// Package render turns a routing document into a Traefik v3.6 dynamic configuration
// (docs/design.md §4). Traefik is a pure function: the document (already reordered by
// routing.Prefer when the poll asked for ?prefer=) and Options in, JSON bytes out,
// byte-identical for identical input whatever order maps iterate in, because Traefik
// hashes the body and any byte change is a full reload that also resets health state.
// The output is built from github.com/traefik/genconf/dynamic types; the one field
// genconf lacks (the load balancer's passiveHealthCheck) has a minimal local type
// (types.go). testdata/ holds document → configuration golden pairs.
//
// Incremental writes the same bytes from per-application fragments kept across calls,
// through one entry point, Render(Request): a document that differs from the last in
// one application re-renders that application's routers and services and merges the
// rest; a document patched from the last one (Request.Delta) splices the changed
// applications into the output's last body. incremental.go holds the type, Render and
// the cache bounds; fragments.go what a fragment is and how one is made or reused;
// renderpass.go a render of a whole document; assemble.go the merge of fragments into
// one body; delta.go the patch of a body. TraefikGroups renders one ingress group's
// share (routing.ForGroups): routers for the group's hosts only, services for its
// applications and for those its path maps target in other groups.
//
// # Services: one failover chain per application
//
// Every host of an application and every path prefix that targets one of its hosts
// point at one service chain, so an application has one set of health checks however
// many names it answers to. Its ordered upstreams u0, u1, … become
//
//	app-<app>            failover(app-<app>.0.<node>, app-<app>.failover1)
//	app-<app>.failover1  failover(app-<app>.1.<node>, app-<app>.2.<node>)
//	app-<app>.<i>.<node> loadBalancer: one server http://<address>, passHostHeader,
//	                     active healthCheck and passiveHealthCheck (not on the last)
//
// With one upstream the routers point at its leaf; with none, at a load balancer
// without servers, which answers 503 (a host with nothing ready must not fall through to
// a covering wildcard's router). A path-map prefix whose target has nothing ready is not
// in the document at all (fleet.Derive): the host's own application answers it until
// the target is ready again.
//
// A Traefik failover switches to its fallback only when its main service reports
// itself down, and a load balancer reports status only when it has an active health
// check; so every leaf that has a fallback has one, and it is not optional. The last
// leaf of a chain and a lone leaf have nothing to fail over to and get no check at all,
// active or passive (docs/design.md §4, "Which leaves are checked"): a check there can only
// take the application offline while its instance works, which is what a node restart
// did to every single-placement application through the node-delegated check. No
// failover carries healthCheck {}: with it Traefik requires the fallback to report
// status, which the unchecked last leaf cannot; without it a failover treats its
// fallback as up, so a request walks down the chain to the first leaf not marked down.
// The active check asks the application's own health path when the document names one
// (Route.HealthPath); otherwise it asks the node that runs the instance, on that node's
// API port (Upstream.APIPort), at /v1/health/instances/<app>, which answers 200 only
// while the local instance is ready and accepts TCP. The node API chain's leaves check
// /v1/healthz.
//
// The check interval is Options.HealthCheckInterval when set; by default it is
// automatic (AutoHealthCheckInterval): 5 s, or checked leaves / HealthCheckBudget
// (200 checks/s) seconds when longer, so one Traefik's check rate stays within the
// budget whatever the fleet's size (measured: 400 checks/s cost Traefik 0.12 cores).
//
// Active checks alone lose every request for up to one interval when a primary dies;
// the passive check (one failed request, Traefik's default, within Traefik's default
// 10 s window) marks the dead server down on the first failure, so one request is lost
// (measured on v3.6.12). Passive checks, like active ones, are written on every leaf
// except the last of a chain (and a lone leaf): a passive check also fires on a live
// instance's 5xx answer, and where there is nothing to fail over to that can only turn
// one 5xx into 503s for everyone until the next active check. So checks only ever move
// traffic along the chain; the last hop is never taken out and answers for itself (a
// dead last instance gives Traefik's 502, where a checked one gave 503). Because Traefik's
// plugin provider decodes with encoding/json (no defaults applied), every value the
// checks depend on is written out, including followRedirects: true.
//
// # Passthrough
//
// A route with Passthrough (an application that terminates TLS itself) gets a TCP router,
// HostSNI of its exact name with tls.passthrough, to a TCP service holding its first
// upstream, and no HTTP router; a custom wildcard covering it excludes it with a negated
// HostRegexp. passthrough.go has the whole of it and why (docs/design.md §4,
// docs/passthrough.md).
//
// # Routers
//
// Every router has an explicit priority from a fixed band (see PriorityPath and the
// table beside it); Traefik's default, the rule's length, ties non-deterministically.
// From the top: path prefixes on an exact host; that host's path guard; exact hosts;
// the platform API apex; path prefixes on a custom wildcard; its path guard; custom
// wildcards. The order is the document's own lookup: exact host before wildcard, then
// the first path segment within the host found, so a wildcard's path map never takes a
// request for an exact host it also matches.
//
//   - Exact host: Host(`h`). Custom wildcard "*.shop.example.org":
//     HostRegexp(`^[a-z0-9-]+\.shop\.example\.org\.?$`), one label, quoted.
//   - Path prefixes are segment-exact (PathPrefix alone is a string prefix: /paulca
//     would take /paulcarson). While a (host, target) pair has at most
//     Options.PathGroupThreshold prefixes (64), one router per prefix, readable in the
//     dashboard: Host(`h`) && (Path(`/p`) || PathPrefix(`/p/`) || PathPrefix(`/p%2F`)).
//     Above, one router per pair: Host(`h`) && PathRegexp(`^/(?:p1|p2|…)(?:/|%2F|$)`),
//     prefixes sorted and regexp-quoted (measured on v3.6.12 with 10 000 prefixes: 17×
//     faster on a miss, half the reload time). Both forms pass the same tests.
//   - The API apex: Host(`apex`) && !<each api.denied entry> to the node API chain.
//     An entry ending in "/" is a whole segment, denied bare, below and with an encoded
//     slash (Path(`/v1/ingress`) || PathPrefix(`/v1/ingress/`) ||
//     PathPrefix(`/v1/ingress%2F`)), so "/v1/health/" leaves "/v1/healthz" alone; any
//     other entry is PathPrefix(`/v1/status`), which also takes "/v1/status/" and
//     "/v1/statusx". Traefik matches after resolving dot segments and repeated slashes
//     and decoding unreserved escapes ("//v1/status", "/v1/%73tatus" are "/v1/status");
//     matching is case-sensitive, like the node's router ("/V1/status" reaches the node
//     and is a 404 there). When a custom wildcard covers the apex (Derive never
//     publishes one), the denied paths are pinned to a service without servers (503)
//     instead of falling through to it.
//   - Fail closed: a route with no upstreams (its application has nothing ready, or
//     its claim has no readable holder) keeps its Host router, to a load balancer
//     without servers: Traefik answers 503 and no other router (a covering wildcard)
//     ever takes its traffic.
//
// Every router is attached to Options.EntryPoints. With a CertResolver every router
// gets tls.certResolver; a custom wildcard's routers ask for its wildcard certificate
// in tls.domains (ACME cannot infer one from a HostRegexp, and a wildcard needs the DNS
// challenge); with PlatformWildcardCerts, routers of a host directly under a platform
// domain, and of the apex itself, ask for main=apex, sans=[*.apex], which Traefik
// obtains once. The certificate never broadens routing.
//
// # Retries
//
// Every router to an application (exact host, custom wildcard, path prefix, grouped
// prefixes) and the API apex's list one middleware, RetryMiddleware ("scafo-retry",
// Traefik's retry, in http.middlewares whenever there are routers), so that a request
// whose connection was refused is tried again instead of answering 502: an in-place
// restart of an application process, and the first request to a dead instance before
// the passive check takes it out (after which the retry walks the failover chain).
// Traefik v3.6 (pkg/middlewares/retry/retry.go) retries only while no try has written
// the request's headers to a backend: retry.WrapHandler, around each server's proxy,
// turns retrying off at httptrace WroteHeaders (or WroteRequest), so a request that
// reached an application, a POST included, is never sent twice, and a backend that
// answers, whatever the status, ends it. The path guards, the apex's deny routers (a
// service without servers: nothing to retry) and the ACME challenge router have none.
// Options.RetryAttempts counts tries, the first included; the waits follow RetryWaits
// (defaults: 12 tries from 200ms, 1.5 s to 4.6 s in all); one attempt renders no
// middleware at all.
//
// # Operator middlewares
//
// A route's Middlewares (routing.Route.Middlewares: "auth@file", the operator's, by
// reference) go on every router to its application, in order, before the retry
// middleware: its host routers and every path router that selects it, per prefix or
// grouped (routerMiddlewares). Traefik runs a router's middlewares in list order, each
// wrapping the rest, and the retry re-runs what comes after it; last, a retry re-sends
// to the service alone, never through the operator's middlewares again. The render
// defines none of them: http.middlewares holds RetryMiddleware alone.
//
// # The flip invariant
//
// The application an account was flipped away from (the host's own application) must
// never answer for that account, whatever spelling a client sends: it must never
// receive a path whose first segment is a flipped prefix, raw or normalised
// (percent-decoded, dot segments and repeated slashes resolved). Serving a not-yet-
// flipped account from the new application is the benign direction. No prefix is
// stripped: the upstream receives the path Traefik routed on. It holds while the
// target has a ready instance: a target with nothing ready drops its prefixes from the
// document (fleet.Derive), and the host's application answers them until it is ready.
//
// What Traefik v3.6 does before routing (pkg/server/server_entrypoint_tcp.go,
// pkg/muxer/http/mux.go): normalizePath upper-cases every percent escape and decodes
// the unreserved ones (%70 → p, %2f → %2F) on every request, unconditionally; then
// sanitizePath (default on) resolves dot segments and repeated slashes; the muxer
// keeps reserved escapes such as %2F encoded in the path it matches. So %2f needs no
// rule of its own, /%70aulca is /paulca, and /bob/../paulca is /paulca, all before any
// rule runs.
//
// What the render adds:
//
//   - the %2F alternative in every path rule: /paulca%2Fx goes to paulca's target;
//   - a path guard on every host with a path map, between its path routers and its
//     host router: a path with an empty, "." or ".." segment, counting %2F as a
//     separator (/bob/..%2Fpaulca/x, /%2Fpaulca/x, /.%2Fpaulca/x, which a decoding
//     backend resolves to /paulca/x), or with any backslash (raw or %5C; some backends
//     treat it as a separator), goes to a service without servers (503) instead of to
//     the host's application. It also holds with sanitizePath off;
//   - a prefix whose target has nothing ready keeps its router (503), never falling back
//     to the host's application.
//
// TestFlipInvariantHoldsForAdversarialSpellings routes every combination of hostile
// segments and separators (plain, encoded, mixed-case, backslash) through the rules as
// Traefik does and applies the oracle to whatever reaches the legacy application;
// TestTraefikDecodesTheRender (SCAFO_TRAEFIK_DECODE=1) replays those requests through
// Traefik's own muxer. The cost: on hosts with a path map, requests whose path has an
// empty or dot segment next to an encoded slash, or a backslash, get 503. Ordinary
// encoded slashes (/files/a%2Fb) still reach the application. Nothing is required of
// the entry point's encodedCharacters settings (v3.6 allows every encoded character by
// default); refusing %2F there is compatible but not needed. Not covered, as outside
// the oracle: backends that percent-decode twice (%252F), or that fold case or strip
// ";parameters" from segments before routing.
//
// # Names
//
// Router and service names are deterministic, injective and ASCII from [a-z0-9._~-],
// never '@' (Traefik's provider separator): <kind>-<component>[.<component>…], each
// component escaped so that it never contains '.' (see esc in names.go):
// host-shop_apps_example_com, path-ti_to.paulca, paths-ti_to.go_tito_io,
// host-~2a_shop_example_org, app-shop.0.vps-a, app-shop.failover1.
//
// # Output
//
// Compact JSON, keys sorted, no HTML escaping ("&&" stays "&&"), no trailing newline.
// A document with nothing to route renders as {}: Traefik's HTTP provider refuses
// {"http":{}}. A document that breaks a rule the render relies on is a
// *routing.FieldError naming the field; bad Options are ErrOptions.
package render
