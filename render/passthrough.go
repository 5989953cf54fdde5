package render

import (
	"regexp"
	"strings"

	"github.com/traefik/genconf/dynamic"

	"github.com/scafo/ingress/render/routing"
)

// Passthrough routes (routing.Route.Passthrough, docs/design.md §4 "Passthrough"): an
// application that terminates TLS itself gets, for each of its hosts, a TCP router
//
//	tcp.routers.host-<host>   HostSNI(`<host>`), tls.passthrough true, on the render's
//	                          entry points, priority PriorityHost
//	tcp.services.app-<app>    loadBalancer: one server, the first upstream's address;
//	                          when nothing is ready, weighted: {healthCheck: {}}, a
//	                          service of no services, which closes the connection
//	                          (Traefik's HTTP provider refuses an empty loadBalancer,
//	                          and a host without a router would fall through to the
//	                          HTTPS routers, where a covering wildcard could take it)
//
// and nothing in http: no HTTP router ever matches a passthrough host, so a request for
// it over HTTP (plain, or TLS that Traefik terminates because the server name was not
// the exact one) finds no router and gets Traefik's 404. A custom wildcard covering a
// passthrough host would otherwise take those requests (a host with no HTTP router of
// its own is exactly what a wildcard catches): every router of such a wildcard carries
// `&& !HostRegexp(`^(?:<covered passthrough hosts>)\.?$`)` (passthroughExclusion). Not
// `!Host(...)`: Traefik collects every Host value of a TLS router's rule, negated ones
// included (pkg/rules Tree.ParseMatchers ignores Not), as server names of the HTTPS
// muxer, which is matched before the TCP routers: a negated Host would hand the
// passthrough host's handshakes to Traefik's own TLS. HostRegexp values are not
// collected.
//
// Upstream order: Traefik v3.6's TCP services have no failover service, and its
// weighted round robin only spreads by weight, so no TCP configuration sends every new
// connection to the first healthy of an ordered list. The render expresses the order
// the node's own probes know instead: the document lists ready instances only, in
// priority order, and the service holds the first. When that instance stops accepting
// connections, its node's prober marks it unready, the document moves the next
// upstream first, and the next poll points new connections at it (docs/passthrough.md
// measures what that costs). Open connections are never moved; they last until their
// instance closes them.
//
// Every passthrough service names a servers transport of the render's: tcpTransport, or
// tcpTransportProxyV2 for an application that takes a PROXY protocol v2 header
// (routing.Route.ProxyProtocol 2); each is written only when a service uses it.

// The servers transports of passthrough services (no '@': they resolve in the provider
// of the services).
const (
	tcpTransport        = "scafo-tcp"
	tcpTransportProxyV2 = "scafo-proxy-v2"
)

// tcpTransportFor is the servers transport of a passthrough service with proxyProtocol.
// The providers decode without defaults, so every timing is written: Traefik's defaults
// (15 s keep-alive, 100 ms termination delay), and the 2 s dial timeout the shipped
// static configuration gives HTTP upstreams, where Traefik's TCP default is 30 s: an
// instance on the mesh connects in milliseconds, and a node that stops answering SYNs
// (powered off, partitioned) must not hold each new client connection for 30 s before
// it fails.
func tcpTransportFor(proxyProtocol int) (string, *TCPServersTransport) {
	t := &TCPServersTransport{DialKeepAlive: "15s", DialTimeout: "2s", TerminationDelay: "100ms"}
	if proxyProtocol == routing.ProxyProtocolV2 {
		t.ProxyProtocol = &dynamic.ProxyProtocol{Version: routing.ProxyProtocolV2}
		return tcpTransportProxyV2, t
	}
	return tcpTransport, t
}

// sniRule is the rule of a passthrough host's TCP router: its exact name. Traefik
// compares it with the ClientHello's server name after strings.ToLower and
// strings.TrimSpace (pkg/muxer/tcp NewConnData); what that lets through is in
// docs/passthrough.md.
func sniRule(host string) string { return "HostSNI(`" + host + "`)" }

// tcpService adds the TCP service of passthrough application app: one server, its
// first upstream, or none.
func (r *renderer) tcpService(app string, ups []routing.Upstream, proxyProtocol int) string {
	name := appServiceName(app)
	if r.tcpServices == nil {
		r.tcpServices = make(map[string]*TCPService)
	}
	if len(ups) == 0 {
		r.tcpServices[name] = tcpNoServers()
		return name
	}
	tname, transport := tcpTransportFor(proxyProtocol)
	lb := &TCPLoadBalancer{Servers: []dynamic.TCPServer{{Address: ups[0].Address}}, ServersTransport: tname}
	if r.tcpTransports == nil {
		r.tcpTransports = make(map[string]*TCPServersTransport)
	}
	r.tcpTransports[tname] = transport
	r.tcpServices[name] = &TCPService{LoadBalancer: lb}
	return name
}

// tcpNoServers is the TCP service of an application with nothing ready: a weighted
// service of no services (healthCheck {} is what makes the object non-empty; Traefik
// launches no check for a weighted service, it only listens to its children, and it
// has none). Traefik closes every connection it gets: the host fails closed.
func tcpNoServers() *TCPService {
	return &TCPService{Weighted: &TCPWeighted{HealthCheck: &dynamic.HealthCheck{}}}
}

// tcpRouter adds the TCP router of passthrough host to svc.
func (r *renderer) tcpRouter(host, svc string) {
	if r.tcpRouters == nil {
		r.tcpRouters = make(map[string]*dynamic.TCPRouter)
	}
	r.tcpRouters[hostRouterName(host)] = &dynamic.TCPRouter{
		EntryPoints: r.opt.entryPoints,
		Service:     svc,
		Rule:        sniRule(host),
		Priority:    PriorityHost,
		TLS:         &dynamic.RouterTCPTLSConfig{Passthrough: true},
	}
}

// tcpConfiguration is the tcp section of the render, nil without passthrough routes.
func (r *renderer) tcpConfiguration() *TCPConfiguration {
	if len(r.tcpRouters) == 0 {
		return nil
	}
	t := &TCPConfiguration{Routers: r.tcpRouters, Services: r.tcpServices}
	if len(r.tcpTransports) > 0 {
		t.ServersTransports = r.tcpTransports
	}
	return t
}

// passthroughHosts lists doc's passthrough hosts (in host order), which the fleet-wide
// ACME challenge router must not answer for: their applications hold their own
// certificates, and no HTTP request for their names reaches anyone.
func passthroughHosts(doc *routing.Document) []string {
	var out []string
	for i := range doc.Routes {
		if doc.Routes[i].Passthrough {
			out = append(out, doc.Routes[i].Host)
		}
	}
	return out
}

// challengeRule is the ACME challenge router's rule: the challenge path, on any host
// but a passthrough one.
func challengeRule(passthrough []string) string {
	rule := "PathPrefix(`" + ACMEChallengePath + "`)"
	if len(passthrough) == 0 {
		return rule
	}
	return rule + " && " + passthroughExclusion(passthrough)
}

// passthroughExclusion is the rule term no request for one of hosts (passthrough hosts,
// exact, sorted) matches, in the spellings Host would match: Traefik's canonized host
// (lowercased, no port), with one trailing dot or none.
func passthroughExclusion(hosts []string) string {
	var b strings.Builder
	b.WriteString("!HostRegexp(`^(?:")
	for i, h := range hosts {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(regexp.QuoteMeta(h))
	}
	b.WriteString(")\\.?$`)")
	return b.String()
}

// passthroughUnder maps each custom wildcard route of doc to the passthrough hosts it
// covers (one label below it), sorted; nil when there are none.
func passthroughUnder(doc *routing.Document) map[string][]string {
	var out map[string][]string
	for i := range doc.Routes {
		rt := &doc.Routes[i]
		if !rt.Passthrough {
			continue
		}
		_, parent, ok := strings.Cut(rt.Host, ".")
		if !ok {
			continue
		}
		w := "*." + parent
		if _, ok := routing.RouteIndex(doc.Routes, w); !ok {
			continue
		}
		if out == nil {
			out = map[string][]string{}
		}
		out[w] = append(out[w], rt.Host) // routes are in host order
	}
	return out
}

// hasPassthrough reports whether doc has a passthrough route.
func hasPassthrough(doc *routing.Document) bool {
	for i := range doc.Routes {
		if doc.Routes[i].Passthrough {
			return true
		}
	}
	return false
}
