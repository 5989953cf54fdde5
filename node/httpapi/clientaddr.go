package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// trustedProxies is limits.trustedProxies, parsed: the peers whose X-Forwarded-For the
// node believes (Traefik in front of the node API, say).
type trustedProxies []netip.Prefix

// parseTrustedProxies parses limits.trustedProxies: CIDRs, or bare addresses (one
// host). The error names the key and the entry.
func parseTrustedProxies(list []string) (trustedProxies, error) {
	var out trustedProxies
	for i, s := range list {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("limits.trustedProxies[%d] %q: want a CIDR (10.0.0.0/8, fd00::/8) or an address", i, list[i])
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func (t trustedProxies) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientOf is the address a request's token-lookup budget is kept for (as a
// sourceKey: an IPv6 address's /64): the remote address (sourceOf), unless that is a
// trusted proxy, and then the right-most X-Forwarded-For address that is not itself
// one (each trusted proxy appends the address it got the request from; anything to
// the left of the first untrusted one is whatever that client chose to send). X-Forwarded-For from a peer that is not
// trusted is never read. An entry that does not parse ends the walk at the proxy that
// passed it on.
func (s *API) clientOf(r *http.Request) string {
	if len(s.trusted) == 0 {
		return sourceOf(r)
	}
	a, err := netip.ParseAddr(hostOf(r.RemoteAddr))
	if err != nil || !s.trusted.contains(a) {
		return sourceOf(r)
	}
	vals := r.Header.Values("X-Forwarded-For")
	for i := len(vals) - 1; i >= 0; i-- {
		parts := strings.Split(vals[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return sourceKey(a.String())
			}
			if !s.trusted.contains(hop) {
				return sourceKey(hop.String())
			}
			a = hop
		}
	}
	return sourceKey(a.String())
}

// ValidateTrustedProxies checks limits.trustedProxies (the configuration's check at
// load); the error names the key and the entry.
func ValidateTrustedProxies(list []string) error {
	_, err := parseTrustedProxies(list)
	return err
}
