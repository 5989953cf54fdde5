package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// deriveResult is what one child reports (JSON on stdout).
type deriveResult struct {
	Apps, Prefixes, Routes int
	Routers, Services      int
	BodyBytes              int
	ColdNs                 int64 // first derive+render in a fresh process
	DeriveNs, RenderNs     int64 // per op, testing.Benchmark
	TotalNs                int64 // derive+render per op
	// EditNs is fleet.Deriver + render.Incremental.Render after one application's
	// instance moved (a new port each op), the node's steady state: best of three runs.
	EditNs int64
	// AppEditNs is the same for a change of the application's own record (its health
	// path): an object of one application, where a node record holds every instance of
	// its node (two thirds of the fleet's with GenerateState's three nodes).
	AppEditNs        int64
	TotalBytesPerOp  int64
	TotalAllocsPerOp int64
	StateRSSKB       int64 // peak RSS after generating the state, before any derive
	OneRSSKB         int64 // peak RSS after one derive+render
	LoopRSSKB        int64 // peak RSS after the benchmark loops
}

func maxRSSKB() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss // KiB on Linux
}

// runChild measures derive+render for SCAFO_BENCH_APPS applications and
// SCAFO_BENCH_PREFIXES prefixes and prints a deriveResult.
func runChild(kind string) int {
	if kind == "serve" {
		return runServeChild()
	}
	if kind != "derive" {
		fmt.Fprintf(os.Stderr, "bench child: unknown kind %q\n", kind)
		return 2
	}
	apps, err1 := strconv.Atoi(os.Getenv("SCAFO_BENCH_APPS"))
	prefixes, err2 := strconv.Atoi(os.Getenv("SCAFO_BENCH_PREFIXES"))
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "bench child: SCAFO_BENCH_APPS and SCAFO_BENCH_PREFIXES must be integers")
		return 2
	}
	st := fleet.GenerateState(apps, prefixes)
	opt := fleet.GenerateOptions()
	runtime.GC()
	res := deriveResult{Apps: apps, Prefixes: prefixes, StateRSSKB: maxRSSKB()}

	start := time.Now()
	doc, _ := fleet.Derive(st, opt)
	body, err := render.Traefik(doc, render.Options{})
	res.ColdNs = time.Since(start).Nanoseconds()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child: render: %v\n", err)
		return 1
	}
	res.OneRSSKB = maxRSSKB()
	res.Routes, res.BodyBytes = len(doc.Routes), len(body)
	var cfg struct {
		HTTP struct {
			Routers  map[string]json.RawMessage `json:"routers"`
			Services map[string]json.RawMessage `json:"services"`
		} `json:"http"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bench child: decoding the render: %v\n", err)
		return 1
	}
	res.Routers, res.Services = len(cfg.HTTP.Routers), len(cfg.HTTP.Services)
	cfg.HTTP.Routers, cfg.HTTP.Services, body = nil, nil, nil

	res.DeriveNs = testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			fleet.Derive(st, opt)
		}
	}).NsPerOp()
	res.RenderNs = testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			if _, err := render.Traefik(doc, render.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	}).NsPerOp()
	// The end-to-end figure is the best of three benchmark runs: the machine is shared,
	// and a neighbour's burst only ever adds time.
	for range 3 {
		total := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				d, _ := fleet.Derive(st, opt)
				if _, err := render.Traefik(d, render.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		if res.TotalNs == 0 || total.NsPerOp() < res.TotalNs {
			res.TotalNs, res.TotalBytesPerOp, res.TotalAllocsPerOp = total.NsPerOp(), total.AllocedBytesPerOp(), total.AllocsPerOp()
		}
	}
	// The node's path: fleet.Deriver patches the last document for the record the store
	// read names, render.Incremental.Render re-renders the changed application and
	// splices it into the last body. One application's port moves per op; the new node
	// record (a new value, as a store read makes it) is made with the timer stopped.
	var x fleet.Deriver
	inc, err := render.NewIncremental(render.Options{})
	if err == nil {
		d0, _, _ := x.Derive(st, opt, nil)
		_, err = inc.Render(render.Request{Doc: d0})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child: incremental render: %v\n", err)
		return 1
	}
	if len(st.Apps) > 4 {
		app, n := st.Apps[4].Name, 0 // app 4 runs on vps-b and vps-c
		for range 3 {
			edit := testing.Benchmark(func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					n++
					st.Nodes = slices.Clone(st.Nodes)
					rec := &st.Nodes[1]
					was := rec.Instances
					rec.Instances = make(map[string]fleet.Instance, len(was))
					for k, v := range was {
						rec.Instances[k] = v
					}
					rec.Instances[app] = fleet.Instance{Port: 1 + n%60000, Ready: true}
					b.StartTimer()
					d, _, delta := x.Derive(st, opt, []string{fleet.NodeKey(rec.Name)})
					if _, err := inc.Render(render.Request{Doc: d, Delta: delta}); err != nil {
						b.Fatal(err)
					}
				}
			})
			if res.EditNs == 0 || edit.NsPerOp() < res.EditNs {
				res.EditNs = edit.NsPerOp()
			}
			// The application's own record moves (its health path, back and forth).
			appEdit := testing.Benchmark(func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					n++
					st.Apps = slices.Clone(st.Apps)
					st.Apps[4].Health = &fleet.Health{Path: "/h" + strconv.Itoa(n%2)}
					b.StartTimer()
					d, _, delta := x.Derive(st, opt, []string{fleet.AppKey(app)})
					if _, err := inc.Render(render.Request{Doc: d, Delta: delta}); err != nil {
						b.Fatal(err)
					}
				}
			})
			if res.AppEditNs == 0 || appEdit.NsPerOp() < res.AppEditNs {
				res.AppEditNs = appEdit.NsPerOp()
			}
		}
	}
	res.LoopRSSKB = maxRSSKB()
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// measureDerive runs one child and returns its report and its max RSS as the kernel
// accounted it (getrusage of the child, which must agree with the child's own).
func measureDerive(t *task, apps, prefixes int) (deriveResult, int64) {
	cmd := exec.Command(self())
	cmd.Env = append(os.Environ(), childEnv+"=derive",
		"SCAFO_BENCH_APPS="+itoa(apps), "SCAFO_BENCH_PREFIXES="+itoa(prefixes))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("derive child (apps=%d prefixes=%d): %v\n%s", apps, prefixes, err, stderr.String())
	}
	var res deriveResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("derive child: decoding %q: %v", stdout.String(), err)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var kernel int64
	if ru != nil {
		kernel = ru.Maxrss
	}
	return res, kernel
}

func mb(kb int64) string { return strconv.FormatFloat(float64(kb)/1024, 'f', 1, 64) }

func msNs(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 1, 64) }

// deriveAndRenderGrowLinearly measures derive+render at 1k, 10k and 100k routes,
// without and with 10k prefixes on one host, each size in its own process.
func deriveAndRenderGrowLinearly(t *task) {
	type size struct{ routes, prefixes int }
	sizes := []size{{1000, 0}, {10000, 0}, {100000, 0}, {1000, 10000}, {10000, 10000}, {100000, 10000}}
	rows := []string{
		"| routes | prefixes on ti.to | routers / services | derive ms | render ms | derive+render ms (best of 3) | µs per route | one instance moved: derive + delta render ms (µs per route) | one app record changed: ms (µs per route) | B/op (derive+render) | allocs/op | body MB | peak RSS: state only / after one pass / after the loops (MB) | first pass ms (cold) |",
		"|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
	}
	perRoute := map[size]float64{}
	perRouteEdit := map[size]float64{}
	perRouteApp := map[size]float64{}
	var goalRes deriveResult
	for _, s := range sizes {
		res, kernelKB := measureDerive(t, appsForRoutes(s.routes), s.prefixes)
		if kernelKB != 0 && kernelKB < res.LoopRSSKB {
			t.Errorf("child max RSS per getrusage(RUSAGE_CHILDREN) %d KiB < the child's own %d KiB", kernelKB, res.LoopRSSKB)
		}
		perRoute[s] = float64(res.TotalNs) / float64(res.Routes)
		perRouteEdit[s] = float64(res.EditNs) / float64(res.Routes)
		perRouteApp[s] = float64(res.AppEditNs) / float64(res.Routes)
		rows = append(rows, fmt.Sprintf("| %d | %d | %d / %d | %s | %s | %s | %.2f | %s (%.3f) | %s (%.3f) | %s | %d | %s | %s / %s / %s | %s |",
			res.Routes, res.Prefixes, res.Routers, res.Services, msNs(res.DeriveNs), msNs(res.RenderNs), msNs(res.TotalNs),
			perRoute[s]/1e3, msNs(res.EditNs), perRouteEdit[s]/1e3, msNs(res.AppEditNs), perRouteApp[s]/1e3, mb(res.TotalBytesPerOp/1024), res.TotalAllocsPerOp, mb(int64(res.BodyBytes)/1024),
			mb(res.StateRSSKB), mb(res.OneRSSKB), mb(max(res.LoopRSSKB, kernelKB)), msNs(res.ColdNs)))
		t.Logf("routes=%d prefixes=%d: derive %s ms, render %s ms, total %s ms, %s MB/op, peak RSS %s MB",
			res.Routes, s.prefixes, msNs(res.DeriveNs), msNs(res.RenderNs), msNs(res.TotalNs), mb(res.TotalBytesPerOp/1024), mb(res.LoopRSSKB))
		if s == (size{10000, 10000}) {
			goalRes = res
		}
	}
	growth0 := perRoute[size{100000, 0}] / perRoute[size{1000, 0}]
	growthP := perRoute[size{100000, 10000}] / perRoute[size{10000, 10000}]
	rows = append(rows, "",
		fmt.Sprintf("Growth: the cost per route at 100k routes is %.2f× the cost per route at 1k (no prefixes), "+
			"and %.2f× the cost at 10k with 10k prefixes; 1.0× is exactly linear. "+
			"Each size ran in its own process (the report program re-executed); peak RSS is that process's "+
			"getrusage max RSS, including the generated fleet state it folds (the node holds that state too). "+
			"\"After the loops\" is the steady state of repeated folds under the default GOGC.", growth0, growthP),
		"",
		"Applications are fleet.GenerateState: ~1.12 routes per application, two upstreams each "+
			"(a failover chain), every other one with a health path; prefixes target 1 % of the applications (their account's).")
	report.add(secDerive, rows...)
	okTime := goalRes.TotalNs < (50 * time.Millisecond).Nanoseconds()
	okRSS := goalRes.LoopRSSKB < 150*1024
	report.goal("derive+render, 10k routes + 10k prefixes", "< 50 ms", msNs(goalRes.TotalNs)+" ms", okTime,
		fmt.Sprintf("%d routes; derive %s ms + render %s ms", goalRes.Routes, msNs(goalRes.DeriveNs), msNs(goalRes.RenderNs)))
	report.goal("peak RSS, 10k routes + 10k prefixes", "< 150 MB", mb(goalRes.LoopRSSKB)+" MB", okRSS,
		"process doing repeated derive+render, fleet state included; one pass: "+mb(goalRes.OneRSSKB)+" MB")
	growthEdit := perRouteEdit[size{100000, 0}] / perRouteEdit[size{1000, 0}]
	report.goal("derive + incremental render, one application changed, 10k routes + 10k prefixes", "< 50 ms",
		msNs(goalRes.EditNs)+" ms", goalRes.EditNs < (50*time.Millisecond).Nanoseconds(),
		"the node's steady state: fleet.Deriver patches the document, render.Incremental.Render splices one application")
	report.goal("derive + incremental render grows linearly", "per-route cost at 100k within 1.3× of 1k",
		fmt.Sprintf("%.2f×", growthEdit), growthEdit <= 1.3,
		"one instance moved per pass, no prefixes: its node record holds 2/3 of the fleet's instances, which the Deriver compares")
	growthApp := perRouteApp[size{100000, 0}] / perRouteApp[size{1000, 0}]
	report.goal("same, one application record changed", "per-route cost at 100k within 1.3× of 1k",
		fmt.Sprintf("%.2f×", growthApp), growthApp <= 1.3, "its health path moved per pass, no prefixes")
	report.goal("derive+render grows linearly", "per-route cost flat (sorting allows log n: < 2× over 100× size)",
		fmt.Sprintf("per-route cost at 100k ÷ at 1k: %.2f×", growth0), growth0 < 2, "")
}
