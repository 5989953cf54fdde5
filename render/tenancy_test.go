package render

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// hostileHosts are the names random tenants fight over: exact names, wildcards covering
// them (and one label deeper), platform apexes (claimable exactly), names under and
// over platform domains (refused), all in one small pool so that collisions are the
// rule.
var hostileHosts = []string{
	"x.example.org", "a.x.example.org", "b.x.example.org", "*.x.example.org", "*.a.x.example.org",
	"c.a.x.example.org", "example.org", "*.example.org",
	"apps.example.com", "eu.example.com", "*.example.com", "shop.apps.example.com", "*.apps.example.com",
	"y.example.net", "*.y.example.net", "z.y.example.net",
}

var hostileApps = []string{"shop", "blog", "api", "deny", "app-x", "x", "scafo-unowned", "w", "a"}

// hostileState is a random fleet of three accounts that do not trust each other: apps
// in two ingress groups, claims drawn from hostileHosts (some naming another account's
// application, some duplicated, some unreadable), path maps whose targets are any name
// at all (another account's, unready ones, wildcards, the host itself), nodes with
// unready and stale instances.
func hostileState(rng *rand.Rand) (fleet.State, fleet.Options) {
	accounts := []string{"acme", "globex", "initech"}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	nodes := []fleet.NodeRecord{
		{Name: "n1", Address: "10.0.0.1", APIPort: 7400, Seen: now, Instances: map[string]fleet.Instance{}},
		{Name: "n2", Address: "10.0.0.2", APIPort: 7400, Seen: now, Instances: map[string]fleet.Instance{}},
	}
	if rng.IntN(4) == 0 {
		nodes[1].Seen = now.Add(-time.Hour)
	}
	var st fleet.State
	for i, name := range hostileApps {
		if rng.IntN(5) == 0 {
			continue
		}
		a := fleet.App{Name: name, Account: accounts[rng.IntN(len(accounts))], Placement: []string{"n1", "n2"}[:1+rng.IntN(2)]}
		if rng.IntN(2) == 0 {
			a.Ingress = &fleet.Ingress{Group: "eu-1"}
		}
		if rng.IntN(3) == 0 {
			a.Health = &fleet.Health{Path: "/healthz"}
		}
		st.Apps = append(st.Apps, a)
		for j := range nodes {
			if rng.IntN(4) != 0 {
				nodes[j].Instances[name] = fleet.Instance{Port: 20000 + 10*i + j, Ready: rng.IntN(5) != 0}
			}
		}
	}
	if len(st.Apps) > 0 && rng.IntN(6) == 0 {
		st.Apps = append(st.Apps, st.Apps[rng.IntN(len(st.Apps))]) // a duplicated object
	}
	targets := slices.Clone(hostileHosts)
	for _, a := range hostileApps {
		targets = append(targets, a+".apps.example.com", a+".eu.example.com")
	}
	for _, h := range hostileHosts {
		switch rng.IntN(6) {
		case 0, 1, 2:
			continue
		case 3:
			st.UnreadableClaims = append(st.UnreadableClaims, h)
			if rng.IntN(3) != 0 {
				continue
			}
		}
		if len(st.Apps) == 0 {
			continue
		}
		a := st.Apps[rng.IntN(len(st.Apps))]
		c := fleet.Claim{Host: h, Account: a.Account, App: a.Name}
		if rng.IntN(8) == 0 {
			c.Account = accounts[rng.IntN(len(accounts))]
		}
		if rng.IntN(2) == 0 {
			c.Paths = map[string]string{}
			for k := range 1 + rng.IntN(3) {
				c.Paths[fmt.Sprintf("p%d", k)] = targets[rng.IntN(len(targets))]
			}
		}
		st.Claims = append(st.Claims, c)
	}
	st.Nodes = nodes
	opt := fleet.Options{PlatformDomains: []string{"apps.example.com", "eu.example.com"}, APIPublic: true,
		NodeTTL: time.Minute, Now: now, DomainGroups: map[string]string{"eu.example.com": "eu-1"}}
	return st, opt
}

// lookup is the document's own answer for a request (docs/design.md §2): the exact host, else
// the one-label wildcard; within the route, a prefix selects its target's route. It
// returns the application that answers, nodeAPI for the API apex, or "" for none.
func lookup(d *routing.Document, host, path string) string {
	if d.API != nil && slices.Contains(d.API.Hosts, host) {
		return nodeAPI
	}
	r := hostRoute(d, host)
	if r == nil {
		return ""
	}
	seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if t, ok := r.Paths[seg]; ok {
		if tr := exactRoute(d, t); tr != nil {
			return tr.Application
		}
	}
	return r.Application
}

// exactRoute is the route of host in d, or nil.
func exactRoute(d *routing.Document, host string) *routing.Route {
	i, ok := slices.BinarySearchFunc(d.Routes, host, func(r routing.Route, h string) int { return strings.Compare(r.Host, h) })
	if !ok {
		return nil
	}
	return &d.Routes[i]
}

// hostRoute is the route d's lookup finds for a request host: the exact host, else the
// one-label wildcard; nil for none.
func hostRoute(d *routing.Document, host string) *routing.Route {
	if r := exactRoute(d, host); r != nil {
		return r
	}
	if _, rest, ok := strings.Cut(host, "."); ok {
		return exactRoute(d, "*."+rest)
	}
	return nil
}

// nodeAPI stands for the node API in lookup's and answerer's answers (no application
// name can spell it).
const nodeAPI = "<node API>"

// answerer maps a router's service to the application it belongs to (nodeAPI for the
// node API, "deny" for the 503 service).
func answerer(svc string) string {
	if rest, ok := strings.CutPrefix(svc, svcApp); ok {
		app, _, _ := strings.Cut(rest, ".")
		return app
	}
	if svc == svcAPI || strings.HasPrefix(svc, svcAPI+".") {
		return nodeAPI
	}
	return svc
}

// TestTraefikRoutesEveryRequestLikeTheDocumentBetweenHostileTenants: over random fleets
// of tenants fighting over one small pool of names (hostileState), the rendered
// configuration, full and per group, sends every request where the document's lookup
// does, never on a tie; and a request for a host of the fleet that reaches an ingress
// of another group (a DNS record pointing at the wrong ingresses) is answered by no
// router or by an application of the same account as the document's answer, never by
// another tenant.
func TestTraefikRoutesEveryRequestLikeTheDocumentBetweenHostileTenants(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained
	iterations := 150
	if testing.Short() {
		iterations = 50
	}
	paths := []string{"/", "/p0", "/p0/x", "/p1", "/p2/y", "/zz"}
	for seed := range uint64(iterations) {
		rng := rand.New(rand.NewPCG(seed, 3))
		st, opt := hostileState(rng)
		doc, _ := fleet.Derive(st, opt)
		account := map[string]string{nodeAPI: "\x00platform"}
		counts := map[string]int{}
		for _, a := range st.Apps {
			counts[a.Name]++
			account[a.Name] = a.Account
		}
		for n, c := range counts {
			if c > 1 {
				delete(account, n) // a duplicated application is never routed
			}
		}
		account[routing.UnownedApplication] = "\x00no holder" // never an application's (Derive refuses the name)
		var hosts []string
		for _, h := range hostileHosts {
			hosts = append(hosts, strings.Replace(h, "*", "q", 1))
		}
		for _, r := range doc.Routes {
			hosts = append(hosts, strings.Replace(r.Host, "*", "r", 1))
		}
		type output struct {
			name   string
			groups []string
		}
		for _, o := range []output{{"full", nil}, {"default", []string{"default"}}, {"eu-1", []string{"eu-1"}}} {
			d := doc
			var body []byte
			var err error
			if o.groups == nil {
				body, err = Traefik(d, Options{PathGroupThreshold: int(seed % 3)})
			} else {
				d = routing.ForGroups(doc, o.groups)
				body, err = TraefikGroups(d, Options{PathGroupThreshold: int(seed % 3)}, o.groups, nil)
			}
			if err != nil {
				t.Fatalf("seed %d, %s: a derived document does not render: %v", seed, o.name, err)
			}
			cfg := decodeStrict(t, body)
			if cfg.HTTP == nil {
				cfg.HTTP = &HTTPConfiguration{} // "{}": nothing to route
			}
			routers := compileRouters(t, cfg)
			for _, host := range hosts {
				for _, p := range paths {
					name := route(t, routers, request{host: host, routingPath: p})
					got := ""
					if name != "" {
						got = answerer(cfg.HTTP.Routers[name].Service)
					}
					want := lookup(doc, host, p)
					// The group's own hosts (and the API apex) answer exactly as the
					// document says; any other host, nobody or the same account.
					own := o.groups == nil || want == nodeAPI
					if r := hostRoute(doc, host); r != nil && o.groups != nil && slices.Contains(o.groups, r.GroupOf()) {
						own = true
					}
					if own && got != want && !(got == "deny" && want != "") {
						t.Fatalf("seed %d, %s: %s%s → router %q (%q), the document says %q\nstate: %+v", seed, o.name, host, p, name, got, want, st)
					}
					if !own && got != "" && got != "deny" && account[got] != account[want] {
						t.Fatalf("seed %d, %s: %s%s → router %q of %q (account %q), the document says %q (account %q)\nstate: %+v",
							seed, o.name, host, p, name, got, account[got], want, account[want], st)
					}
				}
			}
		}
	}
}

// hostileCase is hostileState(seed)'s full render, and a probe for every request
// TestTraefikRoutesEveryRequestLikeTheDocumentBetweenHostileTenants makes with the
// router our rule evaluator picks, for TestTraefikDecodesTheRender to replay through
// Traefik's own muxer.
func hostileCase(t *testing.T, seed uint64) ([]byte, []probe) {
	t.Helper()
	st, opt := hostileState(rand.New(rand.NewPCG(seed, 3)))
	doc, _ := fleet.Derive(st, opt)
	body := mustTraefik(t, doc, Options{PathGroupThreshold: int(seed % 3)})
	cfg := decodeStrict(t, body)
	if cfg.HTTP == nil {
		return body, nil
	}
	routers := compileRouters(t, cfg)
	var probes []probe
	for _, r := range doc.Routes {
		host := strings.Replace(r.Host, "*", "r", 1)
		for _, p := range []string{"/", "/p0", "/p0/x", "/p1", "/p2/y", "/zz"} {
			probes = append(probes, probe{host, p, route(t, routers, request{host: host, routingPath: p})})
		}
	}
	return body, probes
}
