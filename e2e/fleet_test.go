package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/scafo/ingress/node/store/s3/s3test"
)

// Scenario 15: a fleet on one S3 bucket (a real MinIO, started by s3test from
// <repo>/.bin/minio). Three nodes share the bucket; each has its own Traefik on the
// shipped traefik.yml, polling that node with ?prefer=self. A path map published
// through node A reaches the Traefik polling node C within reconcile.interval + the
// poll interval + a margin, and every node answers the same ETag for the same prefer.
func TestFleetOnOneS3BucketServesAPathMapPublishedThroughOneNodeEverywhere(t *testing.T) {
	requireBinaries(t)
	srv := s3test.Start(t) // this test's own MinIO, killed at its end
	bucket := srv.NewBucket(t)

	const (
		reconcileInterval = 2 * time.Second // passed to every node below
		pollInterval      = time.Second     // traefik.yml's providers.http.pollInterval (config_test.go holds it)
		margin            = time.Second     // S3 round trips, Traefik's 100ms throttle, a loaded CI machine
		flips             = 6
	)
	bound := reconcileInterval + pollInterval + margin

	f := startFleet(t, 3, nodeOptions{args: append(s3NodeArgs(bucket), "--reconcile.interval="+reconcileInterval.String())})
	a, c := f.nodes[0], f.nodes[2]
	f.deploy(t, "site", "acme", f.nodes, "/healthz")
	f.deploy(t, "blog", "acme", f.nodes, "/healthz")
	const host, target = "paths.example.org", "blog.apps.localhost"
	a.claim(t, "site", host)

	trs := make([]*traefik, len(f.nodes))
	for i, n := range f.nodes {
		trs[i] = startTraefik(t, "traefik-"+n.name, traefikOptions{node: n}) // shipped: ?prefer=self
	}
	// prefer=self: each Traefik sends to its own node's instance first.
	for i, n := range f.nodes {
		trs[i].waitServedBy(t, host, "/b", "site@"+n.name, routeTimeout)
	}
	requireFleetOnTheBucket(t, f, srv, bucket.Bucket)

	// Flips published through A; time until each Traefik serves the new target.
	lat := make([][]time.Duration, len(f.nodes))
	for i := range flips {
		paths, app := map[string]string{"b": target}, "blog"
		if i%2 == 1 {
			paths, app = map[string]string{}, "site"
		}
		// De-phase from the nodes' reconcile ticks and Traefik's polls.
		time.Sleep(time.Duration(rand.Int64N(int64(reconcileInterval))))
		a.putPaths(t, "site", host, paths)
		t0 := time.Now()
		var wants []string
		for _, n := range f.nodes {
			wants = append(wants, app+"@"+n.name)
		}
		d := firstServed(t, trs, host, "/b", wants, t0)
		for j := range d {
			lat[j] = append(lat[j], d[j])
		}
		t.Logf("flip %d (/b → %s): %v", i+1, app, d)
		for j := 1; j < len(d); j++ { // A publishes on the write; the others wait for a tick
			if d[j] > bound {
				t.Errorf("flip %d: the Traefik polling %s served the change after %s, want within %s (reconcile.interval %s + poll %s + margin %s)",
					i+1, f.nodes[j].name, ms(d[j]), bound, reconcileInterval, pollInterval, margin)
			}
		}
	}

	// The same ETag (and bytes) from every node for the same prefer, and each node's
	// prefer=self is the same document as prefer=<its name> on the others.
	tAgree := time.Now()
	agreed := waitAgreement(t, f, 3*reconcileInterval+margin)
	t.Logf("nodes agreed %s after the last flip was served everywhere: %v", ms(time.Since(tAgree)), agreed)
	for _, q := range []string{"prefer=n1", "prefer=n2", "prefer=n3"} {
		for _, q2 := range []string{"prefer=n1", "prefer=n2", "prefer=n3"} {
			if q < q2 && agreed[q+"|identity"] == agreed[q2+"|identity"] {
				t.Errorf("%s and %s share ETag %s: the check cannot tell prefers apart", q, q2, agreed[q+"|identity"])
			}
		}
	}

	p := func(ds []time.Duration, q float64) time.Duration { return ms(percentile(ds, q)) }
	lines := []string{
		fmt.Sprintf("Three nodes on one MinIO bucket (reconcile.interval %s), a Traefik per node on `traefik.yml` "+
			"(HTTP provider, pollInterval %s, `?prefer=self`). %d path-map flips PUT through n1, each after a random "+
			"0–%s pause; time from the acknowledged PUT to the first request each Traefik serves from the new target "+
			"(its own node's instance). Bound for n2 and n3: %s (interval + poll + %s margin).",
			reconcileInterval, pollInterval, flips, reconcileInterval, bound, margin),
		"",
		"| Traefik polling | p50 | p95 | max |",
		"|---|---|---|---|",
	}
	for i, n := range f.nodes {
		who := n.name
		if n == a {
			who += " (A, took the PUT)"
		} else if n == c {
			who += " (C)"
		}
		lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s |", who, p(lat[i], 50), p(lat[i], 95), p(lat[i], 100)))
		t.Logf("Traefik polling %s: p50 %s, p95 %s, max %s, all %v", n.name, p(lat[i], 50), p(lat[i], 95), p(lat[i], 100), lat[i])
	}
	lines = append(lines, "", "Then every node answered the same ETag for the same prefer (identity and gzip), the same bytes, "+
		"and each node's `prefer=self` equalled `prefer=<its name>` elsewhere:", "", "| query | ETag (identity) |", "|---|---|")
	for _, q := range []string{"", "prefer=n1", "prefer=n2", "prefer=n3"} {
		shown := "(no prefer)"
		if q != "" {
			shown = "`" + q + "`"
		}
		lines = append(lines, fmt.Sprintf("| %s | `%s` |", shown, agreed[q+"|identity"]))
	}
	results.add("Scenario 15: fleet on one S3 bucket", lines...)
	for _, tr := range trs {
		tr.requireProviderClean(t, "http")
	}
}

// requireFleetOnTheBucket checks that the nodes really share the bucket (each wrote its
// own record there), that the dir store startFleet also names stayed empty, and that
// every node sees all three, fresh, with no settings mismatch.
func requireFleetOnTheBucket(t *testing.T, f *fleet, srv *s3test.Server, bucket string) {
	t.Helper()
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	for obj := range client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("listing bucket %s: %v", bucket, obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	sort.Strings(keys)
	for _, n := range f.nodes {
		found := false
		for _, k := range keys {
			if strings.HasSuffix(k, "nodes/"+n.name+".json") {
				found = true
			}
		}
		if !found {
			t.Errorf("bucket %s has no record of %s (keys %q)", bucket, n.name, keys)
		}
	}
	if entries, err := os.ReadDir(f.store); err != nil || len(entries) > 0 {
		t.Errorf("dir store %s: %d entries (%v); the nodes should use S3 alone", f.store, len(entries), err)
	}
	for _, n := range f.nodes {
		var st struct {
			Store struct {
				Reachable bool `json:"reachable"`
			} `json:"store"`
			Nodes []struct {
				Name  string `json:"name"`
				Stale bool   `json:"stale"`
			} `json:"nodes"`
			Mismatched []string `json:"mismatchedSettings"`
		}
		n.call(t, http.MethodGet, "/v1/status", nil, &st)
		if !st.Store.Reachable || len(st.Nodes) != len(f.nodes) || len(st.Mismatched) > 0 {
			t.Errorf("%s /v1/status: store reachable %v, nodes %+v, mismatched settings %q; want reachable, %d fresh nodes, none mismatched",
				n.name, st.Store.Reachable, st.Nodes, st.Mismatched, len(f.nodes))
		}
		for _, o := range st.Nodes {
			if o.Stale {
				t.Errorf("%s sees %s as stale", n.name, o.Name)
			}
		}
	}
}

// waitAgreement polls every node's /v1/ingress/traefik until, in one round, for every
// query ("", prefer=n1…n3) and encoding (identity, gzip), all nodes answer 200 with the
// same ETag and the same bytes, and each node's prefer=self equals prefer=<its name>.
// It returns the agreed ETags by "<query>|<encoding>".
func waitAgreement(t *testing.T, f *fleet, timeout time.Duration) map[string]string {
	t.Helper()
	queries := []string{""}
	for _, n := range f.nodes {
		queries = append(queries, "prefer="+n.name)
	}
	var agreed map[string]string
	waitFor(t, "every node to answer the same ETag and bytes per prefer", timeout, func() error {
		agreed = map[string]string{}
		for _, enc := range []string{"identity", "gzip"} {
			for _, q := range queries {
				var first ingressAnswer
				for i, n := range f.nodes {
					ans := n.ingress(t, q, enc)
					if ans.status != http.StatusOK || ans.etag == "" {
						return fmt.Errorf("%s ?%s (%s): status %d, ETag %q", n.name, q, enc, ans.status, ans.etag)
					}
					if i == 0 {
						first = ans
						continue
					}
					if ans.etag != first.etag || !bytes.Equal(ans.body, first.body) {
						return fmt.Errorf("?%s (%s): %s answers ETag %s (revision %s, %d bytes), %s answers %s (revision %s, %d bytes)",
							q, enc, f.nodes[0].name, first.etag, first.revision, len(first.body), n.name, ans.etag, ans.revision, len(ans.body))
					}
				}
				agreed[q+"|"+enc] = first.etag
			}
			for _, n := range f.nodes {
				self := n.ingress(t, "prefer=self", enc)
				if want := agreed["prefer="+n.name+"|"+enc]; self.etag != want {
					return fmt.Errorf("%s ?prefer=self (%s): ETag %s, the fleet's prefer=%s is %s", n.name, enc, self.etag, n.name, want)
				}
			}
		}
		return nil
	})
	return agreed
}
