package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
)

// oneETagAcrossTwoNodesAndARestart polls two nodes sharing one dir store 1000
// times, restarting one of them halfway, and requires every answer to carry one ETag
// and one body (and, for the gzip representation, one gzip ETag).
func oneETagAcrossTwoNodesAndARestart(t *task) {
	const (
		polls     = 1000
		gzipEvery = 10
	)
	root := storeDir(t)
	routes := writeFleet(t, root, appsForRoutes(2000), 2000)
	a, b := newNode(t, "bench-a", root), newNode(t, "bench-b", root)
	a.start(t)
	b.start(t)

	// Each node publishes its own record (it is an API upstream); both documents
	// include both nodes once each has read the other's record.
	start := time.Now()
	waitFor(t, "both nodes serving one ETag", 60*time.Second, func() error {
		pa, err := a.poll(false)
		if err != nil {
			return err
		}
		pb, err := b.poll(false)
		if err != nil {
			return err
		}
		if pa.etag != pb.etag {
			return fmt.Errorf("bench-a %s, bench-b %s", pa.etag, pb.etag)
		}
		return nil
	})
	converged := time.Since(start)

	etags, bodies, gzETags := map[string]int{}, map[string]int{}, map[string]int{}
	var restartReady time.Duration
	for i := range polls {
		if i == polls/2 {
			b.proc.Stop(15 * time.Second)
			restartReady = b.start(t)
		}
		n := a
		if i%2 == 1 {
			n = b
		}
		p := mustPoll(t, n, false)
		etags[p.etag]++
		sum := sha256.Sum256(p.body)
		bodies[hex.EncodeToString(sum[:8])]++
		if i%gzipEvery == 0 {
			gzETags[mustPoll(t, n, true).etag]++
		}
	}
	keys := func(m map[string]int) string {
		var ks []string
		for k, v := range m {
			ks = append(ks, fmt.Sprintf("%s×%d", k, v))
		}
		sort.Strings(ks)
		return strings.Join(ks, ", ")
	}
	if len(etags) != 1 || len(bodies) != 1 || len(gzETags) != 1 {
		t.Errorf("%d polls: ETags %s; bodies %s; gzip ETags %s", polls, keys(etags), keys(bodies), keys(gzETags))
	}
	ok := len(etags) == 1 && len(bodies) == 1 && len(gzETags) == 1
	report.add(secStability,
		fmt.Sprintf("Two nodes (bench-a, bench-b) on one dir store holding a generated fleet of %d routes and 2000 prefixes; "+
			"%d polls of `/v1/ingress/traefik` alternating between them, bench-b restarted (SIGTERM, start, ready) after poll %d; "+
			"every %dth poll also fetched the gzip representation.", routes, polls, polls/2, gzipEvery),
		"",
		"| polls | distinct ETags | distinct bodies (SHA-256) | gzip polls | distinct gzip ETags | nodes converged after start | bench-b ready after restart |",
		"|---:|---:|---:|---:|---:|---:|---:|",
		fmt.Sprintf("| %d | %d | %d | %d | %d | %s | %s |", polls, len(etags), len(bodies), polls/gzipEvery, len(gzETags),
			converged.Round(time.Millisecond), restartReady.Round(time.Millisecond)),
		"",
		"ETags seen: "+keys(etags)+"; gzip: "+keys(gzETags)+".")
	report.goal("byte stability, 2 nodes + restart", "1 ETag over 1000 polls", fmt.Sprintf("%d ETag(s), %d gzip ETag(s)", len(etags), len(gzETags)), ok, "")
}
