package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// rounds is how many times each side is measured, interleaved (SCAFO_BENCH_ROUNDS).
func rounds(t *task) int {
	v := os.Getenv("SCAFO_BENCH_ROUNDS")
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("SCAFO_BENCH_ROUNDS=%q: want a positive integer", v)
	}
	return n
}

// fetchNginx GETs path from n and checks the body is exactly want (no decompression).
func fetchNginx(t *task, n *nginx, gzip bool, want []byte) {
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

// pollThroughputAgainstNginx serves one generated fleet's Traefik configuration
// from scafo-node and the very same bytes from nginx, and loads both with wrk.
func pollThroughputAgainstNginx(t *task) {
	load := defaultLoad(t, 8)
	nRounds := rounds(t)
	report.add(secPoll,
		fmt.Sprintf("wrk `%s --latency`, %d round(s) interleaved (node, nginx, node gzip, nginx gzip, then the Go controls below); "+
			"best round per side shown, every round's req/s in the last column. "+
			"The node is polled at `/v1/ingress/traefik` with the ingress token; nginx (2 workers, "+
			"sendfile, gzip_static with the node's own gzip bytes) serves the same bytes as a static file "+
			"and gets the same Authorization header. Bytes checked identical before loading.", load, nRounds), "")
	for _, fl := range []struct{ routes, prefixes int }{{10000, 0}, {10000, 10000}} {
		t.Run(fmt.Sprintf("routes=%d/prefixes=%d", fl.routes, fl.prefixes), func(t *task) {
			pollVersusNginx(t, load, nRounds, fl.routes, fl.prefixes)
		})
	}
}

func pollVersusNginx(t *task, load wrkLoad, nRounds, routes, prefixes int) {
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
	// Controls, on the first fleet: a bare Go server writing the same bytes from memory
	// (the node's technique without the node) and one sending them with sendfile(2)
	// (nginx's technique in Go).
	withControls := prefixes == 0
	if withControls {
		www := filepath.Join(ng.prefix, "www")
		bp, sp := startGoServer(t, serveModeBytes, www), startGoServer(t, serveModeSendfile, www)
		sides = append(sides,
			&side{name: "go-bytes", url: "http://" + addr(bp) + "/traefik.json"},
			&side{name: "go-sendfile", url: "http://" + addr(sp) + "/traefik.json"},
			&side{name: "go-bytes", url: "http://" + addr(bp) + "/traefik.json", gzip: true},
			&side{name: "go-sendfile", url: "http://" + addr(sp) + "/traefik.json", gzip: true},
		)
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
	rss, peak := rssKB(nd.proc)
	rows := []string{
		fmt.Sprintf("**%d routes, %d prefixes on one host** (node ready %s after start; node RSS %s MB, peak %s MB after the load):",
			nRoutes, prefixes, ready.Round(time.Millisecond), mb(rss), mb(peak)),
		"",
		"| representation | body bytes | node req/s | node p99 ms | nginx req/s | nginx p99 ms | node / nginx req/s | p99 node / nginx | every round: node; nginx |",
		"|---|---:|---:|---:|---:|---:|---:|---:|---|",
	}
	for i := 0; i < 4; i += 2 {
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
	if withControls {
		rows = append(rows, "",
			"Controls (same run, same load): a bare Go net/http server holding the bytes in memory and calling Write (what the "+
				"node does, without auth, routing, metrics), and one opening the file per request and io.Copy-ing it, which "+
				"net/http turns into sendfile(2) (what nginx does).",
			"",
			"| representation | node req/s | Go, Write from memory | Go, sendfile | nginx | node / Go-Write | Go-Write / Go-sendfile | Go-sendfile / nginx |",
			"|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, g := range []bool{false, true} {
			pick := func(name string) wrkResult {
				for _, s := range sides {
					if s.name == name && s.gzip == g {
						return best(s)
					}
				}
				return wrkResult{}
			}
			n, gb, gs, x := pick("node"), pick("go-bytes"), pick("go-sendfile"), pick("nginx")
			repr := "identity"
			if g {
				repr = "gzip"
			}
			rows = append(rows, fmt.Sprintf("| %s | %.0f | %.0f | %.0f | %.0f | %.2f× | %.2f× | %.2f× |", repr,
				n.reqPerSec, gb.reqPerSec, gs.reqPerSec, x.reqPerSec,
				n.reqPerSec/gb.reqPerSec, gb.reqPerSec/gs.reqPerSec, gs.reqPerSec/x.reqPerSec))
		}
	}
	report.add(secPoll, append(rows, "")...)

	if profileEnabled && prefixes == 0 {
		for _, gzip := range []bool{false, true} {
			h := []string{auth}
			repr := "identity"
			if gzip {
				h, repr = append(h, "Accept-Encoding: gzip"), "gzip"
			}
			var during wrkResult
			top := perfTop(t, nd.proc.PID(), load.duration, 12, func() { during = runWrk(t, load, nd.url("/v1/ingress/traefik"), h...) })
			if len(top) == 0 {
				continue
			}
			report.add(secPoll, fmt.Sprintf("<details><summary>perf profile of the node, %s, %d routes (%.0f req/s while sampled): hottest symbols, self time</summary>", repr, nRoutes, during.reqPerSec),
				"", "| self | space | object | symbol |", "|---:|---|---|---|")
			report.add(secPoll, top...)
			report.add(secPoll, "", "</details>", "")
		}
	}
}
