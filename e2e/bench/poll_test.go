package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"
)

// rounds is how many times each side is measured, interleaved (SCAFO_BENCH_ROUNDS).
func rounds(t *testing.T) int {
	v := os.Getenv("SCAFO_BENCH_ROUNDS")
	if v == "" {
		return 2
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("SCAFO_BENCH_ROUNDS=%q: want a positive integer", v)
	}
	return n
}

// fetchNginx GETs path from n and checks the body is exactly want (no decompression).
func fetchNginx(t *testing.T, n *nginx, gzip bool, want []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr(n.port)+"/traefik.json", nil)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := pollClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, want) {
		t.Fatalf("nginx gzip=%v: %d, %d bytes; want 200 and the node's %d bytes", gzip, resp.StatusCode, len(b), len(want))
	}
	if gzip != (resp.Header.Get("Content-Encoding") == "gzip") {
		t.Fatalf("nginx gzip=%v: Content-Encoding %q", gzip, resp.Header.Get("Content-Encoding"))
	}
}

// TestPollThroughputAgainstNginx serves one generated fleet's Traefik configuration
// from scafo-node and the very same bytes from nginx, and loads both with wrk.
func TestPollThroughputAgainstNginx(t *testing.T) {
	requireBench(t, "scafo-node", "wrk", "nginx")
	load := defaultLoad(t, 10)
	nRounds := rounds(t)
	report.add(secPoll,
		fmt.Sprintf("wrk `%s --latency`, %d rounds interleaved (node, nginx, node gzip, nginx gzip); "+
			"best round per side shown, every round's req/s in the last column. "+
			"The node is polled at `/v1/ingress/traefik` with the ingress token; nginx (2 workers, "+
			"sendfile, gzip_static with the node's own gzip bytes) serves the same bytes as a static file "+
			"and gets the same Authorization header. Bytes checked identical before loading.", load, nRounds), "")
	for _, fl := range []struct{ routes, prefixes int }{{10000, 0}, {10000, 10000}} {
		t.Run(fmt.Sprintf("routes=%d/prefixes=%d", fl.routes, fl.prefixes), func(t *testing.T) {
			pollVersusNginx(t, load, nRounds, fl.routes, fl.prefixes)
		})
	}
}

func pollVersusNginx(t *testing.T, load wrkLoad, nRounds, routes, prefixes int) {
	root := storeDir(t)
	nRoutes := writeFleet(t, root, appsForRoutes(routes), prefixes)
	nd := newNode(t, "bench-a", root)
	ready := nd.start(t)
	plain, gz := mustPoll(t, nd, false), mustPoll(t, nd, true)
	ng := startStaticNginx(t, plain.body, gz.body)
	fetchNginx(t, ng, false, plain.body)
	fetchNginx(t, ng, true, gz.body)

	auth := "Authorization: Bearer " + benchIngressToken
	type side struct {
		name string
		url  string
		gzip bool
		runs []wrkResult
	}
	sides := []*side{
		{name: "node", url: nd.url("/v1/ingress/traefik")},
		{name: "nginx", url: "http://" + addr(ng.port) + "/traefik.json"},
		{name: "node", url: nd.url("/v1/ingress/traefik"), gzip: true},
		{name: "nginx", url: "http://" + addr(ng.port) + "/traefik.json", gzip: true},
	}
	for range nRounds {
		for _, s := range sides {
			h := []string{auth}
			if s.gzip {
				h = append(h, "Accept-Encoding: gzip")
			}
			r := runWrk(t, load, s.url, h...)
			if r.non2xx != 0 || r.socketErrors != "" {
				t.Errorf("%s gzip=%v: %d non-2xx responses, socket errors %q", s.name, s.gzip, r.non2xx, r.socketErrors)
			}
			t.Logf("%s gzip=%v: %.0f req/s, p99 %s ms", s.name, s.gzip, r.reqPerSec, ms(r.p99))
			s.runs = append(s.runs, r)
		}
	}
	best := func(s *side) wrkResult {
		b := s.runs[0]
		for _, r := range s.runs[1:] {
			if r.reqPerSec > b.reqPerSec {
				b = r
			}
		}
		return b
	}
	all := func(s *side) string {
		var b bytes.Buffer
		for i, r := range s.runs {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%.0f", r.reqPerSec)
		}
		return b.String()
	}
	rss, peak := nd.proc.rssKB()
	rows := []string{
		fmt.Sprintf("**%d routes, %d prefixes on one host** (node ready %s after start; node RSS %s MB, peak %s MB after the load):",
			nRoutes, prefixes, ready.Round(time.Millisecond), mb(rss), mb(peak)),
		"",
		"| representation | body bytes | node req/s | node p99 ms | nginx req/s | nginx p99 ms | node / nginx req/s | p99 node / nginx | every round: node; nginx |",
		"|---|---:|---:|---:|---:|---:|---:|---:|---|",
	}
	for i := 0; i < len(sides); i += 2 {
		n, x := sides[i], sides[i+1]
		bn, bx := best(n), best(x)
		repr, size := "identity", len(plain.body)
		if n.gzip {
			repr, size = "gzip", len(gz.body)
		}
		ratio := bn.reqPerSec / bx.reqPerSec
		rows = append(rows, fmt.Sprintf("| %s | %d | %.0f | %s | %.0f | %s | **%.2f×** | %.2f× | %s; %s |",
			repr, size, bn.reqPerSec, ms(bn.p99), bx.reqPerSec, ms(bx.p99), ratio, float64(bn.p99)/float64(bx.p99), all(n), all(x)))
		note := fmt.Sprintf("%d routes, %d prefixes; node %.0f vs nginx %.0f req/s", nRoutes, prefixes, bn.reqPerSec, bx.reqPerSec)
		if ratio < 0.8 {
			note += fmt.Sprintf("; short by %.0f%%", (0.8-ratio)/0.8*100)
		}
		report.goal(fmt.Sprintf("poll throughput, %s, %d routes / %d prefixes", repr, nRoutes, prefixes), "≥ 0.8× nginx",
			fmt.Sprintf("%.2f×", ratio), ratio >= 0.8, note)
	}
	report.add(secPoll, append(rows, "")...)
}
