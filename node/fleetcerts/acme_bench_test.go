package fleetcerts_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
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
				cfg.Ingress.Token, cfg.Admin.Token = testnode.IngressToken, testnode.AdminToken
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
				testnode.SeedFleet(b, st, apps...)
				nd := startBenchNode(b, cfg, st, ln)
				b.StartTimer()
				t0 := time.Now()
				var valid int
				if proc.Poll(30*time.Minute, 100*time.Millisecond, func() error {
					if valid = strings.Count(scrape(b, ln), `,state="`+fleetcerts.StateValid+`"} 1`); valid != n+1 {
						return fmt.Errorf("%d valid", valid)
					}
					return nil
				}) != nil {
					b.Fatalf("%d of %d valid after 30 min", valid, n+1)
				}
				el := time.Since(t0)
				b.StopTimer()
				var reqs float64
				for _, line := range strings.Split(scrape(b, ln), "\n") {
					if strings.HasPrefix(line, "scafo_store_requests_total{") {
						v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
						if err != nil {
							b.Fatalf("%q: %v", line, err)
						}
						reqs += v
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

// startBenchNode runs a node on ln; the returned func stops it.
func startBenchNode(b *testing.B, cfg *node.Config, st store.Store, ln net.Listener) func() {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Node.APIPort = ln.Addr().(*net.TCPAddr).Port
	srv, err := node.NewWithStore(cfg, log, st, cfg.Ingress.Token, cfg.Admin.Token)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	return func() { cancel(); <-done }
}

// scrape is the node's /metrics on ln: per name the state of its certificate
// (scafo_certificate_state, read from the manager's status at scrape time), and the
// store requests by operation (scafo_store_requests_total).
func scrape(b *testing.B, ln net.Listener) string {
	resp, body := nodetest.Get(b, "http://"+ln.Addr().String()+api.PathMetrics, "")
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("metrics: %d", resp.StatusCode)
	}
	return string(body)
}
