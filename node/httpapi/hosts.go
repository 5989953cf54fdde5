package httpapi

// Every answer's headers, and the Host guard against DNS rebinding.

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// noStore marks every answer of the API (JSON, metrics, health, the status page, the
// guards' refusals): never stored by a cache, never sniffed as another type. The
// routing endpoints' ETag and If-None-Match still work: a poller (the Traefik plugin,
// the Caddy module) keeps the ETag itself and asks conditionally; no-store only keeps
// a shared or browser cache from holding the body (TestEveryRouteAnswersNoStoreNoSniff).
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// hostGuard answers only requests for a Host this node goes by: an IP literal (v4 or
// v6, with or without a port; node.address is one), localhost, node.name (a Prometheus
// that scrapes vps-a:7400), a platform domain (the API apex, routed to the node by an
// ingress that passes the Host on) or a name of api.allowedHosts. None of these is a
// name an attacker's DNS answers for. DNS rebinding: a page of evil.example whose name an attacker makes
// resolve to 127.0.0.1 reads the node as its own origin while a tunnel or a local node
// is up, and its requests carry Host: evil.example; they get 421 (TestARebindingHostIsRefused).
// Routes whose anyHost attribute is set (the ACME challenge, asked for an application's
// host, which checks that host itself) answer any Host.
type hostGuard struct {
	names   map[string]bool // folded (foldName)
	anyHost func(path string) bool
	log     *rejectLogger
}

func newHostGuard(names []string, anyHost func(string) bool, log *rejectLogger) *hostGuard {
	g := &hostGuard{names: map[string]bool{"localhost": true}, anyHost: anyHost, log: log}
	for _, n := range names {
		if n := foldName(n); n != "" {
			g.names[n] = true
		}
	}
	return g
}

func (g *hostGuard) check(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.allows(r.Host) || g.anyHost(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		host := fmt.Sprintf("%.80q", r.Host)
		if g.log != nil {
			g.log.reject(r.RemoteAddr, "refused request: a Host this node does not go by (api.allowedHosts)", "host", host, "path", r.URL.Path)
		}
		cutBody(w, r)
		writeError(w, http.StatusMisdirectedRequest, "misdirected request",
			"Host "+host+": this node answers IP addresses, localhost, its node.name, the platform domains and the names of api.allowedHosts")
	})
}

// allows reports whether host (a request's Host: name or IP, with or without a port)
// is one this node goes by. An empty Host (HTTP/1.0) names nothing to rebind.
func (g *hostGuard) allows(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		name = host[1 : len(host)-1]
	}
	if isIP(name) {
		return true
	}
	return g.names[foldName(name)]
}
