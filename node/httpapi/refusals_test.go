package httpapi_test

// The refusal counters (scafo_requests_refused_total) and the parked long-poll gauge
// (scafo_longpolls_parked), read from /metrics as Prometheus scrapes them.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/httpapi"
)

// getter is a node or an API in process: what a scrape needs.
type getter interface {
	Get(path, token string, hdr ...string) (*http.Response, []byte)
}

// metricValue is the value of the sample series (name{labels} as exposed) on n's
// /metrics; ok is false when it is not there.
func metricValue(t *testing.T, n getter, series string) (v float64, ok bool) {
	t.Helper()
	_, b := n.Get("/metrics", "")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v, true
}

func refusedSeries(reason string) string {
	return `scafo_requests_refused_total{reason="` + reason + `"}`
}

// refusedCounts is every reason's count on n's /metrics (each must be exported).
func refusedCounts(t *testing.T, n getter) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range httpapi.RefusalReasons {
		v, ok := metricValue(t, n, refusedSeries(r))
		if !ok {
			t.Fatalf("%s is not exported", refusedSeries(r))
		}
		out[r] = v
	}
	return out
}

// TestRefusalsAreCountedByReason: every reason is exported at 0 from the start (so the
// dashboard and the alerts see the series before the first refusal), and each refusal
// counts one under its own reason and no other: a request without a token and one with
// a bad token (token), an application token's write past writes.rate (write_rate: 429
// with Retry-After naming the setting; the admin's writes are not limited), a token
// whose lookup budget is spent (token_lookups; its reads are refused by that budget
// alone, never by writes.rate). The connection refusals are TestTheConnectionCapKeepsItsReserveForPollsAndProbes's.
// Before, none of these was counted anywhere but in the (rate-limited) log.
func TestRefusalsAreCountedByReason(t *testing.T) {
	t.Parallel()
	// One write, then 429 for the test's life.
	n := newInProcess(t, func(c *httpapi.Config) { c.WriteRate, c.WriteBurst = 0.001, 1 })
	for r, v := range refusedCounts(t, n) {
		if v != 0 {
			t.Fatalf("reason %s starts at %v, want 0", r, v)
		}
	}
	want := map[string]float64{}
	step := func(what string, reason string, code int, method, path, token, body string) (*http.Response, []byte) {
		t.Helper()
		resp, b := n.Do(method, path, token, body)
		if resp.StatusCode != code {
			t.Fatalf("%s: %d %s, want %d", what, resp.StatusCode, b, code)
		}
		want[reason]++
		if got := refusedCounts(t, n); fmt.Sprint(got) != fmt.Sprint(fillReasons(want)) {
			t.Fatalf("after %s: counts %v, want %v", what, got, fillReasons(want))
		}
		return resp, b
	}
	step("a write without a token", httpapi.RefusedToken, 401, "PUT", "/v1/apps/shop", "", `{"account":"acme"}`)
	step("a poll with a bad token", httpapi.RefusedToken, 401, "GET", "/v1/ingress/routes", "not-the-ingress-token", "")
	step("a write with a made-up application token", httpapi.RefusedToken, 401, "PUT", "/v1/apps/shop", "hunter2", `{"account":"acme"}`)

	n.Must(201, "PUT", "/v1/apps/shop", ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
	_, tok := n.IssueToken("acme", "shop", `"instance"`)
	n.Must(200, "PUT", "/v1/node/instances/shop", tok, `{"port":25000,"ready":true}`) // the one write of the budget
	resp, b := step("a write past writes.rate", httpapi.RefusedWriteRate, 429, "PUT", "/v1/node/instances/shop", tok, `{"port":25001,"ready":true}`)
	if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "writes.rate") {
		t.Errorf("past the burst: Retry-After %q %s, want 429 naming writes.rate", resp.Header.Get("Retry-After"), b)
	}
	n.Must(200, "PUT", "/v1/node/instances/shop?force=true", ipAdmin, `{"port":25002,"ready":true}`) // the admin's writes are not limited

	// The token's lookup budget spent (reads, from 8 clients at once, past its burst
	// and rate): each 429 is refused before its lookup, counted under token_lookups.
	var limited atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4*httpapi.KnownTokenBurst && limited.Load() < 3; i++ {
				if resp, _ := n.Do("GET", "/v1/apps/shop", tok, ""); resp.StatusCode == http.StatusTooManyRequests {
					limited.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if limited.Load() == 0 {
		t.Fatalf("%d reads of one token answered no 429: its lookup budget was never spent", 32*httpapi.KnownTokenBurst)
	}
	want[httpapi.RefusedTokenLookups] += float64(limited.Load())
	if got := refusedCounts(t, n); fmt.Sprint(got) != fmt.Sprint(fillReasons(want)) {
		t.Fatalf("after %d token lookups refused: counts %v, want %v", limited.Load(), got, fillReasons(want))
	}
}

// fillReasons is want with every other reason at 0.
func fillReasons(want map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, r := range httpapi.RefusalReasons {
		out[r] = want[r]
	}
	return out
}

// TestParkedLongPollsAreCounted: a long-poll (?wait= with a matching If-None-Match)
// answers 304 when its wait ends, and 200 with the new ETag as soon as a new revision is
// published; it counts in scafo_longpolls_parked while it waits, and not once it is
// answered or its client goes away; a poll that is answered at once never counts.
func TestParkedLongPollsAreCounted(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	parked := func() float64 {
		v, ok := metricValue(t, n, "scafo_longpolls_parked")
		if !ok {
			t.Fatal("scafo_longpolls_parked is not exported")
		}
		return v
	}
	if p := parked(); p != 0 {
		t.Fatalf("parked before any long-poll: %v", p)
	}
	r1, _ := n.Get("/v1/ingress/traefik", ipIngress)
	etag := r1.Header.Get("ETag")
	if r, _ := n.Get("/v1/ingress/traefik?wait=20s", ipIngress, "If-None-Match", `"other"`); r.StatusCode != 200 || parked() != 0 {
		t.Fatalf("a long-poll answered at once: %d, parked %v", r.StatusCode, parked())
	}
	start := time.Now()
	if r, _ := n.Get("/v1/ingress/traefik?wait=300ms", ipIngress, "If-None-Match", etag); r.StatusCode != http.StatusNotModified || time.Since(start) < 300*time.Millisecond || parked() != 0 {
		t.Fatalf("an idle long-poll: %d after %s, want 304 after 300ms (parked %v after)", r.StatusCode, time.Since(start), parked())
	}

	// One poll answered by a change, one whose client leaves.
	answered := make(chan *http.Response, 1)
	go func() {
		resp, _ := n.Get("/v1/ingress/traefik?wait=20s", ipIngress, "If-None-Match", etag)
		answered <- resp
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan struct{})
	go func() {
		defer close(left)
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/v1/ingress/traefik?wait=20s", nil)
		req.Header.Set("Authorization", "Bearer "+ipIngress)
		req.Header.Set("If-None-Match", etag)
		n.Serve(req)
	}()
	n.awaitParked(t, 2)
	cancel()
	<-left // the handler returned once its client left
	if p := parked(); p != 1 {
		t.Fatalf("after a client left: %v parked, want 1", p)
	}
	n.Publish("shop.example", "blog.example")
	select {
	case r := <-answered:
		if r.StatusCode != 200 || r.Header.Get("ETag") == etag {
			t.Fatalf("the long-poll after a change: %d etag %s", r.StatusCode, r.Header.Get("ETag"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll was not answered after a change")
	}
	if p := parked(); p != 0 {
		t.Fatalf("after the change answered it: %v parked, want 0", p)
	}
}
