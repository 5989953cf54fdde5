package render

import (
	"regexp"
	"strings"
)

// Router priorities. Traefik tries routers in descending priority and, left to itself,
// uses the rule's length, which ties non-deterministically (its sort is not stable) and
// moves whenever a rule is edited. Every router here carries an explicit priority from
// a fixed band, so the order never depends on rule length (a grouped PathRegexp rule can
// be hundreds of kilobytes long):
//
//	50000  path prefixes on an exact host     Host(`h`) && (Path… | PathRegexp…)
//	45000  path guard on an exact host        Host(`h`) && PathRegexp(guard)
//	40000  exact host                         Host(`h`)
//	30000  platform API apex (and its deny)   Host(`apex`) && !PathPrefix(…)
//	20000  path prefixes on a custom wildcard HostRegexp(…) && (…)
//	15000  path guard on a custom wildcard    HostRegexp(…) && PathRegexp(guard)
//	10000  custom wildcard                    HostRegexp(`^[a-z0-9-]+\.…\.?$`)
//
// Why this order. The document's lookup is host first (exact, then the one-label
// wildcard), then the first path segment within the host found. So a path router may
// outrank only the host router of its own host: paths on an exact host sit above every
// host router, but paths on a wildcard host sit below the exact-host band, or a request
// for an exact host that the wildcard also matches (a.shop.example.org next to
// *.shop.example.org) would be taken by the wildcard's path map. A host's path guard
// sits between its path routers and its host router: it takes what no prefix took
// before the host's own application can. The apex is an exact name too: it never
// equals a route's host (an apex an application claims is left out of api.hosts), but
// a customer's wildcard may cover it (*.example.com over apps.example.com), and the
// platform's own name must win that. Within a band rules never overlap (distinct
// hosts; distinct first segments of one host; one label per wildcard), so equal
// priorities never tie on one request.
//
// All bands sit far above Traefik's default priorities (a rule's length, in practice a
// few hundred at most), so an operator's own routes never shadow ours; an operator who
// means to take one of our hosts (or a path of it) gives the router 100000 or more, and
// 10000-99999 are ours (docs/traefik.md, "Your own routes beside the fleet's").
const (
	PriorityPath              = 50000
	PriorityPathGuard         = 45000
	PriorityHost              = 40000
	PriorityAPI               = 30000
	PriorityWildcardPath      = 20000
	PriorityWildcardPathGuard = 15000
	PriorityWildcard          = 10000
)

// hostMatcher returns the host part of every rule for host: Host(`h`) for an exact
// name, a one-label HostRegexp for "*.rest". Traefik lowercases the request host
// before matching either (requestdecorator), and hosts here are lowercase. The
// regexp takes one trailing dot, as Traefik's Host matcher does (pkg/muxer/http:
// Host drops a request's trailing dot, HostRegexp sees the host with it), so
// "a.shop.example.org." reaches the wildcard's application like the exact names'
// dotted spellings reach theirs, and like Caddy's lookup does (deploy/caddy).
func hostMatcher(host string) string {
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		return "HostRegexp(`^[a-z0-9-]+\\." + regexp.QuoteMeta(rest) + "\\.?$`)"
	}
	return "Host(`" + host + "`)"
}

// prefixRule is the segment-exact match of one prefix p: the path is /p, or continues
// with a slash, or with an encoded slash. PathPrefix alone is a plain string prefix
// (/paulca would take /paulcarson).
//
// Only the upper-case %2F is needed: Traefik's entry point upper-cases every percent
// escape (normalizePath) before routing, so /p%2fx reaches the router as /p%2Fx.
func prefixRule(hostMatch, p string) string {
	return hostMatch + " && (Path(`/" + p + "`) || PathPrefix(`/" + p + "/`) || PathPrefix(`/" + p + "%2F`))"
}

// groupRule matches any of prefixes (sorted, non-empty), segment-exact, in one anchored
// alternation, each prefix quoted (prefixes contain '.').
func groupRule(hostMatch string, prefixes []string) string {
	return hostMatch + " && PathRegexp(`" + groupRegexp(prefixes) + "`)"
}

func groupRegexp(prefixes []string) string {
	n := len(`^/(?:)(?:/|%2F|$)`) + len(prefixes)
	for _, p := range prefixes {
		n += len(p) + strings.Count(p, ".")
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString("^/(?:")
	for i, p := range prefixes {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(regexp.QuoteMeta(p))
	}
	b.WriteString(")(?:/|%2F|$)")
	return b.String()
}

// guardRegexp matches a routing path that a decoding backend would move into another
// first segment than the one Traefik routed on: an empty, "." or ".." segment where
// segments are split by '/' and by the encoded slash %2F (Traefik upper-cases escapes
// before routing, so %2f arrives as %2F). /bob/..%2Fpaulca/x, /%2Fpaulca/x and
// /.%2Fpaulca/x all decode and resolve to /paulca/x. Traefik's sanitizePath already
// resolves the plain '/' forms before routing; they are matched too so that the guard
// holds with sanitizePath off. Any backslash, raw or %5C, is matched as well: some
// backends treat it as a separator (/paulca%5Cx as /paulca/x).
const guardRegexp = `\\|%5C|(?:/|%2F)(?:\.\.?)?(?:/|%2F)|(?:/|%2F)\.\.?$`

// guardRule is the path guard of a host with a path map: below its path routers and
// above its host router, it sends what guardRegexp matches to a service without
// servers (503) instead of to the host's own application.
func guardRule(hostMatch string) string {
	return hostMatch + " && PathRegexp(`" + guardRegexp + "`)"
}

// apiRule routes the apex to the node API except the denied prefixes.
func apiRule(apex string, denied []string) string {
	var b strings.Builder
	b.WriteString("Host(`" + apex + "`)")
	for _, d := range denied {
		for _, m := range deniedMatchers(d) {
			b.WriteString(" && !" + m)
		}
	}
	return b.String()
}

// denyRule matches exactly what apiRule leaves out on the apex.
func denyRule(apex string, denied []string) string {
	var b strings.Builder
	b.WriteString("Host(`" + apex + "`) && (")
	first := true
	for _, d := range denied {
		for _, m := range deniedMatchers(d) {
			if !first {
				b.WriteString(" || ")
			}
			first = false
			b.WriteString(m)
		}
	}
	b.WriteString(")")
	return b.String()
}

// deniedMatchers are the path matchers that deny one api.denied entry on the routing
// path Traefik matches (dot segments and repeated slashes resolved, unreserved escapes
// decoded, other escapes upper-cased; case-sensitive, as the node's router is).
//
//   - An entry without a trailing slash ("/v1/status") is a plain string prefix: it
//     takes "/v1/status", "/v1/status/…", "/v1/status%2F…" and, harmlessly,
//     "/v1/statusx".
//   - An entry with one ("/v1/ingress/") is a whole segment: the bare segment
//     ("/v1/ingress"), everything below it, and the encoded-slash spelling
//     ("/v1/ingress%2Ftraefik", which Traefik keeps encoded and a decoding backend
//     would not), but not a longer segment ("/v1/healthz" is not "/v1/health/").
func deniedMatchers(d string) []string {
	base, segment := strings.CutSuffix(d, "/")
	if !segment || base == "" {
		return []string{"PathPrefix(`" + d + "`)"}
	}
	return []string{"Path(`" + base + "`)", "PathPrefix(`" + d + "`)", "PathPrefix(`" + base + "%2F`)"}
}
