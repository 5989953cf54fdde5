package fleet

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// hostileFleet is randomFleet with what a corrupt store and hostile tenants add: stale
// nodes (some lists all stale: fail static), a node with a bad address, placements
// with bad and repeated entries, applications in a group without platform domain,
// wildcard claims held by other accounts, path maps across accounts.
func hostileFleet(rnd *rand.Rand) (State, Options) {
	st, opt := randomFleet(rnd)
	if rnd.IntN(4) == 0 {
		opt.NodeTTL = 0
	}
	if rnd.IntN(4) == 0 {
		opt.APIPublic = false
	}
	st.Nodes = append(st.Nodes, NodeRecord{Name: "vps-e", Address: "not-an-ip", APIPort: 7400, Seen: generatedAt,
		Instances: map[string]Instance{"app-01": {Port: 20001, Ready: true, AppID: "id1"}}})
	st.Nodes[1].Seen = generatedAt.Add(-10 * time.Minute) // vps-b: stale from the start
	for i := range st.Apps {
		a := &st.Apps[i]
		switch rnd.IntN(8) {
		case 0:
			a.Placement = append(slices.Clone(a.Placement), "BAD_NODE")
		case 1:
			if len(a.Placement) > 0 {
				a.Placement = append(slices.Clone(a.Placement), a.Placement[0])
			}
		case 2:
			a.Ingress = &Ingress{Group: "nowhere"} // a group without platform domain
		case 3:
			a.Placement = []string{"vps-b"} // only the stale node: fail static
			st.Nodes[1].Instances[a.Name] = Instance{Port: 21000 + i, Ready: true, AppID: a.ID}
		}
	}
	for i := range 6 {
		c := Claim{Host: fmt.Sprintf("x%d.w0.example.org", i), Account: st.Apps[i].Account, App: st.Apps[i].Name,
			Paths: map[string]string{"p": st.Apps[rnd.IntN(len(st.Apps))].Name + ".apps.example.com"}}
		st.Claims = append(st.Claims, c)
	}
	return st, opt
}

// hostileChange is change with more kinds: a stale node's instances (its heartbeat
// still old, or moved while it stays stale), the bad-address node's instances, a node
// record's boot and settings alone, an application recreated under its name (a new ID),
// every instance of an application going unready, keys of nothing (unknown, not .json,
// a node that is not there) and the same key twice.
func hostileChange(rnd *rand.Rand, st State, opt *Options) (State, []string) {
	st.Apps, st.Nodes, st.Claims = slices.Clone(st.Apps), slices.Clone(st.Nodes), slices.Clone(st.Claims)
	nodeAt := func(i int) (*NodeRecord, string) {
		n := &st.Nodes[i]
		n.Instances = maps.Clone(n.Instances)
		return n, NodeKey(n.Name)
	}
	anApp := func() *App { return &st.Apps[rnd.IntN(len(st.Apps))] }
	switch k := rnd.IntN(100); {
	case k < 15: // the stale node's instances; its heartbeat may move and stay old
		n, key := nodeAt(1)
		a := anApp()
		n.Instances[a.Name] = Instance{Port: 22000 + rnd.IntN(50), Ready: rnd.IntN(4) > 0, AppID: a.ID}
		if rnd.IntN(2) == 0 {
			n.Seen = n.Seen.Add(time.Second)
		}
		return st, []string{key, key}
	case k < 22: // the node with a bad address
		n, key := nodeAt(len(st.Nodes) - 1)
		a := anApp()
		n.Instances[a.Name] = Instance{Port: 23000 + rnd.IntN(50), Ready: true, AppID: a.ID}
		return st, []string{key}
	case k < 28: // boot and settings alone
		n, key := nodeAt(rnd.IntN(len(st.Nodes)))
		n.Boot = &Boot{Node: "n", ID: fmt.Sprint(rnd.IntN(1000))}
		n.Settings = &NodeSettings{PlatformDomains: []string{"other.example.com"}}
		return st, []string{key}
	case k < 36: // recreated under its name: a new ID; one node's instance follows
		a := anApp()
		a.ID = fmt.Sprintf("id%d", 3+rnd.IntN(1000))
		keys := []string{AppKey(a.Name)}
		if len(a.Placement) > 0 && rnd.IntN(2) == 0 {
			if i := slices.IndexFunc(st.Nodes, func(r NodeRecord) bool { return r.Name == a.Placement[0] }); i >= 0 {
				n, key := nodeAt(i)
				n.Instances[a.Name] = Instance{Port: 24000 + rnd.IntN(50), Ready: true, AppID: a.ID}
				keys = append(keys, key)
			}
		}
		return st, keys
	case k < 42: // every instance of an application unready
		a := anApp()
		var keys []string
		for i := range st.Nodes {
			if in, ok := st.Nodes[i].Instances[a.Name]; ok {
				n, key := nodeAt(i)
				in.Ready = false
				n.Instances[a.Name] = in
				keys = append(keys, key)
			}
		}
		return st, keys
	case k < 46: // keys naming nothing the state holds
		return st, []string{[]string{"apps/x", "nodes/ghost.json", "settings.json", "apps/.json", "apps/A-B.json"}[rnd.IntN(5)]}
	case k < 52: // time passes past the TTL for some
		opt.Now = opt.Now.Add(time.Duration(rnd.IntN(90)) * time.Second)
		return st, []string{}
	default:
		return change(rnd, st, opt)
	}
}

// TestDeriverEqualsDeriveAfterHostileChanges is TestDeriverEqualsDeriveAfterRandomChanges
// over hostileFleet and hostileChange.
func TestDeriverEqualsDeriveAfterHostileChanges(t *testing.T) {
	deriveAlongside(t, 80, 31, hostileFleet, hostileChange, 14)
}
