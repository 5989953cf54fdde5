package render

import (
	"regexp"
	"strings"
	"testing"
)

// The routing path a rule sees is Traefik's: percent escapes upper-cased and unreserved
// ones decoded at the entry point (normalizePath), reserved ones such as %2F kept.
// These tables are written in that form.

var segmentCases = []struct {
	path string
	want bool
}{
	{"/p", true},
	{"/p/", true},
	{"/p/x", true},
	{"/p/x/y", true},
	{"/p%2Fx", true},
	{"/p%2F", true},
	{"/px", false},
	{"/pp", false},
	{"/", false},
	{"", false},
	{"/P", false},
	{"/x/p", false},
	{"/p.", false},
	{"/p%2Ex", false}, // not reachable (Traefik decodes %2E), but must not match either
	{"/p%3Fx", false},
}

// perPrefixMatch evaluates a per-prefix rule's path part by pulling the literal
// arguments out of the rule text, so the test checks the text Traefik receives.
var pathArg = regexp.MustCompile("(Path|PathPrefix)\\(`([^`]*)`\\)")

func perPrefixMatch(t *testing.T, rule, path string) bool {
	t.Helper()
	_, paths, ok := strings.Cut(rule, " && ")
	if !ok {
		t.Fatalf("rule %q has no path part", rule)
	}
	ms := pathArg.FindAllStringSubmatch(paths, -1)
	if len(ms) != 3 {
		t.Fatalf("rule %q: want Path and two PathPrefix, got %v", rule, ms)
	}
	for _, m := range ms {
		switch m[1] {
		case "Path":
			if path == m[2] {
				return true
			}
		case "PathPrefix":
			if strings.HasPrefix(path, m[2]) {
				return true
			}
		}
	}
	return false
}

func groupedRegexp(t *testing.T, rule string) *regexp.Regexp {
	t.Helper()
	i := strings.Index(rule, "PathRegexp(`")
	if i < 0 || !strings.HasSuffix(rule, "`)") {
		t.Fatalf("rule %q has no PathRegexp", rule)
	}
	return regexp.MustCompile(rule[i+len("PathRegexp(`") : len(rule)-2])
}

// TestBothPathRuleFormsAreSegmentExact runs the same table through both router forms
// for prefixes with regexp metacharacters, each with its own spelling of "p".
func TestBothPathRuleFormsAreSegmentExact(t *testing.T) {
	// Prefixes as the validator allows them ('.', '_', '~', '-'), and neighbours a
	// broken quoting would confuse: "a.b" must not match "/aXb".
	prefixes := []string{"p", "a.b", "x~y", "u_v", "p-q", "1.2.3", "paulca"}
	others := map[string]bool{}
	for _, p := range prefixes {
		others[p] = true
	}
	grouped := groupedRegexp(t, groupRule(hostMatcher("ti.to"), prefixes))
	for _, p := range prefixes {
		rule := prefixRule(hostMatcher("ti.to"), p)
		for _, c := range segmentCases {
			path := strings.ReplaceAll(c.path, "p", p)
			if c.path == "/P" {
				if strings.ToUpper(p) == p {
					continue // no case to change
				}
				path = "/" + strings.ToUpper(p)
			}
			if got := perPrefixMatch(t, rule, path); got != c.want {
				t.Errorf("per-prefix %q, path %q: match=%v, want %v", p, path, got, c.want)
			}
			// The grouped router also holds the other prefixes; a path that is
			// legitimately one of them (only "/pp" → "/pp…" never is) would match.
			if got := grouped.MatchString(path); got != c.want {
				t.Errorf("grouped, prefix %q, path %q: match=%v, want %v", p, path, got, c.want)
			}
		}
	}
	for _, path := range []string{"/aXb", "/aXb/", "/a", "/b", "/1x2x3", "/x", "/u", "/pau", "/paulcarson", "/paulca%2f"} {
		if grouped.MatchString(path) {
			t.Errorf("grouped regexp matches %q", path)
		}
		for _, p := range prefixes {
			if perPrefixMatch(t, prefixRule("Host(`ti.to`)", p), path) {
				t.Errorf("per-prefix %q matches %q", p, path)
			}
		}
	}
}

func TestWildcardHostRegexpMatchesExactlyOneLabel(t *testing.T) {
	m := hostMatcher("*.shop.example.org")
	re := regexp.MustCompile(strings.TrimSuffix(strings.TrimPrefix(m, "HostRegexp(`"), "`)"))
	for host, want := range map[string]bool{
		"a.shop.example.org":             true,
		"xn--bcher-kva.shop.example.org": true,
		"a-b.shop.example.org":           true,
		"shop.example.org":               false,
		"a.b.shop.example.org":           false,
		"ashopxexample.org":              false,
		"a.shopxexample.org":             false,
		"a.shop.example.org.evil.com":    false,
		"a.shop.example.orgx":            false,
		".shop.example.org":              false,
		// One trailing dot, as Traefik's Host matcher takes it for an exact name (its
		// HostRegexp sees the request host with the dot kept); never two, never the
		// apex's.
		"a.shop.example.org.":   true,
		"a.shop.example.org..":  false,
		"shop.example.org.":     false,
		"a.b.shop.example.org.": false,
	} {
		if got := re.MatchString(host); got != want {
			t.Errorf("%s matches %q: %v, want %v", m, host, got, want)
		}
	}
}

func TestAPIRuleDeniesAndDenyRuleIsItsComplementOnTheApex(t *testing.T) {
	denied := []string{"/v1/storage", "/v1/ingress/routes"}
	if got, want := apiRule("apps.example.com", denied),
		"Host(`apps.example.com`) && !PathPrefix(`/v1/storage`) && !PathPrefix(`/v1/ingress/routes`)"; got != want {
		t.Errorf("api rule %s, want %s", got, want)
	}
	if got, want := denyRule("apps.example.com", denied),
		"Host(`apps.example.com`) && (PathPrefix(`/v1/storage`) || PathPrefix(`/v1/ingress/routes`))"; got != want {
		t.Errorf("deny rule %s, want %s", got, want)
	}
	// An entry ending in a slash is a whole segment: bare, below, and encoded-slash.
	denied = []string{"/metrics", "/v1/ingress/"}
	if got, want := apiRule("apps.example.com", denied),
		"Host(`apps.example.com`) && !PathPrefix(`/metrics`) && !Path(`/v1/ingress`) && !PathPrefix(`/v1/ingress/`) && !PathPrefix(`/v1/ingress%2F`)"; got != want {
		t.Errorf("api rule %s, want %s", got, want)
	}
	if got, want := denyRule("apps.example.com", denied),
		"Host(`apps.example.com`) && (PathPrefix(`/metrics`) || Path(`/v1/ingress`) || PathPrefix(`/v1/ingress/`) || PathPrefix(`/v1/ingress%2F`))"; got != want {
		t.Errorf("deny rule %s, want %s", got, want)
	}
}
