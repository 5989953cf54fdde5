package render

import (
	"strconv"
	"strings"
)

// Names of routers and services. Every name is
//
//	<kind>-<component>[.<component>…]
//
// with kind from a fixed set and each component escaped by esc, whose output never
// contains '.'; so the first '-' ends the kind, the dots split the components, and a
// name decodes back to exactly one (kind, components) tuple: names are injective.
//
//	routers   host-<host>               Host / HostRegexp (exact host or custom wildcard)
//	          path-<host>.<prefix>      one prefix of host's path map
//	          paths-<host>.<target>     every prefix of host's map that targets target
//	          guard-<host>              the path guard of a host with a path map
//	          api-<apex>                the platform API apex
//	          deny-<apex>               the apex's denied prefixes (only when needed)
//	services  app-<app>                 application chain root (failover, or empty)
//	          app-<app>.<i>.<node>      leaf: upstream i (0 = first choice) on node
//	          app-<app>.failover<i>     failover(leaf i, rest of the chain)
//	          api, api.<i>.<node>, api.failover<i>   the same for the node API
//	          deny                      no servers: answers 503
//
// Names are ASCII from [a-z0-9._~-]: never '@' (Traefik's provider separator), no
// space, nothing a dashboard URL or a metrics label needs to quote.
const (
	kindHost  = "host-"
	kindPath  = "path-"
	kindPaths = "paths-"
	kindGuard = "guard-"
	kindAPI   = "api-"
	kindDeny  = "deny-"

	svcApp  = "app-"
	svcAPI  = "api"
	svcDeny = "deny"
)

// esc escapes one name component injectively into [a-z0-9_~-], never '.':
//
//   - a-z, 0-9 and '-' stand for themselves;
//   - '.' becomes '_' (hosts read naturally: ti.to → ti_to);
//   - every other byte becomes '~' and two lowercase hex digits ('*' → ~2a,
//     '_' → ~5f, '~' → ~7e).
//
// Each input byte maps to a code that no other code starts with ('_' and '~' are never
// themselves, '~' always takes exactly two hex digits), so the escaped string decodes
// to exactly one input.
func esc(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if !isPlain(s[i]) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isPlain(c):
			b.WriteByte(c)
		case c == '.':
			b.WriteByte('_')
		default:
			const hex = "0123456789abcdef"
			b.WriteByte('~')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
	}
	return b.String()
}

func isPlain(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-'
}

func hostRouterName(host string) string { return kindHost + esc(host) }

func pathRouterName(host, prefix string) string {
	return kindPath + esc(host) + "." + esc(prefix)
}

func pathsRouterName(host, target string) string {
	return kindPaths + esc(host) + "." + esc(target)
}

func guardRouterName(host string) string { return kindGuard + esc(host) }
func apiRouterName(apex string) string   { return kindAPI + esc(apex) }
func denyRouterName(apex string) string  { return kindDeny + esc(apex) }

func appServiceName(app string) string { return svcApp + esc(app) }

// leafName is the service of upstream i of the chain rooted at base.
func leafName(base string, i int, node string) string {
	return base + "." + strconv.Itoa(i) + "." + esc(node)
}

// failoverName is the service failover(leaf i, rest); i = 0 is the root itself.
func failoverName(base string, i int) string {
	if i == 0 {
		return base
	}
	return base + ".failover" + strconv.Itoa(i)
}
