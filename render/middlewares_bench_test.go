package render

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scafo/ingress/render/fleet"
)

// BenchmarkOneApplicationChangeWithMiddlewares is a one-application change at 10 000
// applications on 100 nodes (node records of constant size): an instance's port, or
// the application's record (its health path), each a fleet.Deriver delta and the
// incremental render's patch, with no application listing middlewares and with every
// one listing two: the change's cost must not grow with them (docs/performance.md).
// derive-ns and render-ns split it. The "list" case changes one application's
// middlewares instead: the Deriver derives the whole state and the render renders the
// output from its cached fragments (a path router of another application may select
// it), so it costs a whole pass, not a delta.
func BenchmarkOneApplicationChangeWithMiddlewares(b *testing.B) {
	two := []string{"auth@file", "www-redirect@file"}
	for _, c := range []struct {
		name   string
		mw     []string
		change string // instance, record, list
	}{
		{"none/instance", nil, "instance"},
		{"every-app-two/instance", two, "instance"},
		{"none/record", nil, "record"},
		{"every-app-two/record", two, "record"},
		{"every-app-two/list", two, "list"},
	} {
		b.Run(c.name, func(b *testing.B) {
			st, fopt := fleet.GenerateFleet(10000, 0, 100), fleet.GenerateOptions()
			for i := range st.Apps {
				st.Apps[i].Middlewares = c.mw
			}
			inc, err := NewIncremental(Options{})
			if err != nil {
				b.Fatal(err)
			}
			var x fleet.Deriver
			doc, _, d := x.Derive(st, fopt, nil)
			if _, err := inc.Render(Request{Doc: doc, Delta: d}); err != nil {
				b.Fatal(err)
			}
			var changed []string
			var derive, render time.Duration
			deltas := 0
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				n++
				i := (n * 7919) % 10000
				switch c.change {
				case "list":
					st.Apps = slices.Clone(st.Apps)
					a := &st.Apps[i]
					a.Middlewares = [][]string{{"auth@file"}, {"www-redirect@file", "auth@file"}}[n%2]
					changed = []string{fleet.AppKey(a.Name)}
				case "record":
					st.Apps = slices.Clone(st.Apps)
					a := &st.Apps[i]
					a.Health = &fleet.Health{Path: fmt.Sprintf("/h%d", n)}
					changed = []string{fleet.AppKey(a.Name)}
				default:
					st.Nodes = slices.Clone(st.Nodes)
					node := &st.Nodes[i%100] // the application's first placement
					node.Instances = maps.Clone(node.Instances)
					name := fmt.Sprintf("app-%05d", i)
					in := node.Instances[name]
					in.Port = 1 + (in.Port+n)%60000
					node.Instances[name] = in
					changed = []string{fleet.NodeKey(node.Name)}
				}
				t0 := time.Now()
				doc, _, d := x.Derive(st, fopt, changed)
				t1 := time.Now()
				if _, err := inc.Render(Request{Doc: doc, Delta: d}); err != nil {
					b.Fatal(err)
				}
				derive += t1.Sub(t0)
				render += time.Since(t1)
				if d != nil {
					deltas++
				}
			}
			b.ReportMetric(float64(deltas)/float64(b.N), "deltas/op")
			b.ReportMetric(float64(derive.Nanoseconds())/float64(b.N), "derive-ns")
			b.ReportMetric(float64(render.Nanoseconds())/float64(b.N), "render-ns")
		})
	}
}

// BenchmarkOneApplicationChangeAlternated is BenchmarkOneApplicationChangeWithMiddlewares'
// instance change for the fleet without middlewares and the fleet with two on every
// application, alternated within each iteration, so that a busy machine's load weighs
// on both alike: none-ns and mw-ns are derive + render of one change each (wall time),
// none-cpu-ns and mw-cpu-ns the same as the CPU time of the thread that ran them (what
// a loaded machine's waiting does not inflate; the GC's other threads not counted), and
// none-render-ns and mw-render-ns the render's part (wall time).
func BenchmarkOneApplicationChangeAlternated(b *testing.B) {
	type fleetRun struct {
		st            fleet.State
		inc           *Incremental
		x             fleet.Deriver
		total, render time.Duration
		cpu           time.Duration // this thread's CPU time for derive + render
	}
	fopt := fleet.GenerateOptions()
	runs := make([]*fleetRun, 2)
	for k, mw := range [][]string{nil, {"auth@file", "www-redirect@file"}} {
		r := &fleetRun{st: fleet.GenerateFleet(10000, 0, 100)}
		for i := range r.st.Apps {
			r.st.Apps[i].Middlewares = mw
		}
		var err error
		if r.inc, err = NewIncremental(Options{}); err != nil {
			b.Fatal(err)
		}
		doc, _, d := r.x.Derive(r.st, fopt, nil)
		if _, err := r.inc.Render(Request{Doc: doc, Delta: d}); err != nil {
			b.Fatal(err)
		}
		runs[k] = r
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		i := (n * 7919) % 10000
		for _, r := range runs {
			r.st.Nodes = slices.Clone(r.st.Nodes)
			node := &r.st.Nodes[i%100]
			node.Instances = maps.Clone(node.Instances)
			name := fmt.Sprintf("app-%05d", i)
			in := node.Instances[name]
			in.Port = 1 + (in.Port+n)%60000
			node.Instances[name] = in
			runtime.LockOSThread()
			c0 := threadCPU()
			t0 := time.Now()
			doc, _, d := r.x.Derive(r.st, fopt, []string{fleet.NodeKey(node.Name)})
			t1 := time.Now()
			if d == nil {
				b.Fatal("no delta: the change was derived in full")
			}
			if _, err := r.inc.Render(Request{Doc: doc, Delta: d}); err != nil {
				b.Fatal(err)
			}
			r.total += time.Since(t0)
			r.render += time.Since(t1)
			r.cpu += threadCPU() - c0
			runtime.UnlockOSThread()
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(runs[0].total), "none-ns")
	b.ReportMetric(per(runs[1].total), "mw-ns")
	b.ReportMetric(per(runs[0].cpu), "none-cpu-ns")
	b.ReportMetric(per(runs[1].cpu), "mw-cpu-ns")
	b.ReportMetric(per(runs[0].render), "none-render-ns")
	b.ReportMetric(per(runs[1].render), "mw-render-ns")
}

// threadCPU is the calling thread's CPU time (user and system).
func threadCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
