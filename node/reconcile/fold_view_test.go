package reconcile

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// TestKeptFoldDerivesAsAFreshReconcilerAndKnowsTheSameApps drives one Reconciler's
// derive through random one-step changes of its cached objects (applications deleted
// and recreated with a new incarnation, moved between groups, malformed objects coming
// and going, unreadable claims, node records, names that sort oddly: "app", "app-2",
// "app.x", "app0"), and after every pass holds its kept fold to buildFold of every
// object, entry for entry (a fold patched wrong would derive from a state the store
// does not hold), and itself to a Reconciler that folds every object from nothing: the same published revision, the same skipped report, the same
// stale key; and its application view (AppView) answers every name, present or not
// (prefixes and extensions of present names among them), as the map of the old code
// did: sweepOrphans' "no view yet" is nil only before the first derivation, an empty
// fleet is a view of no application, and HealthPath and Account (pathWarnings')
// lookup never find another application.
func TestKeptFoldDerivesAsAFreshReconcilerAndKnowsTheSameApps(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 4))
	opt := fleet.Options{PlatformDomains: []string{"apps.example.com"}, NodeTTL: 10 * time.Minute}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	newRec := func() *Reconciler {
		return &Reconciler{pub: publish.New(render.Options{}, "", nil), log: slog.New(slog.DiscardHandler),
			opts: func() fleet.Options { return opt }, objects: map[string]cachedObject{}}
	}
	rec := newRec()
	if rec.KnownApps() != nil {
		t.Fatal("a Reconciler that never derived has a view of the applications")
	}
	names := []string{"app", "app-2", "app.x", "app0", "ap", "b", "b-", "z.z"}
	probe := append(slices.Clone(names), "", "a", "app-", "app.", "app-2x", "apps", "zz", "app.x.json", "app/x")
	nodes := []string{"vps-a", "vps-b"}
	hosts := []string{"ti.to", "a.ti.to", "*.ti.to"}
	incarnation := 0
	idOf := func(name string) string { // the incarnation the node runs (usually the current one)
		a, _ := rec.objects[fleet.AppKey(name)].value.(fleet.App)
		if r.IntN(10) == 0 {
			return "id-old"
		}
		return a.ID
	}
	write := func() string {
		incarnation++
		switch r.IntN(10) {
		case 0, 1, 2, 3:
			n := names[r.IntN(len(names))]
			k := fleet.AppKey(n)
			switch r.IntN(12) {
			case 0, 1:
				delete(rec.objects, k)
			case 2:
				rec.objects[k] = cachedObject{bad: "malformed JSON"}
			default:
				a := fleet.App{Name: n, Account: "acme", Placement: slices.Clone(nodes)}
				if was, ok := rec.objects[k].value.(fleet.App); ok {
					a.ID = was.ID
				}
				if r.IntN(6) == 0 {
					a.ID = fmt.Sprintf("id-%d", incarnation) // deleted and recreated: another incarnation
				}
				if r.IntN(2) == 0 {
					slices.Reverse(a.Placement)
				}
				if r.IntN(2) == 0 {
					a.Health = &fleet.Health{Path: fmt.Sprintf("/h%d", r.IntN(3))}
				}
				if r.IntN(8) == 0 {
					a.Account = "evil" // another account's application of the same name
				}
				if strings.Contains(n, "-") != (r.IntN(8) == 0) {
					a.Ingress = &fleet.Ingress{Group: "eu-1"}
				}
				if r.IntN(10) == 0 { // another group, or one no ingress can name (not counted)
					a.Ingress = &fleet.Ingress{Group: []string{"us", "Bad Group"}[r.IntN(2)]}
				}
				rec.objects[k] = cachedObject{etag: fmt.Sprint(incarnation), value: a}
			}
			return k
		case 4:
			h := hosts[r.IntN(len(hosts))]
			k := fleet.ClaimKey(h)
			switch r.IntN(5) {
			case 0:
				delete(rec.objects, k)
			case 1:
				rec.objects[k] = cachedObject{bad: "unreadable"}
			default:
				rec.objects[k] = cachedObject{etag: fmt.Sprint(incarnation), value: fleet.Claim{Host: h, Account: "acme", App: names[r.IntN(len(names))]}}
			}
			return k
		default:
			n := nodes[r.IntN(len(nodes))]
			k := fleet.NodeKey(n)
			switch r.IntN(16) {
			case 0:
				delete(rec.objects, k)
			case 1:
				rec.objects[k] = cachedObject{bad: "malformed JSON"}
			default:
				// One instance moves (or the record is written whole, from nothing).
				was, ok := rec.objects[k].value.(fleet.NodeRecord)
				ins := maps.Clone(was.Instances)
				if !ok || r.IntN(6) == 0 {
					ins = map[string]fleet.Instance{}
					for _, a := range names {
						if r.IntN(10) != 0 {
							ins[a] = fleet.Instance{Port: 20000 + r.IntN(100), Ready: true}
						}
					}
				} else {
					a := names[r.IntN(len(names))]
					ins[a] = fleet.Instance{Port: 20000 + r.IntN(100), Ready: r.IntN(8) != 0, AppID: idOf(a)}
				}
				seen := now
				if r.IntN(12) == 0 {
					seen = now.Add(-time.Duration(r.IntN(120)) * time.Second)
				}
				rec.objects[k] = cachedObject{etag: fmt.Sprint(incarnation), value: fleet.NodeRecord{Name: n, Address: fmt.Sprintf("10.0.0.%d", 1+strings.Index("ab", n[4:])), APIPort: 7400, Seen: seen, Instances: ins}}
			}
			return k
		}
	}
	for range 12 {
		write()
	}
	rec.derive(now, nil)
	foldPatched, docPatched, routed := 0, 0, 0
	for step := range 600 {
		now = now.Add(7 * time.Second)
		var changed []string
		switch {
		case step == 300 || step == 301:
			// Every application deleted (one step each): the view is of none, not
			// "no view", so that sweepOrphans releases what is left.
			changed = []string{}
			for _, n := range names {
				if _, ok := rec.objects[fleet.AppKey(n)]; ok {
					delete(rec.objects, fleet.AppKey(n))
					changed = append(changed, fleet.AppKey(n))
				}
			}
			if step == 301 {
				changed = nil
			}
		case r.IntN(10) == 0:
			changed = nil // a full read
			write()
		case r.IntN(9) == 0:
			changed = []string{} // only time moved
		default:
			for range 1 + r.IntN(2) {
				changed = append(changed, write())
			}
		}
		was := rec.fold
		rec.derive(now, changed)
		if got, want := normFold(rec.fold), normFold(buildFold(rec.objects)); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (changed %v): the kept fold\n%+v\nis not the fold of every object\n%+v", step, changed, got, want)
		}
		if changed != nil && was != nil && was.patched(rec.objects, changed) != nil {
			foldPatched++
		}
		if s := rec.pub.Current(); s.Patched() {
			docPatched++
		}
		if len(rec.pub.Current().Doc().Routes) > 0 {
			routed++
		}

		fresh := newRec()
		fresh.objects = maps.Clone(rec.objects)
		fresh.derive(now, nil)
		at := fmt.Sprintf("step %d (changed %v)", step, changed)
		if got, want := rec.pub.Current().Doc().Revision, fresh.pub.Current().Doc().Revision; got != want {
			t.Fatalf("%s: the kept fold published %s, a fold of everything %s", at, got, want)
		}
		if got, want := skippedKey(rec.status.Skipped), skippedKey(fresh.status.Skipped); got != want {
			t.Fatalf("%s: skipped %q, a fold of everything %q", at, got, want)
		}
		if got, want := rec.staleKey(now), staleKeyOfEverything(rec, now); got != want {
			t.Fatalf("%s: stale key %q, of every cached node record %q", at, got, want)
		}
		// The old view: every valid application by name.
		old := map[string]fleet.App{}
		for _, o := range rec.objects {
			if a, ok := o.value.(fleet.App); ok && o.bad == "" {
				old[a.Name] = a
			}
		}
		view := rec.KnownApps()
		if view == nil {
			t.Fatalf("%s: no view after a derivation (sweepOrphans would release nothing)", at)
		}
		if len(view) != len(old) {
			t.Fatalf("%s: the view holds %d applications, the store %d", at, len(view), len(old))
		}
		for _, n := range probe {
			got, ok := view.Get(n)
			want, wok := old[n]
			if ok != wok || got.Name != want.Name || got.ID != want.ID || got.Account != want.Account {
				t.Fatalf("%s: get(%q) = %+v %v, the map gives %+v %v", at, n, got, ok, want, wok)
			}
			if view.Account(n) != want.Account {
				t.Fatalf("%s: Account(%q) = %q, want %q", at, n, view.Account(n), want.Account)
			}
			for _, id := range []string{"", want.ID, "id-other"} {
				if g, w := view.HealthPath(n, id), oldAppHealthPath(old, n, id); g != w {
					t.Fatalf("%s: HealthPath(%q, %q) = %q, the map gives %q", at, n, id, g, w)
				}
			}
		}
	}
	t.Logf("last report: %v", rec.status.Skipped)
	t.Logf("of 600 passes: %d folds patched, %d documents patched, %d with routes", foldPatched, docPatched, routed)
	if foldPatched < 200 || docPatched < 20 || routed < 300 {
		t.Fatalf("the test does not exercise the kept fold (%d patched folds, %d patched documents, %d routed)", foldPatched, docPatched, routed)
	}
}

// staleKeyOfEverything is staleKey as it was before the fold: every cached node key.
func staleKeyOfEverything(r *Reconciler, now time.Time) string {
	var keys []string
	for k := range r.objects {
		if strings.HasPrefix(k, fleet.PrefixNodes) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if n, ok := r.objects[k].value.(fleet.NodeRecord); ok && now.Sub(r.seen(k, n)) > r.opts().NodeTTL {
			b.WriteString(k)
			b.WriteByte(',')
		}
	}
	return b.String()
}

// oldAppHealthPath is AppView.HealthPath over the map the Reconciler kept before AppView.
func oldAppHealthPath(apps map[string]fleet.App, app, appID string) string {
	a, ok := apps[app]
	if !ok {
		return ""
	}
	return AppView{a}.HealthPath(a.Name, appID)
}

// normFold is f with empty lists as nil (an emptied list and a never-filled one are
// the same fold).
func normFold(f *fold) fold {
	out := *f
	if len(out.apps) == 0 {
		out.apps = nil
	}
	if len(out.claims) == 0 {
		out.claims = nil
	}
	if len(out.nodeKeys) == 0 {
		out.nodeKeys = nil
	}
	return out
}
