// Package routing holds the routing document, wire format v1: the one value every
// scafo node publishes and every ingress consumes. Consumers read the doc comments on
// these types as the specification.
//
// Protocol versions (the "v" field):
//
//	1: hosts → ordered upstreams, path maps, the platform API apex (2026-11).
//	   Additive since: apiPort, healthPath, group, passthrough and proxyProtocol
//	   (TLS passthrough by exact SNI, docs/design.md §2), middlewares (operator
//	   middlewares by reference, docs/design.md §2).
//
// Additive fields keep v1; a breaking change bumps Version. Decoders of v1 must
// tolerate unknown fields; writers never emit a field this package does not declare.
//
// Three rules shape everything here:
//
//   - Upstreams are an ordered priority list, never a weighting: the first entry is
//     where a request goes, the rest exist for when it fails.
//   - The document is byte-stable: identical state yields identical bytes on every node
//     and across restarts (routes sorted by host, maps marshalled with sorted keys),
//     because an ingress hashes the body and a byte change is a full reload.
//   - There is no empty document. A node that has not completed its first reconcile pass
//     has no document at all and says so (503 draining); an empty 200 would tell every
//     ingress to withdraw every route.
package routing

// Version is the schema version this package reads and writes.
const Version = 1

// Document is the routing document, wire format v1.
type Document struct {
	// V is the schema version (Version). Additive fields keep 1.
	V int `json:"v"`
	// Revision is a content fingerprint of every other field, computed before any
	// prefer reordering. It changes if and only if routing content changes. See
	// ComputeRevision.
	Revision string `json:"revision"`
	// Routes, sorted by Host, one per routed hostname.
	Routes []Route `json:"routes"`
	// API routes the bare apex of each platform domain to the node API, when the fleet
	// has api.public on and at least one apex is not claimed by an application.
	API *API `json:"api,omitempty"`
}

// Route is one hostname and where its requests go.
type Route struct {
	// Host is a canonical DNS name (lowercase ASCII A-labels, no trailing dot), or a
	// one-label wildcard "*.example.org" for a custom domain. A request's host is
	// looked up exactly first; failing that its first label is replaced by "*" and
	// looked up once.
	Host string `json:"host"`
	// Application is the name of the application this host belongs to. Every host of
	// one application shares one upstream list (and one rendered service chain).
	// UnownedApplication marks a host that is held in the fleet by no application that
	// can be named; such a route has no upstreams.
	Application string `json:"application"`
	// Upstreams is the ordered priority list of ready instances of Application. Empty
	// (never absent: written as []) means the host exists but nothing is ready to serve
	// it: an ingress must answer it with an error (503) and never let another route,
	// such as a covering wildcard, take its traffic (fail closed).
	Upstreams []Upstream `json:"upstreams"`
	// Paths maps a bare first path segment ("paulca", never "/paulca") to the host of
	// another route of the same document and the same account. A prefix selects a
	// route; it does not define one. Absent means the host routes by hostname alone.
	Paths map[string]string `json:"paths,omitempty"`
	// HealthPath is the application's own health-check path (additive field). Empty
	// means an ingress should ask the node that runs each instance, at
	// "/v1/health/instances/<application>" on the upstream's APIPort.
	HealthPath string `json:"healthPath,omitempty"`
	// Group is the ingress group of the route's application (additive field): the
	// ingresses that poll with ?group= naming it serve this host. Absent means
	// DefaultGroup, which is never written out; every route of one application has
	// the same group.
	Group string `json:"group,omitempty"`
	// Passthrough marks the host of an application that terminates TLS itself
	// (additive field). An ingress routes it at layer 4 by the exact TLS server name
	// (SNI), forwarding the client's handshake unchanged to the first upstream, and
	// never as HTTP: no HTTP router, no certificate of the ingress, no path map. Such
	// a route is never a wildcard, has no Paths, and is no path map's target; every
	// route of its application is one. A reader that ignores the field serves the host
	// as HTTP: its plaintext requests reach a server that expects a ClientHello, which
	// refuses them, and no other route takes the host (docs/design.md §2).
	Passthrough bool `json:"passthrough,omitempty"`
	// ProxyProtocol is the PROXY protocol version an ingress sends the upstream before
	// the client's bytes, on a passthrough route only (additive field): absent (0)
	// sends none, 2 sends a v2 header carrying the client's address. Every route of one
	// application has the same value.
	ProxyProtocol int `json:"proxyProtocol,omitempty"`
	// Middlewares are the Traefik middlewares the route's application lists, in order,
	// by reference: "name@provider" (ValidateMiddleware), each defined by the operator
	// in a provider of their ingresses' own (the file provider, say), never by the fleet
	// (additive field). An ingress that applies them runs them on every request of the
	// route, and of every path prefix that selects it, in this order, before the
	// request goes to an upstream. Absent: none. Every route of one application has the
	// same list; a passthrough route has none (a middleware is HTTP). A reader that
	// cannot apply them must not serve the route without them (docs/design.md §14: the
	// Caddy module answers 503 for it): a middleware may be the application's
	// authentication.
	Middlewares []string `json:"middlewares,omitempty"`
}

// ProxyProtocolV2 is the one PROXY protocol version a route may ask for.
const ProxyProtocolV2 = 2

// UnownedApplication is the Application of a route whose host is claimed in the fleet
// but by no application that can be named: its claim object could not be read, names a
// missing application or one of another account, or is one of several objects naming
// the host. The route has no upstreams, so an ingress answers 503 for the host and no
// wildcard takes it, until an operator fixes the store. It is a valid DNS label, so
// every v1 reader accepts it; it is reserved: no application may have this name
// (Derive skips one that does, and the API should refuse it).
const UnownedApplication = "scafo-unowned"

// Upstream is one instance of an application on one node.
type Upstream struct {
	// Node is the name of the node running the instance (a DNS label).
	Node string `json:"node"`
	// Address is "ip:port" of the instance on the fleet's private network.
	Address string `json:"address"`
	// APIPort is the node's API port (additive field), used for node-delegated health
	// checks when the route has no HealthPath. Zero when unknown.
	APIPort int `json:"apiPort,omitempty"`
}

// API is the platform API apex: the bare platform domains routed to every node's API.
type API struct {
	// Hosts are the platform apexes (sorted) that route to the node API. An apex that
	// an application claims is absent: application routes win.
	Hosts []string `json:"hosts"`
	// Upstreams are the node APIs, ordered by node name (prefer reorders them like any
	// other upstream list).
	Upstreams []Upstream `json:"upstreams"`
	// Denied are path prefixes never served through the public apex; they stay on a
	// node's own listener behind the ingress token. An entry ending in "/" denies that
	// path segment and everything below it; any other entry is a plain string prefix.
	// See DeniedAPIPrefixes.
	Denied []string `json:"denied"`
}

// DeniedAPIPrefixes are the node API paths never exposed on the public apex (docs/design.md
// §3): the apex serves what a remote CLI or CI needs and nothing else. Each stays on a
// node's own listener behind the ingress token (or, for metrics and instance health,
// on the private network).
//
//   - "/metrics": Prometheus; fleet internals.
//   - "/ui": the status page (docs/operating.md): an operator's page, on a node's own
//     listener only.
//   - "/v1/health/": instance health; probes the fleet's private addresses.
//   - "/v1/ingress/": every format (routes, traefik, …): the rendered configuration
//     carries every node's address and, with fleet certificates, private keys.
//   - "/v1/status": skipped objects, nodes and their age.
//   - "/v1/storage": the certificate store.
//
// An entry ending in "/" denies that segment and everything under it ("/v1/health/"
// denies "/v1/health" and "/v1/health/…" but not "/v1/healthz"); any other entry is a
// plain string prefix ("/metrics" also denies "/metricsx", which is harmless). Sorted.
var DeniedAPIPrefixes = []string{"/metrics", "/ui", "/v1/health/", "/v1/ingress/", "/v1/status", "/v1/storage"}
