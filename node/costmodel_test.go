package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"

	"github.com/prometheus/client_golang/prometheus"
)

// The cost model: what the store protocol costs per node per tick, by fleet size.
//
// It runs the real reconcile pass and the real heartbeat write of n nodes (NewWithStore,
// each with its own request counter: scafo_store_requests_total) in one process, over
// one dir store, on a virtual clock: a 2s tick and a 15s heartbeat (the defaults),
// heartbeats spread evenly over the interval. Two phases: idle (heartbeats only) and a
// steady write rate (one application rewritten per tick, by an admin outside the
// fleet, announced by a bump that names it). "before" replays the protocol of main
// before this change on the same code: every heartbeat bumps the serial without names,
// and so does every write, so every serial change is a full read (3 LISTs and a GET per
// changed etag).
//
// Sizes: 10 and 100 nodes by default (10 under -short); SCAFO_COSTMODEL_NODES=10,100,1000
// runs others (1 000 takes minutes: each LIST of nodes/ reads 1 000 files). "before"
// asserts nothing (it is the table's comparison, docs/fleet.md) and costs most of the
// run (every tick a full read of the fleet by every node): it is replayed only when
// sizes are given, the run that makes the table.
//
// Goals asserted (after): idle, exactly one conditional read per node per tick and no
// GET, heartbeat LISTs at most one per node per heartbeat interval; one changed object
// per tick, at most two requests per node (the serial read and one GET) besides those
// LISTs.
func TestCostModel(t *testing.T) {
	t.Parallel()
	sizes := []int{10, 100}
	if testing.Short() {
		sizes = []int{10}
	}
	protocols := []bool{false} // after
	if v := os.Getenv("SCAFO_COSTMODEL_NODES"); v != "" {
		sizes, protocols = nil, []bool{true, false}
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("SCAFO_COSTMODEL_NODES=%q: want a list of node counts", v)
			}
			sizes = append(sizes, n)
		}
	}
	var rows []costRow
	for _, n := range sizes {
		for _, before := range protocols {
			rows = append(rows, runCostModel(t, n, before)...)
		}
	}
	t.Log("\n" + costTable(rows))
}

const (
	cmTick      = 2 * time.Second
	cmHeartbeat = 15 * time.Second
	cmApps      = 20
	// ticksPerMonth: 30 days of 2s ticks.
	ticksPerMonth = 30 * 24 * 3600 / 2
)

// costRow is one measurement: requests per node per tick, by op.
type costRow struct {
	nodes  int
	before bool
	phase  string
	ticks  int
	perOp  map[string]float64 // per node per tick
	total  map[string]float64 // over the fleet and the phase (whole numbers)
}

var costOps = []string{"get_if_changed", "get", "list", "put", "delete"}

func (r costRow) reads() float64 { return r.perOp["get_if_changed"] + r.perOp["get"] }

// monthly is the fleet's monthly bill for its reconcile and heartbeat requests at AWS
// S3 list prices: GET class $0.0004 per 1 000, LIST $0.005 per 1 000, PUT $0.005 per
// 1 000 (heartbeats; the same before and after).
func (r costRow) monthly() (reads, lists, puts float64) {
	f := float64(r.nodes) * ticksPerMonth / 1000
	return r.reads() * f * 0.0004, r.perOp["list"] * f * 0.005, r.perOp["put"] * f * 0.005
}

func costTable(rows []costRow) string {
	var b strings.Builder
	b.WriteString("| nodes | protocol | phase | per node per tick: conditional GET | GET | LIST | PUT | fleet $/month GET+LIST (PUT) |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		proto := "after"
		if r.before {
			proto = "before"
		}
		g, l, p := r.monthly()
		fmt.Fprintf(&b, "| %d | %s | %s | %.2f | %.2f | %.3f | %.3f | $%s ($%s) |\n", r.nodes, proto, r.phase,
			r.perOp["get_if_changed"], r.perOp["get"], r.perOp["list"], r.perOp["put"], money(g+l), money(p))
	}
	return b.String()
}

func money(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// cmNode is one modelled node.
type cmNode struct {
	srv  *node.Server
	next time.Time // its next heartbeat, on the virtual clock
}

// storeRequests is what srv has asked of its store so far, by op
// (scafo_store_requests_total, its own counter: get, get_if_changed, list, put,
// delete). Not a scrape of the node's registry: its ingress collector reads ingresses/
// (a LIST) whenever its cached view is older than a few seconds of real time, so a
// measurement through Gather counted its own reads, more of them the slower the machine
// ran (TestCostModel failed under -race on a 2-core machine: "0.176 LISTs per node per
// tick").
func storeRequests(srv *node.Server) map[string]float64 {
	out := map[string]float64{}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(srv.Metrics().StoreRequests())
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "scafo_store_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// storeRequestsSince is what srv has asked of its store since before (a storeRequests),
// zero counts left out.
func storeRequestsSince(srv *node.Server, before map[string]float64) map[string]int {
	d := map[string]int{}
	for k, v := range storeRequests(srv) {
		if v -= before[k]; v != 0 {
			d[k] = int(v)
		}
	}
	return d
}

func runCostModel(t *testing.T, n int, before bool) []costRow {
	t.Helper()
	ctx := context.Background()
	storeDir := t.TempDir()
	base, err := dir.New(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	name := func(i int) string { return fmt.Sprintf("node-%04d", i) }

	// The fleet's applications, each placed on two nodes.
	appKey := func(i int) string { return fleet.AppKey(fmt.Sprintf("app-%02d", i)) }
	writeApp := func(i, version int) {
		a := fleet.App{Name: fmt.Sprintf("app-%02d", i), Account: "acme", Placement: []string{name(i % n), name((i + 1) % n)},
			Health: &fleet.Health{Path: fmt.Sprintf("/healthz-%d", version)}}
		putObjectNoBump(t, base, appKey(i), a)
	}
	for i := range cmApps {
		writeApp(i, 0)
	}
	if _, err := store.BumpSerial(ctx, base); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.DiscardHandler)
	nodes := make([]*cmNode, n)
	t0 := time.Now()
	for i := range nodes {
		cfg := testConfig(t, name(i), storeDir)
		cfg.Node.Address = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255+1)
		cfg.Reconcile.Interval = ptypes.Duration(cmTick)
		cfg.Reconcile.Heartbeat = ptypes.Duration(cmHeartbeat)
		// Staleness is not modelled: records carry the real clock, the model runs on a
		// virtual one.
		cfg.Reconcile.NodeTTL = ptypes.Duration(1000 * time.Hour)
		srv, err := node.NewWithStore(cfg, log, base, cfg.Ingress.Token, cfg.Admin.Token)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &cmNode{srv: srv, next: t0.Add(cmHeartbeat * time.Duration(i) / time.Duration(n))}
	}
	// Measuring costs no store request: a node's first scrape finds its ingress view
	// cold and reads ingresses/, so a count through the registry fails here.
	if a, b := storeRequests(nodes[0].srv), storeRequests(nodes[0].srv); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("reading the request counter made store requests: %v, then %v", a, b)
	}
	heartbeat := func(c *cmNode) {
		c.srv.Self().Write(ctx)
		if before {
			// main: every heartbeat bumped the serial, naming nothing.
			if _, err := store.BumpSerial(ctx, c.srv.St()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Start: every node writes its record and reads the store in full.
	for _, c := range nodes {
		heartbeat(c)
	}
	for _, c := range nodes {
		if err := c.srv.Rec().Pass(ctx, t0, true); err != nil {
			t.Fatal(err)
		}
	}
	now := t0
	tick := func(write func()) {
		now = now.Add(cmTick)
		for _, c := range nodes {
			if !c.next.After(now) {
				heartbeat(c)
				c.next = c.next.Add(cmHeartbeat)
			}
		}
		if write != nil {
			write()
		}
		for _, c := range nodes {
			if err := c.srv.Rec().Pass(ctx, now, false); err != nil {
				t.Fatalf("%s: pass: %v", c.srv.Cfg().Node.Name, err)
			}
		}
	}
	// Settle: everyone has read everyone's first record.
	for range 2 {
		tick(nil)
	}

	// Measured phases: 4 heartbeat intervals each after, one before (where every tick
	// is a full read of the fleet: slow, and as steady).
	ticks := 4 * int(cmHeartbeat/cmTick)
	if before {
		ticks = int(cmHeartbeat / cmTick)
	}
	measure := func(phase string, write func()) costRow {
		start := make([]map[string]float64, n)
		for i, c := range nodes {
			start[i] = storeRequests(c.srv)
		}
		for range ticks {
			tick(write)
		}
		row := costRow{nodes: n, before: before, phase: phase, ticks: ticks, perOp: map[string]float64{}, total: map[string]float64{}}
		for i, c := range nodes {
			end := storeRequests(c.srv)
			for _, op := range costOps {
				row.total[op] += end[op] - start[i][op]
			}
		}
		for _, op := range costOps {
			row.perOp[op] = row.total[op] / float64(n*ticks)
		}
		return row
	}
	idle := measure("idle", nil)
	version := 0
	writes := measure("1 write/tick", func() {
		version++
		i := version % cmApps
		writeApp(i, version)
		var err error
		if before {
			_, err = store.BumpSerial(ctx, base)
		} else {
			_, err = store.BumpSerial(ctx, base, appKey(i))
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	rows := []costRow{idle, writes}
	for _, r := range rows {
		t.Logf("%d nodes, %s, %s: per node per tick %v over %d ticks", n, map[bool]string{true: "before", false: "after"}[before], r.phase, r.perOp, r.ticks)
	}
	if before {
		return rows
	}

	// The goals.
	listsMost := (float64(ticks)*float64(cmTick)/float64(cmHeartbeat) + 1) / float64(ticks) // one per heartbeat interval
	heartbeatPuts := float64(cmTick) / float64(cmHeartbeat)
	nt := float64(n * ticks)
	for _, r := range rows {
		if got := r.total["get_if_changed"]; got != nt {
			t.Errorf("%d nodes, %s: %.0f conditional reads in %d node-ticks, want one each", n, r.phase, got, n*ticks)
		}
		if got := r.perOp["list"]; got > listsMost {
			t.Errorf("%d nodes, %s: %.3f LISTs per node per tick, want at most one per heartbeat interval (%.3f)", n, r.phase, got, listsMost)
		}
		if got := r.perOp["put"]; got > heartbeatPuts*1.01+1.0/float64(ticks) {
			t.Errorf("%d nodes, %s: %.3f PUTs per node per tick, want its heartbeats alone (%.3f)", n, r.phase, got, heartbeatPuts)
		}
	}
	if got := idle.total["get"]; got != 0 {
		t.Errorf("%d nodes, idle: %.0f GETs, want none (a heartbeat must not make peers read its record)", n, got)
	}
	if got := writes.total["get_if_changed"] + writes.total["get"]; got > 2*nt {
		t.Errorf("%d nodes, one changed object per tick: %.0f reads in %d node-ticks, want at most 2 each", n, got, n*ticks)
	}
	if got := writes.total["get"]; got != nt {
		t.Errorf("%d nodes, one changed object per tick: %.0f GETs in %d node-ticks, want one each", n, got, n*ticks)
	}
	return rows
}
