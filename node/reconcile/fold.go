package reconcile

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// fold is the fleet state the Reconciler derives from, in store-key order, kept across
// passes: a pass that read a few objects changes their entries (copies of the lists,
// which the Deriver and handlers may still hold) instead of sorting and folding every
// cached object again. Immutable once made.
type fold struct {
	apps   []fleet.App   // the valid application objects, in key order
	claims []fleet.Claim // the valid claim objects, in key order
	// nodeKeys are the keys of node records (valid or not), sorted: their records are
	// read every pass (their seen times move without a change).
	nodeKeys []string
	// unreadableClaims are the hosts of claim objects that could not be read; bad is
	// every other malformed object, by key. A change to or from a malformed object
	// folds everything again (they are rare).
	unreadableClaims []string
	bad              []fleet.Skipped
	badKeys          map[string]bool
	// groups counts the applications of each valid group name.
	groups map[string]int
}

// buildFold folds every cached object.
func buildFold(objects map[string]cachedObject) *fold {
	keys := make([]string, 0, len(objects))
	for k := range objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	f := &fold{badKeys: map[string]bool{}, groups: map[string]int{}}
	for _, k := range keys {
		o := objects[k]
		if strings.HasPrefix(k, fleet.PrefixNodes) {
			f.nodeKeys = append(f.nodeKeys, k)
		}
		if o.bad != "" {
			f.badKeys[k] = true
			if h, ok := strings.CutPrefix(k, fleet.PrefixDomains); ok && strings.HasSuffix(h, ".json") {
				// A claimed name whose object is unreadable keeps a router of its own
				// (503), so nobody inherits its traffic; Derive reports it.
				f.unreadableClaims = append(f.unreadableClaims, strings.TrimSuffix(h, ".json"))
				continue
			}
			f.bad = append(f.bad, fleet.Skipped{Object: k, Reason: o.bad})
		}
		switch v := o.value.(type) {
		case fleet.App:
			f.apps = append(f.apps, v)
			f.count(v, 1)
		case fleet.Claim:
			f.claims = append(f.claims, v)
		}
	}
	return f
}

// count adds n to the count of a's group, when its group is valid.
func (f *fold) count(a fleet.App, n int) {
	if g := a.GroupOf(); routing.ValidateGroup("", g) == nil {
		f.groups[g] += n
		if f.groups[g] == 0 {
			delete(f.groups, g)
		}
	}
}

// patched returns f with the objects at the changed keys as objects now holds them
// (absent: deleted), or nil when a change touches a malformed object (then fold
// everything: buildFold).
func (f *fold) patched(objects map[string]cachedObject, changed []string) *fold {
	for _, k := range changed {
		if f.badKeys[k] || objects[k].bad != "" {
			return nil
		}
	}
	out := *f
	cloned := map[string]bool{}
	for _, k := range slices.Sorted(slices.Values(changed)) {
		o, present := objects[k]
		switch {
		case !strings.HasSuffix(k, ".json"):
			// Never valid (decode refuses it), so never in the lists; nor was it
			// malformed here, or the fold would be made again: nothing to do.
		case strings.HasPrefix(k, fleet.PrefixApps):
			if !cloned["apps"] {
				out.apps, out.groups, cloned["apps"] = slices.Clone(out.apps), maps.Clone(out.groups), true
			}
			i, found := slices.BinarySearchFunc(out.apps, keyName(k), func(a fleet.App, n string) int { return fleet.CompareAsKeys(a.Name, n) })
			if found {
				out.count(out.apps[i], -1)
				out.apps = slices.Delete(out.apps, i, i+1)
			}
			if a, ok := o.value.(fleet.App); present && ok {
				out.apps = slices.Insert(out.apps, i, a)
				out.count(a, 1)
			}
		case strings.HasPrefix(k, fleet.PrefixDomains):
			if !cloned["claims"] {
				out.claims, cloned["claims"] = slices.Clone(out.claims), true
			}
			i, found := slices.BinarySearchFunc(out.claims, keyName(k), func(c fleet.Claim, n string) int { return fleet.CompareAsKeys(c.Host, n) })
			if found {
				out.claims = slices.Delete(out.claims, i, i+1)
			}
			if c, ok := o.value.(fleet.Claim); present && ok {
				out.claims = slices.Insert(out.claims, i, c)
			}
		case strings.HasPrefix(k, fleet.PrefixNodes):
			i, found := slices.BinarySearch(out.nodeKeys, k)
			if found != present {
				if !cloned["nodes"] {
					out.nodeKeys, cloned["nodes"] = slices.Clone(out.nodeKeys), true
				}
				if present {
					out.nodeKeys = slices.Insert(out.nodeKeys, i, k)
				} else {
					out.nodeKeys = slices.Delete(out.nodeKeys, i, i+1)
				}
			}
		}
	}
	return &out
}

// namedGroups are the valid groups applications name.
func (f *fold) namedGroups() map[string]bool {
	named := make(map[string]bool, len(f.groups))
	for g := range f.groups {
		named[g] = true
	}
	return named
}

// namedGroups are the groups known beyond a document's routes: those platform.groups
// maps domains to (opt.DomainGroups), and apps, those applications name (the snapshot
// carries them: publish.Snapshot.KnownGroups). apps is added to.
func namedGroups(opt fleet.Options, apps map[string]bool) map[string]bool {
	if apps == nil {
		apps = make(map[string]bool, len(opt.DomainGroups))
	}
	for _, g := range opt.DomainGroups {
		apps[g] = true
	}
	return apps
}

// AppView is the applications of the last derivation, in key order: found by name
// without a fleet-sized map made every pass.
type AppView []fleet.App

// Get returns the application called name.
func (v AppView) Get(name string) (fleet.App, bool) {
	i, ok := slices.BinarySearchFunc(v, name, func(a fleet.App, n string) int { return fleet.CompareAsKeys(a.Name, n) })
	if !ok {
		return fleet.App{}, false
	}
	return v[i], true
}

// keyName is the name a key "<prefix>/<name>.json" gives its object (decode checks the
// object's own name field is that).
func keyName(key string) string {
	return strings.TrimSuffix(key[strings.IndexByte(key, '/')+1:], ".json")
}

// HealthPath is app's health path from the view, for the incarnation appID ("" when
// none is declared, the application is unknown yet, or the path is invalid: such an
// instance is probed over TCP).
func (v AppView) HealthPath(app, appID string) string {
	a, ok := v.Get(app)
	if !ok || a.Health == nil || a.Health.Path == "" || (appID != "" && a.ID != "" && a.ID != appID) {
		return ""
	}
	if routing.ValidateHealthPath("health.path", a.Health.Path) != nil {
		return ""
	}
	return a.Health.Path
}

// Account is the account of the application called name ("" when there is none).
func (v AppView) Account(name string) string {
	a, _ := v.Get(name)
	return a.Account
}
