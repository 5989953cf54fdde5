package render

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// unesc inverts esc, failing on anything esc cannot produce. That it exists and
// round-trips is the proof esc is injective.
func unesc(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isPlain(c):
			b.WriteByte(c)
		case c == '_':
			b.WriteByte('.')
		case c == '~':
			if i+2 >= len(s) {
				return "", fmt.Errorf("truncated escape in %q", s)
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil || strings.ToLower(s[i+1:i+3]) != s[i+1:i+3] {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			if isPlain(byte(v)) || v == '.' {
				return "", fmt.Errorf("non-canonical escape in %q", s)
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			return "", fmt.Errorf("byte %q cannot appear in an escaped component", c)
		}
	}
	return b.String(), nil
}

func TestEscapeRoundTripsAnyComponent(t *testing.T) {
	const alphabet = "abz09-._~*@/ %A\x00\xff"
	rng := rand.New(rand.NewPCG(7, 7))
	for range 20000 {
		n := rng.IntN(8)
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		e := esc(s)
		if strings.ContainsAny(e, ".@") {
			t.Fatalf("esc(%q) = %q contains '.' or '@'", s, e)
		}
		back, err := unesc(e)
		if err != nil || back != s {
			t.Fatalf("esc(%q) = %q decodes to %q, %v", s, e, back, err)
		}
	}
}

// TestNamesAreInjectiveOnAdversarialInputs renders names for hosts and prefixes that a
// lossy scheme would merge (dots versus dashes, '_' versus '.', a separator inside a
// component, wildcard versus a label spelled "wildcard") and requires them distinct,
// and never named like the applied probe's objects (kind "applied-" is the probe's
// alone), even for applications and hosts named like them.
func TestNamesAreInjectiveOnAdversarialInputs(t *testing.T) {
	hosts := []string{
		"a.b.example.com", "a-b.example.com", "ab.example.com", "a.b-example.com",
		"wildcard.shop.example.org", "*.shop.example.org", "x.shop.example.org",
		"x2a.shop.example.org", "path-a.example.com", "a.example.com", "applied-check", "applied-callback",
	}
	prefixes := []string{
		"x_y", "x.y", "x-y", "xy", "x~y", "x~5fy", "x~7ey", "x__y", "x..y", "a.example.com", "a_example_com",
		"b", "b.c", "c", "0", "p%2f",
	}
	// adder records name for what among names of one kind (routers, services): it must be
	// new, well formed, and never named like the applied probe's objects.
	adder := func(kind string) func(name, what string) {
		seen := map[string]string{}
		return func(name, what string) {
			t.Helper()
			if strings.HasPrefix(name, "applied-") {
				t.Errorf("%s is named %q, like the applied probe's objects", what, name)
			}
			if prev, dup := seen[name]; dup {
				t.Errorf("%s name %q for both %s and %s", kind, name, prev, what)
			}
			seen[name] = what
			checkName(t, kind, name)
		}
	}
	add := adder("router")
	for _, h := range hosts {
		add(hostRouterName(h), "host "+h)
		add(apiRouterName(h), "api "+h)
		add(denyRouterName(h), "deny "+h)
		add(guardRouterName(h), "guard "+h)
		for _, p := range prefixes {
			add(pathRouterName(h, p), "path "+h+" "+p)
		}
		for _, t2 := range hosts {
			add(pathsRouterName(h, t2), "paths "+h+" → "+t2)
		}
	}
	addSvc := adder("service")
	apps := []string{"a", "a-1", "a-1-0", "api", "app", "deny", "failover1", "applied-check", "plied-check"}
	nodes := []string{"n", "0-n", "1-0-n", "vps-a", "failover1"}
	for _, a := range apps {
		base := appServiceName(a)
		addSvc(base, "app "+a)
		for i := range 3 {
			if i > 0 {
				addSvc(failoverName(base, i), fmt.Sprintf("app %s failover %d", a, i))
			}
			for _, n := range nodes {
				addSvc(leafName(base, i, n), fmt.Sprintf("app %s leaf %d %s", a, i, n))
			}
		}
	}
	addSvc(svcAPI, "api")
	addSvc(svcDeny, "deny")
	for i := range 3 {
		addSvc(failoverName(svcAPI, i+1), "api failover")
		for _, n := range nodes {
			addSvc(leafName(svcAPI, i, n), "api leaf")
		}
	}
}

// TestRenderedNamesAreDistinctForDistinctInputs goes through the whole render: hosts
// and prefixes chosen to collide under a lossy escape must each get their own router.
func TestRenderedNamesAreDistinctForDistinctInputs(t *testing.T) {
	up := []routing.Upstream{{Node: "vps-a", Address: "10.83.0.1:24000", APIPort: 7400}}
	doc := &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "a-b.example.com", Application: "one", Upstreams: up, Paths: map[string]string{
			"x_y": "t.example.com", "x.y": "t.example.com", "x-y": "t.example.com", "x~5fy": "t.example.com",
		}},
		{Host: "a.b.example.com", Application: "two", Upstreams: up, Paths: map[string]string{
			"x_y": "t.example.com",
		}},
		{Host: "t.example.com", Application: "three", Upstreams: up},
	}}
	out := mustTraefik(t, doc, Options{})
	cfg := decodeStrict(t, out)
	// 3 host routers + 4 + 1 path routers + 2 guards.
	if got := len(cfg.HTTP.Routers); got != 10 {
		t.Errorf("%d routers, want 10 (one per host and prefix, two guards): %v", got, slices.Sorted(maps.Keys(cfg.HTTP.Routers)))
	}
}
