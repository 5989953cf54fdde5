package routing

import "strings"

// Covers reports whether wildcard, a one-label wildcard "*.x.y", covers host under the
// document's lookup rule (an exact lookup first; failing that the first label replaced
// by "*", looked up once): host is exactly one label below "x.y". It covers "a.x.y",
// never "x.y" itself, never "a.b.x.y" (two labels below), and never another wildcard
// ("*.a.x.y" is a different name, not one a request can carry).
//
// Names are compared as given: both must be canonical (see ValidateCustomHost). A
// wildcard argument that is not "*."-prefixed covers nothing.
func Covers(wildcard, host string) bool {
	parent, ok := strings.CutPrefix(wildcard, "*.")
	if !ok || parent == "" || IsWildcard(host) {
		return false
	}
	label, rest, ok := strings.Cut(host, ".")
	return ok && label != "" && rest == parent
}

// Overlaps reports whether two claimable names (hosts or one-label wildcards) can ever
// answer for the same request host: they are equal, or one is a wildcard covering the
// other. Two different wildcards never overlap ("*.x.y" and "*.a.x.y" cover disjoint
// names).
func Overlaps(a, b string) bool {
	return a == b || Covers(a, b) || Covers(b, a)
}
