package render

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

var testGroups = []string{"default", "eu-1", "eu-2", "us-1"}

// groupedState is a generated fleet whose applications are spread over testGroups
// (app i in group i%4; ti.to's owner and its targets, the multiples of 100, all in
// default), with one platform domain per group.
func groupedState(apps, prefixes int) (fleet.State, fleet.Options) {
	st := fleet.GenerateState(apps, prefixes)
	for i := range st.Apps {
		if g := testGroups[i%len(testGroups)]; g != "default" {
			st.Apps[i].Ingress = &fleet.Ingress{Group: g}
		}
	}
	opt := fleet.GenerateOptions()
	opt.PlatformDomains = []string{"apps.example.com", "eu1.example.com", "eu2.example.com", "us1.example.com"}
	opt.DomainGroups = map[string]string{"eu1.example.com": "eu-1", "eu2.example.com": "eu-2", "us1.example.com": "us-1"}
	return st, opt
}

// groupOutputs renders every format of every single group of doc, with fleet
// certificates fc (nil: none). (The incremental render writes the same bytes:
// TestIncrementalRenderEqualsFullRender.)
func groupOutputs(t *testing.T, doc *routing.Document, fc *FleetCerts) map[string][3]string {
	t.Helper()
	out := map[string][3]string{}
	for _, g := range testGroups {
		sel := []string{g}
		gd := routing.ForGroups(doc, sel)
		routes, err := routing.Marshal(gd)
		if err != nil {
			t.Fatal(err)
		}
		full, err := TraefikGroups(gd, Options{}, sel, fc)
		if err != nil {
			t.Fatal(err)
		}
		out[g] = [3]string{gd.Revision, string(routes), string(full)}
	}
	return out
}

// TestAChangeInOneGroupLeavesOtherGroupsBytesIdentical: random edits to the
// applications of one group (readiness, ports, placement, health paths, new and
// removed applications, custom domains, prefixes, an application moving to another
// group, a fleet certificate of one of its hosts issued, renewed or dropped) leave
// every other group's revision, routing document and Traefik configuration
// byte-identical. The API apex has a fleet certificate, which every group carries.
// (Each seed's 40 steps make every kind of edit about five times.)
func TestAChangeInOneGroupLeavesOtherGroupsBytesIdentical(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained
	steps := 40
	if testing.Short() {
		steps = 15
	}
	for seed := range uint64(2) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			st, opt := groupedState(240, 200)
			doc, _ := fleet.Derive(st, opt)
			if doc.API == nil || len(doc.API.Hosts) == 0 {
				t.Fatal("the generated fleet has no API apex")
			}
			fc := fleetCertsWith(nil, doc.API.Hosts[0], true, 0)
			before := groupOutputs(t, doc, fc)
			for g, o := range before {
				if !strings.Contains(o[2], `"tls":{"certificates":[`) || !strings.Contains(o[1], `"host"`) {
					t.Fatalf("group %s lacks the API apex's fleet certificate, or routes", g)
				}
			}
			n := 0
			for step := range steps {
				g := testGroups[rng.IntN(len(testGroups))]
				var members []int
				for i := range st.Apps {
					if st.Apps[i].GroupOf() == g && !strings.HasSuffix(st.Apps[i].Name, "00") { // multiples of 100: ti.to's world
						members = append(members, i)
					}
				}
				a := &st.Apps[members[rng.IntN(len(members))]]
				touched := []string{g}
				var what string
				certChanged := false
				switch rng.IntN(8) {
				case 0:
					nd := &st.Nodes[rng.IntN(3)]
					inst := nd.Instances[a.Name]
					inst.Ready = !inst.Ready
					if inst.Port == 0 {
						inst.Port = 41000
					}
					nd.Instances[a.Name] = inst
					what = "readiness of " + a.Name
				case 1:
					st.Nodes[rng.IntN(3)].Instances[a.Name] = fleet.Instance{Port: 1 + rng.IntN(60000), Ready: true}
					what = "port of " + a.Name
				case 2:
					a.Placement = []string{"vps-c", "vps-a", "vps-b"}[:1+rng.IntN(3)]
					what = "placement of " + a.Name
				case 3:
					a.Health = &fleet.Health{Path: fmt.Sprintf("/h%d", rng.IntN(9))}
					what = "health of " + a.Name
				case 4:
					n++
					name := fmt.Sprintf("grp-new-%d", n)
					st.Apps = append(st.Apps, fleet.App{Name: name, Account: a.Account, Placement: []string{"vps-a"}, Ingress: a.Ingress})
					st.Nodes[0].Instances[name] = fleet.Instance{Port: 42000 + n, Ready: true}
					st.Claims = append(st.Claims, fleet.Claim{Host: name + ".example.io", Account: a.Account, App: name,
						Paths: map[string]string{"x": a.Name + "." + domainOf(opt, g)}})
					what = "new app " + name + " with a custom domain and a prefix to " + a.Name
				case 5:
					st.Claims = append(st.Claims, fleet.Claim{Host: fmt.Sprintf("*.w%d.example.io", step), Account: a.Account, App: a.Name})
					what = "wildcard for " + a.Name
				case 6:
					host := ""
					for _, r := range doc.Routes {
						if r.Application == a.Name && !routing.IsWildcard(r.Host) {
							host = r.Host
						}
					}
					if host == "" {
						what = "noop"
						break
					}
					if fc.Managed[host] && rng.IntN(2) == 0 {
						fc = fleetCertsWithout(fc, host)
						what = "certificate of " + host + " dropped"
					} else {
						fc = fleetCertsWith(fc, host, true, step+1)
						what = "certificate of " + host + " issued"
					}
					certChanged = true
				default:
					to := testGroups[rng.IntN(len(testGroups))]
					a.Ingress = &fleet.Ingress{Group: to}
					touched = append(touched, to)
					what = a.Name + " moves to " + to
				}
				// A group whose prefix targets the edited application carries its
				// service: that group may change too (before the edit or after it).
				touched = append(touched, groupsTargeting(doc, a.Name)...)
				doc, _ = fleet.Derive(st, opt)
				touched = append(touched, groupsTargeting(doc, a.Name)...)
				after := groupOutputs(t, doc, fc)
				if certChanged && after[g][2] == before[g][2] {
					t.Fatalf("step %d (%s in group %s): the group's configuration did not change", step, what, g)
				}
				for _, other := range testGroups {
					if slices.Contains(touched, other) {
						continue
					}
					if after[other] != before[other] {
						t.Fatalf("step %d (%s in group %s): group %s changed", step, what, g, other)
					}
				}
				before = after
			}
		})
	}
}

// groupsTargeting returns the groups of the routes whose path maps target a host of app.
func groupsTargeting(doc *routing.Document, app string) []string {
	hosts := map[string]bool{}
	for _, r := range doc.Routes {
		if r.Application == app {
			hosts[r.Host] = true
		}
	}
	var out []string
	for _, r := range doc.Routes {
		for _, t := range r.Paths {
			if hosts[t] {
				out = append(out, r.GroupOf())
			}
		}
	}
	return out
}

func domainOf(opt fleet.Options, group string) string {
	for d, g := range opt.DomainGroups {
		if g == group {
			return d
		}
	}
	return "apps.example.com"
}

// TestGroupCarriesTheServicesOfItsCrossGroupPrefixesButNotTheirHosts: prefixes on a
// host of group eu-1 targeting applications of group us-1 bring those applications'
// services into eu-1's configuration, never a router for their hosts; the API apex is
// in every group. A cross-group target's own path map never reaches eu-1 (issue 25 item
// 10), even when it points back at a host eu-1 carries (so a leak would keep eu-1's
// document valid): eu-1 carries mid.example.org without its map, and editing that map
// leaves eu-1's revision and bytes alone.
func TestGroupCarriesTheServicesOfItsCrossGroupPrefixesButNotTheirHosts(t *testing.T) {
	eu, us := &fleet.Ingress{Group: "eu-1"}, &fleet.Ingress{Group: "us-1"}
	st := fleet.State{
		Apps: []fleet.App{
			{Name: "front", Account: "acme", Placement: []string{"n1"}, Ingress: eu},
			{Name: "side", Account: "acme", Placement: []string{"n1"}, Ingress: eu},
			{Name: "mid", Account: "acme", Placement: []string{"n1"}, Ingress: us},
			{Name: "back", Account: "acme", Placement: []string{"n1", "n2"}, Ingress: us},
			{Name: "other", Account: "acme", Placement: []string{"n2"}},
		},
		Claims: []fleet.Claim{
			{Host: "shop.example.org", Account: "acme", App: "front", Paths: map[string]string{"api": "back.us1.example.com", "m": "mid.example.org"}},
			{Host: "side.example.org", Account: "acme", App: "side"},
			{Host: "mid.example.org", Account: "acme", App: "mid", Paths: map[string]string{"s": "side.example.org"}},
		},
		Nodes: []fleet.NodeRecord{
			{Name: "n1", Address: "10.0.0.1", APIPort: 7400, Instances: map[string]fleet.Instance{"front": {Port: 1001, Ready: true},
				"side": {Port: 1003, Ready: true}, "mid": {Port: 1004, Ready: true}, "back": {Port: 1002, Ready: true}}},
			{Name: "n2", Address: "10.0.0.2", APIPort: 7400, Instances: map[string]fleet.Instance{"back": {Port: 2002, Ready: true}, "other": {Port: 2003, Ready: true}}},
		},
	}
	opt := fleet.Options{PlatformDomains: []string{"eu1.example.com", "us1.example.com", "apps.example.com"}, APIPublic: true,
		DomainGroups: map[string]string{"eu1.example.com": "eu-1", "us1.example.com": "us-1"}}
	sel := []string{"eu-1"}
	render := func() (*routing.Document, *routing.Document, []byte) {
		t.Helper()
		doc, _ := fleet.Derive(st, opt)
		gd := routing.ForGroups(doc, sel)
		if err := gd.Validate(); err != nil {
			t.Fatalf("eu-1's document is invalid: %v", err)
		}
		body, err := TraefikGroups(gd, Options{}, sel, nil)
		if err != nil {
			t.Fatal(err)
		}
		return doc, gd, body
	}
	doc, gd, body := render()
	var hosts []string
	for _, r := range gd.Routes {
		hosts = append(hosts, r.Host+"@"+r.GroupOf())
		if r.Host == "mid.example.org" && r.Paths != nil {
			t.Errorf("eu-1 carries mid.example.org with its path map %v (us-1's business)", r.Paths)
		}
	}
	want := []string{"back.us1.example.com@us-1", "front.eu1.example.com@eu-1", "mid.example.org@us-1", "shop.example.org@eu-1",
		"side.eu1.example.com@eu-1", "side.example.org@eu-1"}
	if !slices.Equal(hosts, want) {
		t.Fatalf("eu-1 document routes %v, want %v", hosts, want)
	}
	for _, r := range doc.Routes {
		if r.Application == "back" && r.Host != "back.us1.example.com" {
			t.Errorf("back (us-1) routed at %s, outside its group's platform domain", r.Host)
		}
		if r.Host == "mid.example.org" && len(r.Paths) == 0 {
			t.Fatal("mid.example.org has no path map in the whole document: the test proves nothing")
		}
	}
	cfg := decodeStrict(t, body)
	for name, r := range cfg.HTTP.Routers {
		if strings.Contains(name, "back") || strings.Contains(name, "mid") || strings.Contains(name, "other") || strings.Contains(r.Rule, "`/s") {
			t.Errorf("eu-1 configuration has router %s (%s) of another group's host or map", name, r.Rule)
		}
	}
	if _, ok := cfg.HTTP.Services["app-back"]; !ok {
		t.Errorf("eu-1 configuration lacks app-back, the service its prefix /api targets: %v", slices.Sorted(maps.Keys(cfg.HTTP.Services)))
	}
	if _, ok := cfg.HTTP.Services["app-other"]; ok {
		t.Error("eu-1 configuration carries app-other, which nothing in eu-1 needs")
	}
	if r, ok := cfg.HTTP.Routers["path-shop_example_org.api"]; !ok || r.Service != "app-back" {
		t.Errorf("the prefix router: %+v (present %v), want service app-back", r, ok)
	}
	if _, ok := cfg.HTTP.Routers["api-eu1_example_com"]; !ok {
		t.Errorf("the API apex is missing from group eu-1: %v", slices.Sorted(maps.Keys(cfg.HTTP.Routers)))
	}
	st.Claims[2].Paths = map[string]string{"t": "side.example.org"}
	if _, gd2, body2 := render(); gd2.Revision != gd.Revision || !bytes.Equal(body, body2) {
		t.Error("a change to us-1's mid.example.org path map moved eu-1's revision or bytes")
	}
}
