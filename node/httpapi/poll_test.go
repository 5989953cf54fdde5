package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
)

// The routing endpoints a Traefik polls, through a whole node: tokens, formats,
// conditional and compressed answers, prefer, long polls.

func TestIngressRequiresToken(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	for _, tc := range []struct{ name, token string }{{"absent", ""}, {"wrong", "nope"}, {"almost", testnode.IngressToken + "x"}} {
		for _, p := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/status"} {
			resp, b := n.Get(p, tc.token)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s token on %s: %d, want 401", tc.name, p, resp.StatusCode)
			}
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s token on %s: WWW-Authenticate %q", tc.name, p, resp.Header.Get("WWW-Authenticate"))
			}
			if !strings.Contains(string(b), `"error"`) {
				t.Errorf("%s token on %s: body %s", tc.name, p, b)
			}
		}
	}
	if strings.Contains(n.Logs.String(), testnode.IngressToken) || strings.Contains(n.Logs.String(), "nope") {
		t.Error("a token appears in the logs")
	}
}

func TestOnlyTraefikFormatIsRegistered(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	resp, b := n.Get("/v1/ingress/nginx", testnode.IngressToken)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "nginx") {
		t.Fatalf("nginx format: %d %s, want 404 naming it", resp.StatusCode, b)
	}
	resp, _ = n.Get("/v1/ingress/traefik", testnode.IngressToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("traefik format: %d", resp.StatusCode)
	}
}

func TestETagAnd304OnlyWhenAsked(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	testnode.SeedFleet(t, n.St, "shop")
	n.WaitReady()
	testnode.WaitSeeded(t, n)
	for _, p := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/ingress/traefik?prefer=self"} {
		r1, b1 := n.Get(p, testnode.IngressToken)
		etag := r1.Header.Get("ETag")
		if r1.StatusCode != 200 || !strings.HasPrefix(etag, `"`) {
			t.Fatalf("%s: %d etag %q", p, r1.StatusCode, etag)
		}
		// Without If-None-Match: always the full body (Traefik's HTTP provider treats
		// 304 as an error).
		r2, b2 := n.Get(p, testnode.IngressToken)
		if r2.StatusCode != 200 || !bytes.Equal(b1, b2) || r2.Header.Get("ETag") != etag {
			t.Fatalf("%s: second plain GET: %d, same body %v", p, r2.StatusCode, bytes.Equal(b1, b2))
		}
		r3, b3 := n.Get(p, testnode.IngressToken, "If-None-Match", etag)
		if r3.StatusCode != http.StatusNotModified || len(b3) != 0 {
			t.Fatalf("%s: If-None-Match current: %d, want 304", p, r3.StatusCode)
		}
		r4, _ := n.Get(p, testnode.IngressToken, "If-None-Match", `"stale"`)
		if r4.StatusCode != 200 {
			t.Fatalf("%s: If-None-Match stale: %d, want 200", p, r4.StatusCode)
		}
	}
}

func TestGzipWhenAccepted(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	testnode.SeedFleet(t, n.St, "shop")
	n.WaitReady()
	testnode.WaitSeeded(t, n)
	for _, p := range []string{"/v1/ingress/traefik", "/v1/ingress/routes"} {
		// gzip, identity, gzip: when both gzip bodies are identical, all three are one
		// revision (it never goes back), so the identity body is the one to compare.
		var resp, plain *http.Response
		var gz, body []byte
		nodetest.WaitFor(t, 5*time.Second, p+": one revision across three GETs", func() bool {
			resp, gz = n.Get(p, testnode.IngressToken, "Accept-Encoding", "gzip")
			plain, body = n.Get(p, testnode.IngressToken)
			_, again := n.Get(p, testnode.IngressToken, "Accept-Encoding", "gzip")
			return bytes.Equal(gz, again)
		})
		if resp.StatusCode != 200 || plain.StatusCode != 200 {
			t.Fatalf("%s: %d gzip, %d identity", p, resp.StatusCode, plain.StatusCode)
		}
		if resp.Header.Get("Content-Encoding") != "gzip" || len(gz) < 2 || gz[0] != 0x1f || gz[1] != 0x8b {
			t.Fatalf("%s: Content-Encoding %q, body starts %x", p, resp.Header.Get("Content-Encoding"), gz[:min(2, len(gz))])
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatalf("%s: gzip body: %v", p, err)
		}
		unzipped, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: gzip body: %v", p, err)
		}
		if !bytes.Equal(unzipped, body) || len(body) == 0 {
			t.Fatalf("%s: the gzip body decompresses to %d bytes that differ from the %d-byte identity body:\n%s\n---\n%s",
				p, len(unzipped), len(body), unzipped, body)
		}
		if plain.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: identity response has Content-Encoding %q", p, plain.Header.Get("Content-Encoding"))
		}
		if plain.Header.Get("ETag") == resp.Header.Get("ETag") {
			t.Errorf("%s: gzip and identity representations share one strong ETag", p)
		}
	}
}

func TestPreferValidation(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	testnode.SeedFleet(t, n.St, "shop")
	n.WaitReady()
	nodetest.WaitFor(t, 5*time.Second, "shop routed and this node's record in", func() bool {
		d := testnode.RoutesDoc(t, n)
		api, _ := d["api"].(map[string]any)
		return len(testnode.HostsOf(d)) == 1 && api != nil
	})
	_, plain := n.Get("/v1/ingress/routes", testnode.IngressToken)
	resp, unknown := n.Get("/v1/ingress/routes?prefer=retired-node", testnode.IngressToken)
	if resp.StatusCode != 200 || !bytes.Equal(plain, unknown) {
		t.Errorf("unknown but valid node: %d, body changed %v", resp.StatusCode, !bytes.Equal(plain, unknown))
	}
	for _, bad := range []string{"Bad_Name", "-x", "a.b", "%2e%2e"} {
		resp, b := n.Get("/v1/ingress/routes?prefer="+bad, testnode.IngressToken)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "prefer") {
			t.Errorf("prefer=%s: %d %s, want 400 naming prefer", bad, resp.StatusCode, b)
		}
	}
}

func TestLongPollReturnsOnChangeAndOnTimeout(t *testing.T) {
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	testnode.SeedFleet(t, n.St, "shop")
	n.WaitReady()
	testnode.WaitSeeded(t, n)
	r1, _ := n.Get("/v1/ingress/traefik", testnode.IngressToken)
	etag := r1.Header.Get("ETag")

	// Timeout: 304 after the wait.
	start := time.Now()
	r2, _ := n.Get("/v1/ingress/traefik?wait=300ms", testnode.IngressToken, "If-None-Match", etag)
	if el := time.Since(start); r2.StatusCode != http.StatusNotModified || el < 300*time.Millisecond || el > 3*time.Second {
		t.Fatalf("idle long-poll: %d after %s, want 304 after ~300ms", r2.StatusCode, el)
	}

	// Change: answered as soon as the revision moves.
	type result struct {
		code    int
		etag    string
		elapsed time.Duration
	}
	res := make(chan result, 1)
	var changedAt time.Time
	go func() {
		resp, _ := n.Get("/v1/ingress/traefik?wait=20s", testnode.IngressToken, "If-None-Match", etag)
		res <- result{resp.StatusCode, resp.Header.Get("ETag"), time.Since(changedAt)}
	}()
	nodetest.WaitFor(t, 5*time.Second, "the poll parked", func() bool {
		_, b := n.Get("/metrics", "")
		return strings.Contains(string(b), "\nscafo_longpolls_parked 1\n")
	})
	changedAt = time.Now()
	testnode.SeedFleet(t, n.St, "shop", "blog")
	select {
	case r := <-res:
		if r.code != 200 || r.etag == etag {
			t.Fatalf("long-poll after change: %d etag %s", r.code, r.etag)
		}
		// One reconcile interval (40ms) plus the store writes; ~100ms is the goal.
		if r.elapsed > time.Second {
			t.Fatalf("long-poll answered %s after the change", r.elapsed)
		}
		t.Logf("long-poll answered %s after the change (reconcile interval 40ms)", r.elapsed.Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("long-poll did not return after a change")
	}
}
