package front

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
)

// upstreamGuard holds the addresses a passthrough route must never send a client to,
// whatever its document says: a routing document is checked (canonical ip:port) but not
// trusted to be sane, and a compromised node or a bad state file could otherwise point a
// name at
//
//   - the front itself (its own listening sockets: each connection would dial the front
//     again with the same ClientHello, a loop that ends only when descriptors run out);
//   - the fallback (Traefik trusts PROXY headers from the front's address: a route there
//     without a header makes every client of the name look like 127.0.0.1, an address
//     allowlists let in);
//   - a node API the front follows (every internet client would count as the front's
//     address in the node's per-source limits, beside the local ingress's polls);
//   - an unspecified (0.0.0.0, ::, which Linux dials as this host), multicast or broadcast
//     address: never an instance's.
//
// Loopback is otherwise allowed: a one-node fleet's instances are on 127.0.0.1. A
// listening socket on an unspecified address refuses its port on every address of the
// host (taken when the guard is built) and on loopback. An upstream that is not an IP
// literal (a routing document has none) is not judged.
// TestARouteToTheFrontOrItsFallbackIsNotDialed,
// TestUpstreamGuardRefusesTheFrontsOwnAddresses.
type upstreamGuard struct {
	exact map[netip.AddrPort]string // address -> why
	ports map[uint16]string         // ports held on every address of the host -> why
	local map[netip.Addr]bool       // the host's addresses when the guard was built
}

// guardEntry is one address the guard refuses, and why.
type guardEntry struct {
	addr string // host:port: an IP literal, "" or localhost (resolveGuarded)
	why  string
}

// newUpstreamGuard builds a guard refusing entries (one resolveGuarded cannot read is
// skipped).
func newUpstreamGuard(entries []guardEntry) *upstreamGuard {
	g := &upstreamGuard{exact: map[netip.AddrPort]string{}, ports: map[uint16]string{}, local: map[netip.Addr]bool{}}
	if as, err := net.InterfaceAddrs(); err == nil {
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					g.local[ip.Unmap()] = true
				}
			}
		}
	}
	for _, e := range entries {
		for _, ap := range resolveGuarded(e.addr) {
			if ap.Addr().IsUnspecified() {
				g.ports[ap.Port()] = e.why
			} else {
				g.exact[ap] = e.why
			}
		}
	}
	return g
}

// resolveGuarded reads host:port as IP addresses without a lookup (the front starts
// whether or not DNS answers): an IP literal, "" (unspecified), or localhost; another
// name gives none, and a route to the address it stands for is not refused.
func resolveGuarded(hostport string) []netip.AddrPort {
	if ap, err := netip.ParseAddrPort(hostport); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())}
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil
	}
	switch host {
	case "":
		return []netip.AddrPort{netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(p))}
	case "localhost":
		return []netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(p)),
			netip.AddrPortFrom(netip.IPv6Loopback(), uint16(p))}
	}
	return nil
}

// nodeAPIAddrs are the host:port of node API base URLs (the default port of the scheme
// when none is written).
func nodeAPIAddrs(nodes []string) []string {
	var out []string
	for _, n := range nodes {
		u, err := url.Parse(n)
		if err != nil || u.Host == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		out = append(out, net.JoinHostPort(u.Hostname(), port))
	}
	return out
}

// refuse says why addr must not be dialed ("" when it may be).
func (g *upstreamGuard) refuse(addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return ""
	}
	a := ap.Addr().Unmap().WithZone("")
	switch {
	case a.IsUnspecified():
		return "an unspecified address (this host)"
	case a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "a multicast or broadcast address"
	}
	if g == nil {
		return ""
	}
	if why, ok := g.exact[netip.AddrPortFrom(a, ap.Port())]; ok {
		return why
	}
	if why, ok := g.ports[ap.Port()]; ok && (a.IsLoopback() || g.local[a]) {
		return why
	}
	return ""
}
