package fleet

import (
	"fmt"
	"slices"
	"time"
)

// generatedAt is the heartbeat time of generated node records and the Now of
// GenerateOptions: fixed, so generated state derives to the same bytes every run.
var generatedAt = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// GenerateState returns a synthetic, deterministic fleet for benchmarks and load tests:
//
//   - nodes vps-a, vps-b, vps-c (10.83.0.1–3, API port 7400), fresh heartbeats, every
//     placed instance ready;
//   - nApps applications "app-00000"…, accounts "acct-000"…"acct-099" round-robin,
//     each placed on two of the three nodes in rotating order, every other one with a
//     health path;
//   - every 10th application claims "app-NNNNN.example.org", every 50th also
//     "*.app-NNNNN.example.net";
//   - application app-00000 (acct-000) claims "ti.to" with nPrefixes prefixes
//     "p00000"… targeting, round-robin, the platform hosts of acct-000's applications.
//
// With GenerateOptions (one platform domain) it derives to about 1.12 × nApps routes.
func GenerateState(nApps, nPrefixes int) State {
	return GenerateFleet(nApps, nPrefixes, 3)
}

// GenerateFleet is GenerateState on nNodes nodes (at least 3): vps-a, vps-b, vps-c, then
// vps-0003…, at 10.83.0.1…; each application is placed on two consecutive nodes in
// rotation, so a node holds about 2 × nApps / nNodes instances.
func GenerateFleet(nApps, nPrefixes, nNodes int) State {
	nodes := make([]NodeRecord, max(nNodes, 3))
	for i := range nodes {
		name := fmt.Sprintf("vps-%04d", i)
		if i < 3 {
			name = "vps-" + string(rune('a'+i))
		}
		nodes[i] = NodeRecord{Name: name, Address: fmt.Sprintf("10.83.%d.%d", (i+1)/256, (i+1)%256), APIPort: 7400,
			Seen: generatedAt, Instances: make(map[string]Instance, nApps*2/len(nodes)+1)}
	}
	st := State{Apps: make([]App, 0, nApps), Claims: make([]Claim, 0, nApps/10+nApps/50+1)}
	var sameAccount []string
	for i := range nApps {
		name := fmt.Sprintf("app-%05d", i)
		account := fmt.Sprintf("acct-%03d", i%100)
		first, second := &nodes[i%len(nodes)], &nodes[(i+1)%len(nodes)]
		app := App{Name: name, Account: account, Placement: []string{first.Name, second.Name}}
		if i%2 == 0 {
			app.Health = &Health{Path: "/healthz"}
		}
		st.Apps = append(st.Apps, app)
		first.Instances[name] = Instance{Port: 20000 + i%40000, Ready: true}
		second.Instances[name] = Instance{Port: 20000 + (i+7)%40000, Ready: true}
		if i%10 == 0 {
			st.Claims = append(st.Claims, Claim{Host: name + ".example.org", Account: account, App: name})
		}
		if i%50 == 0 {
			st.Claims = append(st.Claims, Claim{Host: "*." + name + ".example.net", Account: account, App: name})
		}
		if i%100 == 0 {
			sameAccount = append(sameAccount, name+"."+generatedDomain)
		}
	}
	if nApps > 0 && nPrefixes > 0 {
		paths := make(map[string]string, nPrefixes)
		for k := range nPrefixes {
			paths[fmt.Sprintf("p%05d", k)] = sameAccount[k%len(sameAccount)]
		}
		st.Claims = append(st.Claims, Claim{Host: "ti.to", Account: "acct-000", App: "app-00000", Paths: paths})
	}
	st.Nodes = nodes
	return st
}

const generatedDomain = "apps.example.com"

// GenerateOptions are the options GenerateState's fleet is meant to be derived with:
// platform domain apps.example.com, the API apex on, a 60 s node TTL, and Now equal to
// the generated heartbeats.
func GenerateOptions() Options {
	return Options{
		PlatformDomains: []string{generatedDomain},
		APIPublic:       true,
		NodeTTL:         60 * time.Second,
		Now:             generatedAt,
	}
}

// GenerateGroup puts the applications i of st for which in(i) holds in group, whose
// platform domain (added to opt) is domain: a generated fleet split across ingress
// groups.
func GenerateGroup(st *State, opt *Options, group, domain string, in func(i int) bool) {
	for i := range st.Apps {
		if in(i) {
			st.Apps[i].Ingress = &Ingress{Group: group}
		}
	}
	opt.PlatformDomains = append(slices.Clone(opt.PlatformDomains), domain)
	if opt.DomainGroups == nil {
		opt.DomainGroups = map[string]string{}
	}
	opt.DomainGroups[domain] = group
}
