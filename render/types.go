package render

import (
	"github.com/traefik/genconf/dynamic"
	"github.com/traefik/genconf/dynamic/tls"
)

// The rendered configuration is built from github.com/traefik/genconf/dynamic types
// (v0.5.2) except where genconf lacks a field Traefik v3.6 has: the load balancer's
// passiveHealthCheck. (genconf's dynamic.Retry has both fields of Traefik v3.6's
// dynamic.Retry, attempts and initialInterval, and is used as it is.) The types below add exactly that and nothing else, so everything
// else the render emits is, field for field, what genconf (generated from Traefik's own
// structs) declares.

// Configuration is the root of the dynamic configuration the render writes: only the
// http section.
type Configuration struct {
	HTTP *HTTPConfiguration `json:"http,omitempty"`
	TCP  *TCPConfiguration  `json:"tcp,omitempty"`
	TLS  *TLSConfiguration  `json:"tls,omitempty"`
}

// TCPConfiguration is genconf's dynamic.TCPConfiguration restricted to routers and
// services, plus serversTransports, which genconf v0.5.2 lacks (Traefik v3.6
// pkg/config/dynamic TCPConfiguration.ServersTransports): the passthrough routes
// (passthrough.go).
type TCPConfiguration struct {
	Routers           map[string]*dynamic.TCPRouter   `json:"routers,omitempty"`
	Services          map[string]*TCPService          `json:"services,omitempty"`
	ServersTransports map[string]*TCPServersTransport `json:"serversTransports,omitempty"`
}

// TCPService is genconf's dynamic.TCPService with the local load balancer and
// weighted types.
type TCPService struct {
	LoadBalancer *TCPLoadBalancer `json:"loadBalancer,omitempty"`
	Weighted     *TCPWeighted     `json:"weighted,omitempty"`
}

// TCPWeighted is genconf's dynamic.TCPWeightedRoundRobin plus healthCheck, which
// genconf v0.5.2 lacks (Traefik v3.6 TCPWeightedRoundRobin.HealthCheck, tagged
// allowEmpty). The render writes one only without services (tcpNoServers).
type TCPWeighted struct {
	Services    []dynamic.TCPWRRService `json:"services,omitempty"`
	HealthCheck *dynamic.HealthCheck    `json:"healthCheck,omitempty"`
}

// TCPLoadBalancer is genconf's dynamic.TCPServersLoadBalancer without the deprecated
// proxyProtocol and terminationDelay (Traefik v3.6 logs a warning for each on every
// reload) and with serversTransport, which genconf v0.5.2 lacks (Traefik v3.6
// TCPServersLoadBalancer.ServersTransport).
type TCPLoadBalancer struct {
	Servers          []dynamic.TCPServer `json:"servers,omitempty"`
	ServersTransport string              `json:"serversTransport,omitempty"`
}

// TCPServersTransport mirrors the fields of Traefik v3.6's dynamic.TCPServersTransport
// the render sets. The HTTP and plugin providers decode without applying defaults, so
// every timing is written out (Traefik's SetDefaults values, the dial timeout the
// shipped static configuration gives HTTP upstreams).
type TCPServersTransport struct {
	DialKeepAlive    string                 `json:"dialKeepAlive,omitempty"`
	DialTimeout      string                 `json:"dialTimeout,omitempty"`
	ProxyProtocol    *dynamic.ProxyProtocol `json:"proxyProtocol,omitempty"`
	TerminationDelay string                 `json:"terminationDelay,omitempty"`
}

// TLSConfiguration is genconf's dynamic.TLSConfiguration restricted to certificates
// (fleet certificates, acme.go).
type TLSConfiguration struct {
	Certificates []*tls.CertAndStores `json:"certificates,omitempty"`
}

// HTTPConfiguration is genconf's dynamic.HTTPConfiguration restricted to routers,
// services and middlewares, with services and middlewares of the local types.
type HTTPConfiguration struct {
	Routers     map[string]*dynamic.Router `json:"routers,omitempty"`
	Services    map[string]*Service        `json:"services,omitempty"`
	Middlewares map[string]*Middleware     `json:"middlewares,omitempty"`
}

// Middleware is genconf's dynamic.Middleware restricted to the one kind the render
// uses: retry.
type Middleware struct {
	Retry *dynamic.Retry `json:"retry,omitempty"`
}

// Service is genconf's dynamic.Service restricted to the two kinds the render uses.
type Service struct {
	LoadBalancer *LoadBalancer     `json:"loadBalancer,omitempty"`
	Failover     *dynamic.Failover `json:"failover,omitempty"`
}

// LoadBalancer is genconf's dynamic.ServersLoadBalancer plus passiveHealthCheck
// (Traefik v3.6 pkg/config/dynamic ServersLoadBalancer.PassiveHealthCheck).
type LoadBalancer struct {
	dynamic.ServersLoadBalancer
	PassiveHealthCheck *PassiveHealthCheck `json:"passiveHealthCheck,omitempty"`
}

// PassiveHealthCheck mirrors Traefik v3.6's dynamic.PassiveServerHealthCheck: a server
// is marked down after MaxFailedAttempts failed requests (no response, or a status of
// 500 or more) within FailureWindow. With an active health check on the same load
// balancer, only the active check marks it up again.
type PassiveHealthCheck struct {
	FailureWindow     string `json:"failureWindow,omitempty"`
	MaxFailedAttempts int    `json:"maxFailedAttempts,omitempty"`
}
