package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/scafo/ingress/node/store/s3/s3test"
)

// Issue 13 item 1, measured on a real MinIO, before and after in one run: store
// requests per node per reconcile tick for a fleet of 3, 6 and 12 real scafo-nodes on one
// bucket, 20 applications, idle. The before side is the node built from the commit
// before issue 13 (the program's -before); both sides run here back to back on
// a MinIO of their own, counted by MinIO itself (its v3 API request metrics).

// storeTick is the nodes' reconcile interval (the default, on both builds).
const storeTick = 2 * time.Second

// storeCostRun is one (build, fleet size) measurement.
type storeCostRun struct {
	build  string
	nodes  int
	window time.Duration
	// byAPI are MinIO's S3 requests during the idle window, by API name.
	byAPI map[string]float64
	// nodeCounted is the nodes' own scafo_store_requests_total over the same window, by
	// op (empty for a build without the counter).
	nodeCounted map[string]float64
}

func (r storeCostRun) total() float64 {
	var s float64
	for _, v := range r.byAPI {
		s += v
	}
	return s
}

// perNodeTick is n requests spread over the run's nodes and ticks.
func (r storeCostRun) perNodeTick(n float64) float64 {
	return n / float64(r.nodes) / (r.window.Seconds() / storeTick.Seconds())
}

// storeRequestsPerNodePerTick runs 3, 6 and 12 nodes (SCAFO_BENCH_STORE_NODES) on
// one MinIO bucket with 20 applications, lets them settle, and counts MinIO's requests
// over an idle window (SCAFO_BENCH_STORE_IDLE seconds, default 60), for this tree and,
// when -before names one, the older build.
func storeRequestsPerNodePerTick(t *task) {
	if _, err := s3test.MinIOBinary(); err != nil {
		t.Fatalf("MinIO: %v (run .ci/minio.sh install)", err)
	}
	sizes := envInts(t, "SCAFO_BENCH_STORE_NODES", []int{3, 6, 12})
	window := time.Duration(envInt(t, "SCAFO_BENCH_STORE_IDLE", 60)) * time.Second
	type build struct{ name, bin string }
	builds := []build{{"this tree", bins.node}}
	if b := bins.beforeNode; b != "" {
		ref := bins.beforeRef
		builds = append([]build{{"before (" + ref + ")", b}}, builds...)
	}
	// MinIO's metrics without a bearer token, for this section's own MinIOs.
	t.Setenv("MINIO_PROMETHEUS_AUTH_TYPE", "public")
	var runs []storeCostRun
	for _, n := range sizes {
		for _, b := range builds {
			t.Run(fmt.Sprintf("%s/nodes=%d", b.name, n), func(t *task) {
				runs = append(runs, measureStoreCost(t, b.name, b.bin, n, window))
			})
		}
	}
	storeCostReport(runs, window)
}

func measureStoreCost(t *task, build, bin string, n int, window time.Duration) storeCostRun {
	srv := s3test.Start(t)
	cfg := srv.NewBucket(t)
	s3args := []string{
		"--store.s3.endpoint=" + cfg.Endpoint,
		"--store.s3.bucket=" + cfg.Bucket,
		"--store.s3.region=" + cfg.Region,
		"--store.s3.accessKeyID=" + cfg.AccessKeyID,
		"--store.s3.secretAccessKey=" + cfg.SecretAccessKey,
		"--store.s3.insecure=" + strconv.FormatBool(cfg.Insecure),
	}
	var nodes []*benchNode
	for i := range n {
		nd := newNodeBin(t, bin, fmt.Sprintf("n%02d", i+1), storeDir(t), s3args...)
		nd.proc.MustStart(t)
		nodes = append(nodes, nd)
	}
	for _, nd := range nodes {
		if err := nd.proc.WaitUntil(2*time.Minute, func() error { return httpOK(nd.url("/v1/readyz")) }); err != nil {
			t.Fatalf("%s ready: %v", nd.name, err)
		}
	}
	for i := range 20 {
		placement := []string{nodes[i%n].name, nodes[(i+1)%n].name}
		putApp(t, nodes[0], fmt.Sprintf("idle-%02d", i), fmt.Sprintf("acct-%d", i%4), placement)
	}
	// Settle: every node reads the new applications and heartbeats at least once.
	time.Sleep(20 * time.Second)
	m0, c0 := minioRequests(t, srv.Endpoint), nodeStoreRequests(t, nodes)
	time.Sleep(window)
	m1, c1 := minioRequests(t, srv.Endpoint), nodeStoreRequests(t, nodes)
	run := storeCostRun{build: build, nodes: n, window: window, byAPI: diffCounts(m1, m0), nodeCounted: diffCounts(c1, c0)}
	t.Logf("%s, %d nodes: %.0f MinIO requests in %s (%v) = %.2f per node per tick; nodes counted %v",
		build, n, run.total(), window, run.byAPI, run.perNodeTick(run.total()), run.nodeCounted)
	for _, nd := range nodes {
		nd.proc.Stop(10 * time.Second)
	}
	return run
}

func httpOK(url string) error {
	resp, err := pollClient.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d", url, resp.StatusCode)
	}
	return nil
}

// putApp creates an application through a node's API (admin token).
func putApp(t *task, nd *benchNode, name, account string, placement []string) {
	body, _ := json.Marshal(map[string]any{"name": name, "account": account, "placement": placement})
	req, _ := http.NewRequest(http.MethodPut, nd.url("/v1/apps/"+name), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+benchAdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := pollClient.Do(req)
	if err != nil {
		t.Fatalf("PUT app %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT app %s: %d %s", name, resp.StatusCode, b)
	}
}

// minioRequests reads MinIO's S3 request counters by API name
// (minio_api_requests_total{name=…,type="s3"} on /minio/metrics/v3/api/requests).
func minioRequests(t *task, endpoint string) map[string]float64 {
	resp, err := pollClient.Get("http://" + strings.TrimPrefix(endpoint, "http://") + "/minio/metrics/v3/api/requests")
	if err != nil {
		t.Fatalf("MinIO metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("MinIO metrics: %d %.200s", resp.StatusCode, b)
	}
	return labelledCounts(string(b), "minio_api_requests_total", "name", `type="s3"`)
}

// nodeStoreRequests sums scafo_store_requests_total by op over the nodes (empty on a
// build without it).
func nodeStoreRequests(t *task, nodes []*benchNode) map[string]float64 {
	sum := map[string]float64{}
	for _, nd := range nodes {
		for k, v := range labelledCounts(metricsText(t, nd), "scafo_store_requests_total", "op", "") {
			sum[k] += v
		}
	}
	return sum
}

// labelledCounts reads the samples of metric name from a Prometheus text page, keyed by
// the value of label, keeping only lines that contain must.
func labelledCounts(text, name, label, must string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, must) {
			continue
		}
		_, rest, _ := strings.Cut(line, label+`="`)
		key, _, _ := strings.Cut(rest, `"`)
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			out[key] += v
		}
	}
	return out
}

func diffCounts(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func storeCostReport(runs []storeCostRun, window time.Duration) {
	if len(runs) == 0 {
		return
	}
	apis := map[string]bool{}
	for _, r := range runs {
		for k := range r.byAPI {
			apis[k] = true
		}
	}
	var names []string
	for k := range apis {
		names = append(names, k)
	}
	sort.Strings(names)
	head := "| build | nodes | MinIO requests per node per tick |"
	sep := "|---|---:|---:|"
	for _, k := range names {
		head += " " + k + " |"
		sep += "---:|"
	}
	head += " the nodes' own count (scafo_store_requests_total) per node per tick |"
	sep += "---|"
	rows := []string{
		fmt.Sprintf("n real scafo-nodes on one MinIO bucket (a MinIO of their own per row, started for it), 20 applications written "+
			"through the first node's API (each placed on two nodes, no instances), every setting at its default (reconcile tick %s, "+
			"heartbeat 15 s); after 20 s to settle, MinIO's S3 request counters (`minio_api_requests_total{type=\"s3\"}` from "+
			"`/minio/metrics/v3/api/requests`) are read before and after %s of idle. Per node per tick = requests ÷ nodes ÷ "+
			"(%s ÷ %s). Both builds run here back to back.", storeTick, window, window, storeTick),
		"",
		head, sep,
	}
	for _, r := range runs {
		row := fmt.Sprintf("| %s | %d | **%.2f** |", r.build, r.nodes, r.perNodeTick(r.total()))
		for _, k := range names {
			row += fmt.Sprintf(" %.2f |", r.perNodeTick(r.byAPI[k]))
		}
		own := "–"
		if len(r.nodeCounted) > 0 {
			var parts []string
			var ks []string
			for k := range r.nodeCounted {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			var total float64
			for _, k := range ks {
				total += r.nodeCounted[k]
				parts = append(parts, fmt.Sprintf("%s %.2f", k, r.perNodeTick(r.nodeCounted[k])))
			}
			own = fmt.Sprintf("%.2f (%s)", r.perNodeTick(total), strings.Join(parts, ", "))
		}
		rows = append(rows, row+" "+own+" |")
	}
	rows = append(rows, "", "Ratios (same run, after ÷ before):", "")
	for _, r := range runs {
		if strings.HasPrefix(r.build, "before") {
			continue
		}
		for _, b := range runs {
			if b.nodes == r.nodes && strings.HasPrefix(b.build, "before") && b.total() > 0 {
				rows = append(rows, fmt.Sprintf("- %d nodes: %.2f vs %.2f requests per node per tick, %.2f×.",
					r.nodes, r.perNodeTick(r.total()), b.perNodeTick(b.total()), r.total()/b.total()))
			}
		}
	}
	report.add(secStoreCost, append(rows, "")...)
}
