package node_test

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/testnode"
)

func TestShutdownReleasesLongPolls(t *testing.T) {
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	seedFleet(t, n.St, "shop")
	n.WaitReady()
	waitSeeded(t, n)
	r1, _ := n.Get("/v1/ingress/traefik", testIngressToken)
	etag := r1.Header.Get("ETag")
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", n.URL+"/v1/ingress/traefik?wait=60s", nil)
		req.Header.Set("Authorization", "Bearer "+testIngressToken)
		req.Header.Set("If-None-Match", etag)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	waitFor(t, 5*time.Second, "the poll parked", func() bool { return n.Metric("scafo_longpolls_parked") == 1 })
	start := time.Now()
	n.Stop()
	select {
	case code := <-done:
		if code != http.StatusNotModified {
			t.Fatalf("parked long-poll answered %d on shutdown, want 304", code)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("shutdown took %s with a parked long-poll", el)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long-poll not released by shutdown")
	}
}

func TestMetricsExposePollsAndReconcile(t *testing.T) {
	t.Parallel()
	n := testnode.NewStepped(t, testConfig(t, "vps-a", t.TempDir()), nil)
	seedFleet(t, n.St, "shop")
	n.Tick()
	metrics := func() string { return string(n.Must(http.StatusOK, http.MethodGet, "/metrics", "", "")) }
	// Passes that find nothing new keep the gauge: it counts what the last derivation
	// skipped. A malformed object must show up in it and stay there.
	putRaw(t, n.St, "apps/broken.json", []byte("{"))
	n.MustPass()
	if !strings.Contains(metrics(), "scafo_skipped_objects 1\n") {
		t.Fatal("the skipped-objects gauge does not count the malformed object")
	}
	for range 5 { // idle passes
		n.MustPass()
	}
	if !strings.Contains(metrics(), "scafo_skipped_objects 1\n") {
		t.Fatal("idle passes reset the skipped-objects gauge")
	}
	n.Get("/v1/ingress/traefik", testIngressToken)
	n.Get("/v1/ingress/nginx", testIngressToken)
	m := metrics()
	for _, want := range []string{
		`scafo_ingress_polls_total{code="200",format="traefik"} 1`,
		`scafo_ingress_polls_total{code="404",format="other"} 1`,
		`scafo_reconcile_duration_seconds_count`,
		`scafo_revision_age_seconds`,
		`scafo_reconcile_errors_total 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestANodeStoppedLeavesNoGoroutine: a node started and stopped leaves no goroutine
// behind (the expirable LRU of node/httpapi's bad-token cache left a cleaner per node
// that never stopped). Not parallel: it counts the process's goroutines, and waits for
// the count to come back (a stopped node's last connections close on their own time).
func TestANodeStoppedLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 3 {
		n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
		n.WaitReady()
		n.Must(200, "GET", "/v1/status", testAdminToken, "")
		n.Stop()
	}
	waitFor(t, 20*time.Second, "the goroutines of the stopped nodes to end", func() bool {
		return runtime.NumGoroutine() <= before
	})
}
