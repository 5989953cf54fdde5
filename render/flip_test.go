package render

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// The flip invariant (docs/design.md §4): the application an account was flipped away from must
// never receive a path whose first segment is the flipped prefix, in its raw spelling
// or its normalised one (percent-decoded, then dot segments and repeated slashes
// resolved). These tests route adversarial spellings through the rendered rules the way
// Traefik v3.6 does (entry-point normalisation, then routers by priority) and apply
// that oracle to whatever reaches the legacy application.

// --- a small evaluator of the rule subset the render emits ---

type request struct{ host, routingPath string }

type matcher func(request) bool

type ruleParser struct {
	toks []string
	pos  int
}

var ruleToken = regexp.MustCompile("^(?:\\s+|&&|\\|\\||!|\\(|\\)|[A-Za-z]+|`[^`]*`)")

func parseRule(rule string) (matcher, error) {
	var toks []string
	for s := rule; s != ""; {
		m := ruleToken.FindString(s)
		if m == "" {
			return nil, fmt.Errorf("rule %q: cannot tokenize at %q", rule, s)
		}
		if strings.TrimSpace(m) != "" {
			toks = append(toks, m)
		}
		s = s[len(m):]
	}
	p := &ruleParser{toks: toks}
	m, err := p.or()
	if err == nil && p.pos != len(toks) {
		err = fmt.Errorf("trailing tokens %v", toks[p.pos:])
	}
	if err != nil {
		return nil, fmt.Errorf("rule %q: %w", rule, err)
	}
	return m, nil
}

func (p *ruleParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *ruleParser) next() string { t := p.peek(); p.pos++; return t }

func (p *ruleParser) or() (matcher, error) {
	l, err := p.and()
	for err == nil && p.peek() == "||" {
		p.next()
		var r matcher
		if r, err = p.and(); err == nil {
			a, b := l, r
			l = func(q request) bool { return a(q) || b(q) }
		}
	}
	return l, err
}

func (p *ruleParser) and() (matcher, error) {
	l, err := p.not()
	for err == nil && p.peek() == "&&" {
		p.next()
		var r matcher
		if r, err = p.not(); err == nil {
			a, b := l, r
			l = func(q request) bool { return a(q) && b(q) }
		}
	}
	return l, err
}

func (p *ruleParser) not() (matcher, error) {
	switch p.peek() {
	case "!":
		p.next()
		m, err := p.not()
		return func(q request) bool { return !m(q) }, err
	case "(":
		p.next()
		m, err := p.or()
		if err == nil && p.next() != ")" {
			err = fmt.Errorf("missing )")
		}
		return m, err
	}
	name := p.next()
	if p.next() != "(" {
		return nil, fmt.Errorf("%s: want (", name)
	}
	arg := p.next()
	if len(arg) < 2 || arg[0] != '`' || p.next() != ")" {
		return nil, fmt.Errorf("%s: want one backquoted argument", name)
	}
	arg = arg[1 : len(arg)-1]
	switch name {
	case "Host":
		return func(q request) bool { return q.host == arg }, nil
	case "Path":
		return func(q request) bool { return q.routingPath == arg }, nil
	case "PathPrefix":
		return func(q request) bool { return strings.HasPrefix(q.routingPath, arg) }, nil
	case "HostRegexp", "PathRegexp":
		re, err := regexp.Compile(arg)
		if err != nil {
			return nil, err
		}
		if name == "HostRegexp" {
			return func(q request) bool { return re.MatchString(q.host) }, nil
		}
		return func(q request) bool { return re.MatchString(q.routingPath) }, nil
	}
	return nil, fmt.Errorf("unknown matcher %s", name)
}

type compiledRouter struct {
	name     string
	priority int
	match    matcher
}

// compileRouters parses every rule of a render, in Traefik's order.
func compileRouters(t *testing.T, cfg Configuration) []compiledRouter {
	t.Helper()
	var out []compiledRouter
	for name, r := range cfg.HTTP.Routers {
		m, err := parseRule(r.Rule)
		if err != nil {
			t.Fatalf("router %s: %v", name, err)
		}
		out = append(out, compiledRouter{name: name, priority: r.Priority, match: m})
	}
	slices.SortFunc(out, func(a, b compiledRouter) int { return cmp.Compare(b.priority, a.priority) })
	return out
}

// route returns the router Traefik would pick, "" for none, and fails the test when two
// routers of the same priority both match (Traefik's order between them is arbitrary).
func route(t *testing.T, routers []compiledRouter, q request) string {
	t.Helper()
	for i, r := range routers {
		if !r.match(q) {
			continue
		}
		for _, o := range routers[i+1:] {
			if o.priority != r.priority {
				break
			}
			if o.match(q) {
				t.Fatalf("%+v matches %s and %s at the same priority %d", q, r.name, o.name, r.priority)
			}
		}
		return r.name
	}
	return ""
}

// --- Traefik's entry point, as in v3.6.12 pkg/server/server_entrypoint_tcp.go and
// pkg/muxer/http/mux.go ---

var unreserved = func() map[string]byte {
	m := map[string]byte{}
	for c := 0; c < 128; c++ {
		b := byte(c)
		if 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("-._~", b) >= 0 {
			m[fmt.Sprintf("%%%02X", c)] = b
		}
	}
	return m
}()

var reservedEscapes = map[string]bool{
	"%3A": true, "%2F": true, "%3F": true, "%23": true, "%5B": true, "%5D": true, "%40": true,
	"%21": true, "%24": true, "%26": true, "%27": true, "%28": true, "%29": true, "%2A": true,
	"%2B": true, "%2C": true, "%3B": true, "%3D": true, "%25": true,
}

// traefikEntry returns the routing path Traefik matches rules against and the path the
// backend receives for a request target, or ok=false when Go's server would refuse it.
func traefikEntry(target string) (routingPath, backendPath string, ok bool) {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return "", "", false
	}
	if raw := u.RawPath; raw != "" { // normalizePath
		var b strings.Builder
		for i := 0; i < len(raw); i++ {
			if raw[i] != '%' {
				b.WriteByte(raw[i])
				continue
			}
			if i+2 >= len(raw) {
				return "", "", false
			}
			e := strings.ToUpper(raw[i : i+3])
			if c, ok := unreserved[e]; ok {
				b.WriteByte(c)
			} else {
				b.WriteString(e)
			}
			i += 2
		}
		u.RawPath = b.String()
	}
	u = u.JoinPath() // sanitizePath (default true)
	esc := u.EscapedPath()
	var rp strings.Builder // withRoutingPath
	for i := 0; i < len(esc); i++ {
		if esc[i] != '%' {
			rp.WriteByte(esc[i])
			continue
		}
		e := esc[i : i+3]
		if reservedEscapes[e] {
			rp.WriteString(e)
		} else {
			d, err := url.PathUnescape(e)
			if err != nil {
				return "", "", false
			}
			rp.WriteString(d)
		}
		i += 2
	}
	return rp.String(), esc, true
}

// normalisedFirstSegment is the oracle's view of path: percent-decoded, optionally
// with backslashes as separators, then dot segments and repeated slashes resolved.
func normalisedFirstSegment(path string, backslashIsSlash bool) (string, bool) {
	d, err := url.PathUnescape(path)
	if err != nil {
		return "", false
	}
	if backslashIsSlash {
		d = strings.ReplaceAll(d, `\`, "/")
	}
	var segs []string
	for _, s := range strings.Split(d, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, s)
		}
	}
	if len(segs) == 0 {
		return "", true
	}
	return segs[0], true
}

func rawFirstSegment(path string) string {
	s := strings.TrimPrefix(path, "/")
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	return s
}

// flipDoc: ti.to belongs to tito-classic (the legacy application); paulca and j.smith
// have been flipped to go.tito.io, bob has not.
func flipDoc() *routing.Document {
	up := func(port string) []routing.Upstream {
		return []routing.Upstream{{Node: "vps-a", Address: "10.83.0.1:" + port, APIPort: 7400}}
	}
	return &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "go.tito.io", Application: "tito-go", Upstreams: up("24600")},
		{Host: "ti.to", Application: "tito-classic", Upstreams: up("24500"),
			Paths: map[string]string{"paulca": "go.tito.io", "j.smith": "go.tito.io"}},
	}}
}

func adversarialPaths() []string {
	pieces := []string{"paulca", "bob", "j.smith", "j%2Esmith", "pa%75lca", ".", "..", "%2E", "%2e%2E", ""}
	seps := []string{"/", "%2F", "%2f", "%5C", `\`}
	paths := map[string]bool{}
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		paths[prefix] = true
		paths[prefix+"/"] = true
		if depth == 3 {
			return
		}
		for _, p := range pieces {
			for _, s := range seps {
				if depth == 0 {
					walk("/"+p, 1)
					break
				}
				walk(prefix+s+p, depth+1)
			}
		}
	}
	walk("", 0)
	return slices.Sorted(maps.Keys(paths))
}

func TestFlipInvariantHoldsForAdversarialSpellings(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained
	flipped := map[string]bool{"paulca": true, "j.smith": true}
	paths := adversarialPaths()
	for _, threshold := range []int{0, 1} { // per-prefix routers; one grouped router
		out := mustTraefik(t, flipDoc(), Options{PathGroupThreshold: threshold})
		routers := compileRouters(t, decodeStrict(t, out))
		checked, toLegacy := 0, 0
		for _, p := range paths {
			rp, backend, ok := traefikEntry(p)
			if !ok {
				continue
			}
			checked++
			got := route(t, routers, request{host: "ti.to", routingPath: rp})
			if got != "host-ti_to" {
				continue
			}
			toLegacy++
			if flipped[rawFirstSegment(backend)] {
				t.Errorf("threshold %d: %q reaches the legacy app as %q (raw first segment flipped)", threshold, p, backend)
			}
			for _, lenient := range []bool{false, true} {
				if seg, ok := normalisedFirstSegment(backend, lenient); ok && flipped[seg] {
					t.Errorf("threshold %d: %q reaches the legacy app as %q, which normalises into %q (backslash as slash: %v)",
						threshold, p, backend, seg, lenient)
				}
			}
		}
		if checked < 10000 || toLegacy < 1000 {
			t.Fatalf("threshold %d: only %d paths checked, %d to legacy: the generator is broken", threshold, checked, toLegacy)
		}
	}
}

type probe struct {
	Host   string `json:"host"`
	Target string `json:"target"`
	Want   string `json:"want"`
}

// flipProbes are ordinary and hostile requests on flipDoc and where they must land.
func flipProbes(threshold int) []probe {
	toNew, toNewJ := "path-ti_to.paulca", "path-ti_to.j_smith"
	if threshold == 1 {
		toNew, toNewJ = "paths-ti_to.go_tito_io", "paths-ti_to.go_tito_io"
	}
	return []probe{
		{"ti.to", "/paulca", toNew},
		{"ti.to", "/paulca/", toNew},
		{"ti.to", "/paulca/tickets?x=1", toNew},
		{"ti.to", "/paulca%2Ftickets", toNew},
		{"ti.to", "/paulca%2ftickets", toNew},
		{"ti.to", "/%70aulca/x", toNew},
		{"ti.to", "/j.smith/x", toNewJ},
		{"ti.to", "/j%2Esmith/x", toNewJ},
		{"ti.to", "/bob/../paulca/x", toNew},
		{"ti.to", "/paulcarson", "host-ti_to"},
		{"ti.to", "/bob/x", "host-ti_to"},
		{"ti.to", "/", "host-ti_to"},
		{"ti.to", "/static/a%2Fb.png", "host-ti_to"},
		{"ti.to", "/bob/v1.2/x", "host-ti_to"},
		{"ti.to", "/bob/..x/y", "host-ti_to"},
		{"ti.to", "/bob/..%2Fpaulca/x", "guard-ti_to"},
		{"ti.to", "/%2Fpaulca/x", "guard-ti_to"},
		{"ti.to", "/.%2Fpaulca/x", "guard-ti_to"},
		{"ti.to", "/paulca%5Cx", "guard-ti_to"},
		{"go.tito.io", "/%2Fpaulca/x", "host-go_tito_io"}, // no path map, no guard
		{"example.org", "/paulca", ""},
	}
}

// goldenProbes route requests through golden cases: exact host before wildcard, a
// wildcard's path map never taking an exact host's request, the apex before a
// wildcard covering it, the apex's denied prefixes, a passthrough host no HTTP router takes.
var goldenProbes = map[string][]probe{
	"custom-wildcard": {
		{"a.shop.example.org", "/", "host-~2a_shop_example_org"},
		{"a.shop.example.org", "/checkout/x", "path-~2a_shop_example_org.checkout"},
		{"vip.shop.example.org", "/checkout/x", "host-vip_shop_example_org"},
		{"a.b.shop.example.org", "/", ""},
		{"shop.example.org", "/", ""},
		{"a.shop.example.org", "/x/..%2Fcheckout", "guard-~2a_shop_example_org"},
	},
	"fail-closed": {
		{"apps.example.com", "/v1/healthz", "api-apps_example_com"},
		{"apps.example.com", "/v1/status", "deny-apps_example_com"},
		{"apps.example.com", "/v1/ingress/routes", "deny-apps_example_com"},
		{"apps.example.com", "/v1/ingress", "deny-apps_example_com"},
		{"apps.example.com", "/v1/health/instances/tito-go", "deny-apps_example_com"},
		{"apps.example.com", "/v1/storage/x", "deny-apps_example_com"},
		{"www.example.com", "/v1/storage", "host-~2a_example_com"},
		{"ti.to", "/paulca/x", "path-ti_to.paulca"},
	},
	"fail-closed-hosts": {
		{"vip.shop.example.org", "/", "host-vip_shop_example_org"},
		{"vip.shop.example.org", "/x", "host-vip_shop_example_org"},
		{"www.shop.example.org", "/", "host-~2a_shop_example_org"},
		{"shop.apps.example.com", "/", "host-shop_apps_example_com"},
		{"lost.example.net", "/", "host-lost_example_net"},
		{"other.example.net", "/", "host-~2a_example_net"},
		{"apps.example.com", "/v1/status", ""},
		{"apps.example.com", "/v1/healthz", "api-apps_example_com"},
	},
	"api-apex": {
		{"apps.example.com", "/v1/storage", "host-apps_example_com"},
		{"apps.example.net", "/v1/storage", ""},
		{"apps.example.net", "/v1/healthz", "api-apps_example_net"},
	},
	// shop's *.example.org covers the passthrough db.example.org, which has no HTTP
	// router: the wildcard's routers exclude it, in any spelling Host matches (a
	// request for it over HTTP finds no router: Traefik's 404), and still take the rest.
	"passthrough": {
		{"db.example.org", "/", ""},
		{"db.example.org.", "/", ""},
		{"db.apps.example.com", "/", ""},
		{"other.example.org", "/", "host-~2a_example_org"},
	},
	"tls-wildcard-certs": {
		{"x.shop.example.org", "/paulca", "host-~2a_shop_example_org"},
		{"ti.to", "/paulca", "path-ti_to.paulca"},
	},
}

// TestGoldenCasesNeverTieAndRouteByTheDocumentLookup runs goldenProbes, and a few
// paths on every host of every case to catch two routers matching at one priority;
// and flipProbes on flipDoc in both router forms, which keep the path guard honest: it
// takes only what could move between first segments, never ordinary traffic.
func TestGoldenCasesNeverTieAndRouteByTheDocumentLookup(t *testing.T) {
	probes := maps.Clone(goldenProbes)
	cases := loadCases(t)
	for name := range probes {
		if !slices.ContainsFunc(cases, func(c loadedCase) bool { return c.name == name }) {
			t.Errorf("no testdata case %q", name)
		}
	}
	for _, threshold := range []int{0, 1} {
		name := fmt.Sprintf("flip/threshold=%d", threshold)
		cases = append(cases, loadedCase{name: name, doc: flipDoc(), opt: Options{PathGroupThreshold: threshold}})
		probes[name] = flipProbes(threshold)
	}
	for _, c := range cases {
		out := mustTraefik(t, c.doc, c.opt)
		routers := compileRouters(t, decodeStrict(t, out))
		for _, p := range probes[c.name] {
			rp, _, ok := traefikEntry(p.Target)
			if !ok {
				t.Fatalf("%s: target %q refused", c.name, p.Target)
			}
			if got := route(t, routers, request{host: p.Host, routingPath: rp}); got != p.Want {
				t.Errorf("%s: %s%s (routing path %q) → %q, want %q", c.name, p.Host, p.Target, rp, got, p.Want)
			}
		}
		// No tie on any host of the case for a handful of paths.
		for _, r := range c.doc.Routes {
			host := strings.Replace(r.Host, "*", "w", 1)
			for _, path := range []string{"/", "/paulca/x", "/checkout", "/v1/storage", "/%2F..%2Fx"} {
				route(t, routers, request{host: host, routingPath: path})
			}
		}
	}
}
