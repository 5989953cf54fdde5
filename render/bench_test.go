package render

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// generatedDoc derives fleet.GenerateState: about 1.12 routes per application, 10k
// prefixes on ti.to spread round-robin over nApps/100 target hosts.
func generatedDoc(tb testing.TB, nApps, nPrefixes int) *routing.Document {
	tb.Helper()
	doc, _ := fleet.Derive(fleet.GenerateState(nApps, nPrefixes), fleet.GenerateOptions())
	if doc == nil || len(doc.Routes) == 0 {
		tb.Fatal("fleet.Derive produced no routes")
	}
	return doc
}

// scaleFleet is a generated fleet (fleet.GenerateFleet) on nodes nodes of about routes
// routes (~1.12 routes per application) carrying about as many prefixes: up to
// routing.MaxPaths on ti.to (GenerateState's map), the rest spread, MaxPaths per host,
// over the custom hosts of acct-000's applications ("app-NNN00.example.org"), each
// targeting that account's platform hosts round-robin.
func scaleFleet(routes, nodes int) fleet.State {
	apps := routes * 100 / 112
	st := fleet.GenerateFleet(apps, min(routes, routing.MaxPaths), nodes)
	left := routes - routing.MaxPaths
	var targets []string
	for i := 0; i < apps; i += 100 {
		targets = append(targets, fmt.Sprintf("app-%05d.apps.example.com", i))
	}
	for i := range st.Claims {
		c := &st.Claims[i]
		if left <= 0 {
			break
		}
		if c.Account != "acct-000" || c.Host == "ti.to" || c.Paths != nil || c.Host[0] == '*' {
			continue
		}
		n := min(left, routing.MaxPaths)
		c.Paths = make(map[string]string, n)
		for k := range n {
			c.Paths[fmt.Sprintf("q%05d", k)] = targets[(k+i)%len(targets)]
		}
		left -= n
	}
	return st
}

// BenchmarkDeriveRender is what a node does when the store changes: derive the fleet
// state into a document and render it for Traefik, at 1k, 10k and 100k routes with as
// many prefixes. ns/route is the figure to compare across sizes (linear: flat).
func BenchmarkDeriveRender(b *testing.B) {
	for _, routes := range []int{1000, 10000, 100000} {
		st := scaleFleet(routes, 3)
		opt := fleet.GenerateOptions()
		d, _ := fleet.Derive(st, opt)
		d0 := d
		nPaths := 0
		for _, r := range d.Routes {
			nPaths += len(r.Paths)
		}
		b.Run(fmt.Sprintf("routes=%d/prefixes=%d/full", len(d.Routes), nPaths), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, _ := fleet.Derive(st, opt)
				if _, err := Traefik(d, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(d.Routes)), "ns/route")
		})
		b.Run(fmt.Sprintf("routes=%d/prefixes=%d/fragments-cold", len(d.Routes), nPaths), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				inc := mustIncremental(b, Options{})
				d, _ := fleet.Derive(st, opt)
				if _, err := rendered(inc, Request{Doc: d}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(d.Routes)), "ns/route")
		})
		b.Run(fmt.Sprintf("routes=%d/prefixes=%d/fragments-one-app-edit", len(d.Routes), nPaths), func(b *testing.B) {
			// Every pass moves one application's port to a value not seen before, so its
			// fragment is rendered again and every other one is reused.
			inc := mustIncremental(b, Options{})
			body, err := rendered(inc, Request{Doc: d})
			if err != nil {
				b.Fatal(err)
			}
			edited := &st.Nodes[1]
			app := st.Apps[4].Name // placed on vps-b and vps-c
			orig := edited.Instances[app]
			defer func() { edited.Instances[app] = orig }()
			b.ReportAllocs()
			n := 0
			var deriving, rendering time.Duration
			for b.Loop() {
				n++
				edited.Instances[app] = fleet.Instance{Port: 1 + n%60000, Ready: true}
				t0 := time.Now()
				d, _ := fleet.Derive(st, opt)
				t1 := time.Now()
				if _, err := rendered(inc, Request{Doc: d}); err != nil {
					b.Fatal(err)
				}
				deriving, rendering = deriving+t1.Sub(t0), rendering+time.Since(t1)
			}
			perRoute := func(d time.Duration) float64 {
				return float64(d.Nanoseconds()) / float64(b.N) / float64(len(d0.Routes))
			}
			b.ReportMetric(perRoute(b.Elapsed()), "ns/route")
			b.ReportMetric(perRoute(deriving), "derive-ns/route")
			b.ReportMetric(perRoute(rendering), "render-ns/route")
			// The output per route is not constant across sizes (at 100k the prefixes
			// are spread thin enough to get one router each): per output byte is the
			// other measure of linearity.
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(body)/1024), "ns/KiB")
		})
		// What the node does since the Deriver: the change names the object it moved,
		// Deriver.Derive patches the last document, Render splices the changed
		// application's entries into the last body's chunks. The timed part is that
		// alone (ns/route); making the changed object (a new value, as a store read
		// makes it) is not timed. join-ns/route is what one copy of the body in one
		// piece costs on top (the node's gzip and hash read the whole body anyway).
		deltaBench := func(b *testing.B, st fleet.State, edit func(st *fleet.State, n int) []string) {
			st.Apps, st.Nodes = slices.Clone(st.Apps), slices.Clone(st.Nodes)
			var x fleet.Deriver
			inc := mustIncremental(b, Options{})
			doc, _, _ := x.Derive(st, opt, nil)
			if _, err := inc.Render(Request{Doc: doc}); err != nil {
				b.Fatal(err)
			}
			var deriving, rendering, joining time.Duration
			n, patched := 0, 0
			for b.Loop() {
				n++
				changed := edit(&st, n)
				t0 := time.Now()
				doc, _, delta := x.Derive(st, opt, changed)
				t1 := time.Now()
				body, err := inc.Render(Request{Doc: doc, Delta: delta})
				if err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				_ = body.Bytes()
				deriving, rendering, joining = deriving+t1.Sub(t0), rendering+t2.Sub(t1), joining+time.Since(t2)
				if delta != nil && len(body) > 1 {
					patched++
				}
			}
			if patched != n {
				b.Fatalf("%d of %d changes were patched: not the path measured", patched, n)
			}
			perRoute := func(d time.Duration) float64 {
				return float64(d.Nanoseconds()) / float64(b.N) / float64(len(d0.Routes))
			}
			b.ReportMetric(perRoute(deriving+rendering), "ns/route")
			b.ReportMetric(perRoute(deriving), "derive-ns/route")
			b.ReportMetric(perRoute(rendering), "render-ns/route")
			b.ReportMetric(perRoute(joining), "join-ns/route")
		}
		app := st.Apps[4].Name
		instanceEdit := func(st *fleet.State, n int) []string {
			st.Nodes = slices.Clone(st.Nodes)
			placed := st.Apps[4].Placement[0]
			rec := &st.Nodes[slices.IndexFunc(st.Nodes, func(r fleet.NodeRecord) bool { return r.Name == placed })]
			// A map of its own, as decoding the record makes one (maps.Clone would
			// keep the old map's layout, and the Deriver's comparison would walk
			// both in step).
			was := rec.Instances
			rec.Instances = make(map[string]fleet.Instance, len(was))
			for k, v := range was {
				rec.Instances[k] = v
			}
			rec.Instances[app] = fleet.Instance{Port: 1 + n%60000, Ready: true}
			return []string{fleet.NodeKey(rec.Name)}
		}
		b.Run(fmt.Sprintf("routes=%d/prefixes=%d/delta-instance-edit", len(d.Routes), nPaths), func(b *testing.B) {
			// The instance's port moves: its node record is a new value (every instance
			// of the node copied, untimed), whose instances the Deriver compares. The
			// fleet has three nodes: a record holds two thirds of the fleet's instances.
			deltaBench(b, st, instanceEdit)
		})
		b.Run(fmt.Sprintf("routes=%d/prefixes=%d/delta-instance-edit-667-per-node", len(d.Routes), nPaths), func(b *testing.B) {
			// The same on a fleet that grows by nodes: about 667 instances a node at
			// every size (3 nodes at 1k routes, 300 at 100k).
			deltaBench(b, scaleFleet(routes, max(3, routes*2*100/112/667)), instanceEdit)
		})
		b.Run(fmt.Sprintf("routes=%d/prefixes=%d/delta-app-edit", len(d.Routes), nPaths), func(b *testing.B) {
			// The application's record moves its health path, back and forth.
			i := slices.IndexFunc(st.Apps, func(a fleet.App) bool { return a.Name == app })
			deltaBench(b, st, func(st *fleet.State, n int) []string {
				st.Apps = slices.Clone(st.Apps) // untimed: a new value, as a store read makes it
				st.Apps[i].Health = &fleet.Health{Path: fmt.Sprintf("/h%d", n%2)}
				return []string{fleet.AppKey(app)}
			})
		})
	}
}
