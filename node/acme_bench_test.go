package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// BenchmarkIssueNames issues certificates for N platform hosts (plus the API apex)
// through one node against real Pebble (validation on; every name resolves to the
// node's own listener, which answers the challenges): the time until every name is
// valid, and the node's store requests per name (scafo_store_requests_total, every
// operation, reconcile and heartbeat included). Run with -benchtime=1x; each iteration
// is a fresh node, store and Pebble. CertMagic's own limiter (10 orders per 10 s per
// account, certmagic.RateLimitEvents) bounds the rate.
func BenchmarkIssueNames(b *testing.B) {
	sizes := []int{10, 100}
	if v := os.Getenv("SCAFO_BENCH_ISSUE_NAMES"); v != "" { // e.g. 1000: ~17 min (CertMagic paces orders, 10 per 10 s)
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("SCAFO_BENCH_ISSUE_NAMES=%q: a comma-separated list of positive counts", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("names=%d", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				p := pebbletest.Start(b, pebbletest.Config{HTTPPort: ln.Addr().(*net.TCPAddr).Port})
				storeDir := b.TempDir()
				cfg := node.NewConfig()
				cfg.StateDir = b.TempDir()
				cfg.Node.Name = "vps-a"
				cfg.Ingress.Token, cfg.Admin.Token = testIngressToken, testAdminToken
				cfg.Platform.Domains = []string{"apps.example.com"}
				cfg.Listen = ln.Addr().String()
				cfg.Store.Dir.Path = storeDir
				cfg.Reconcile.Heartbeat = ptypes.Duration(time.Hour)
				cfg.Reconcile.NodeTTL = ptypes.Duration(4 * time.Hour)
				cfg.ACME.Enabled = true
				cfg.ACME.CAServer, cfg.ACME.CARoots = p.Directory, p.CARootsFile
				cfg.ACME.PlatformBudget = 1 << 20
				if err := cfg.Validate(); err != nil {
					b.Fatal(err)
				}
				st, err := dir.New(storeDir)
				if err != nil {
					b.Fatal(err)
				}
				apps := make([]string, n)
				for i := range apps {
					apps[i] = fmt.Sprintf("app%04d", i)
				}
				seedFleetB(b, st, apps...)
				srv, nd := startBenchNode(b, cfg, st, ln)
				b.StartTimer()
				t0 := time.Now()
				for {
					valid := 0
					for _, s := range srv.Certs().Status() {
						if s.State == fleetcerts.StateValid {
							valid++
						}
					}
					if valid == n+1 {
						break
					}
					if time.Since(t0) > 30*time.Minute {
						b.Fatalf("%d of %d valid after 30 min", valid, n+1)
					}
					time.Sleep(100 * time.Millisecond)
				}
				el := time.Since(t0)
				b.StopTimer()
				var reqs float64
				mfs, _ := srv.Metrics().Reg().Gather()
				for _, mf := range mfs {
					if mf.GetName() == "scafo_store_requests_total" {
						for _, m := range mf.GetMetric() {
							reqs += m.GetCounter().GetValue()
						}
					}
				}
				if got := len(p.Issued()); got != n+1 {
					b.Fatalf("Pebble issued %d, want %d", got, n+1)
				}
				b.ReportMetric(el.Seconds()/float64(n+1), "s/name")
				b.ReportMetric(reqs/float64(n+1), "store-req/name")
				nd()
				b.StartTimer()
				if strings.Contains(p.Log(), "PEBBLE_VA_ALWAYS_VALID") {
					b.Fatal("validation was off")
				}
			}
		})
	}
}

// seedFleetB is seedFleet for a benchmark: apps placed on peer node vps-b.
func seedFleetB(b *testing.B, st store.Store, apps ...string) {
	ctx := context.Background()
	inst := map[string]fleet.Instance{}
	for i, a := range apps {
		v, _ := json.Marshal(fleet.App{Name: a, Account: "acme", Placement: []string{"vps-b"}})
		if _, err := st.Put(ctx, "apps/"+a+".json", v, store.Condition{}); err != nil {
			b.Fatal(err)
		}
		inst[a] = fleet.Instance{Port: 24000 + i, Ready: true}
	}
	v, _ := json.Marshal(fleet.NodeRecord{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400, Instances: inst, Seen: time.Now().UTC()})
	if _, err := st.Put(ctx, "nodes/vps-b.json", v, store.Condition{}); err != nil {
		b.Fatal(err)
	}
	if _, err := store.BumpSerial(ctx, st); err != nil {
		b.Fatal(err)
	}
}

// startBenchNode runs a node on ln; the returned func stops it.
func startBenchNode(b *testing.B, cfg *node.Config, st store.Store, ln net.Listener) (*node.Server, func()) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Node.APIPort = node.PortOf(ln.Addr().String())
	srv, err := node.NewWithStore(cfg, log, st, cfg.Ingress.Token, cfg.Admin.Token)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	return srv, func() { cancel(); <-done }
}
