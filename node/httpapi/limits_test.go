package httpapi_test

// The connection cap and its reserve, and the deadlines that cut slow clients
// (limits.go).

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
)

// TestConnectionReserveKeepsPollsAndProbes: with the general connections held, a new
// connection serves one poll or probe and closes, refuses anything else at once, and a
// connection beyond the cap is refused with a 503 rather than left waiting.
func TestConnectionReserveKeepsPollsAndProbes(t *testing.T) {
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Limits.MaxConns = 4
	cfg.Limits.ReservedConns = 2
	cfg.Limits.IdleTimeout = ptypes.Duration(200 * time.Millisecond)
	n := testnode.Start(t, cfg)
	n.WaitReady()
	cl := testnode.ConnsOf(n)
	nodetest.WaitFor(t, 2*time.Second, "idle test connections closed", func() bool { return cl.Open() == 0 })
	// Writes whose (admin, so authorized) bodies never come: they hold their connections
	// for the body timeout. (A request to a route that needs no body, a probe, is
	// answered at once and cut instead: see TestUnreadBodiesDoNotHoldConnections.)
	held := []net.Conn{testnode.RawRequest(t, n, testnode.SlowAdminPut), testnode.RawRequest(t, n, testnode.SlowAdminPut)}
	nodetest.WaitFor(t, time.Second, "the general connections held", func() bool { return cl.Open() == 2 })

	const poll = "GET /v1/ingress/routes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testnode.IngressToken + "\r\n\r\n"
	for _, tc := range []struct {
		what, req string
		code      int
	}{
		{"a poll", poll, 200},
		{"a readiness probe", "GET /v1/readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 200},
		{"HEAD of a poll", strings.Replace(poll, "GET", "HEAD", 1), 200},
		{"status with the admin token", "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testnode.AdminToken + "\r\n\r\n", 200},
		// Issue 25 item 1: the admin token gets what the ingress token gets from the
		// reserve (reads of polls and status), not anything it asks for.
		{"a write with the admin token", "PUT /v1/apps/shop HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testnode.AdminToken + "\r\nContent-Length: 18\r\n\r\n{\"account\":\"acme\"}", 503},
		{"a read of the write API with the admin token", "GET /v1/apps HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testnode.AdminToken + "\r\n\r\n", 503},
		{"a poll without the token", "GET /v1/ingress/routes HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 503},
		{"a probe with a body", testnode.SlowHealthz, 503},
		{"a write with an application token", "PUT /v1/apps/shop/domains/ti.to/paths HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer scafo_0123456789abcdef_" + strings.Repeat("ab", 32) + "\r\nContent-Length: 100\r\n\r\n", 503},
	} {
		start := time.Now()
		c := testnode.RawRequest(t, n, tc.req)
		resp, body := testnode.ReadAnswer(t, c, 2*time.Second)
		if resp.StatusCode != tc.code || !resp.Close {
			t.Errorf("%s on a reserved connection: %d (close %v) %s, want %d and Connection: close", tc.what, resp.StatusCode, resp.Close, body, tc.code)
		}
		if !testnode.ClosedWithin(c, time.Second) {
			t.Errorf("%s: the reserved connection was not closed after its answer", tc.what)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s took %s", tc.what, d)
		}
	}

	// All four slots held (the reserved ones by clients that never finish their headers,
	// which hold a slot for the header timeout): the next connection gets a 503 after a
	// short wait.
	const slowHeaders = "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	held = append(held, testnode.RawRequest(t, n, slowHeaders), testnode.RawRequest(t, n, slowHeaders))
	nodetest.WaitFor(t, time.Second, "every slot held", func() bool { return cl.Open() == 4 })
	start := time.Now()
	c := testnode.RawRequest(t, n, poll)
	resp, body := testnode.ReadAnswer(t, c, 3*time.Second)
	if resp.StatusCode != 503 || !strings.Contains(body, "connection limit") {
		t.Errorf("beyond the cap: %d %s", resp.StatusCode, body)
	}
	if cc, ns := resp.Header.Get("Cache-Control"), resp.Header.Get("X-Content-Type-Options"); cc != "no-store" || ns != "nosniff" {
		t.Errorf("beyond the cap: Cache-Control %q, X-Content-Type-Options %q; want no-store, nosniff (every answer's)", cc, ns)
	}
	t.Logf("refused beyond the cap after %s", time.Since(start).Round(time.Millisecond))
	// A freed slot is taken again.
	held[0].Close()
	nodetest.WaitFor(t, time.Second, "a slot freed", func() bool { return cl.Open() == 3 })
	if resp, _ := testnode.ReadAnswer(t, testnode.RawRequest(t, n, poll), 3*time.Second); resp.StatusCode != 200 {
		t.Errorf("a poll once a slot is free: %d", resp.StatusCode)
	}
}

// TestDeadlinesCutSlowClientsNotLongPolls: a body that does not arrive, an answer that
// is not taken and an idle connection are cut after their timeouts; a long-poll, which
// has no body, outlives all of them.
func TestDeadlinesCutSlowClientsNotLongPolls(t *testing.T) {
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Limits.BodyTimeout = ptypes.Duration(300 * time.Millisecond)
	cfg.Limits.WriteTimeout = ptypes.Duration(200 * time.Millisecond)
	cfg.Limits.IdleTimeout = ptypes.Duration(400 * time.Millisecond)
	n := testnode.Start(t, cfg)
	n.WaitReady()

	// A body announced and never sent, on a request answered without reading it.
	c := testnode.RawRequest(t, n, testnode.SlowHealthz)
	if resp, _ := testnode.ReadAnswer(t, c, time.Second); resp.StatusCode != 200 {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
	if !testnode.ClosedWithin(c, 2*time.Second) {
		t.Error("a connection whose announced body never came was not closed")
	}
	// A body sent in part, on a request that reads it.
	c = testnode.RawRequest(t, n, "PUT /v1/apps/shop HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+testnode.AdminToken+"\r\nContent-Length: 100\r\n\r\n{\"acc")
	start := time.Now()
	if resp, body := testnode.ReadAnswer(t, c, 2*time.Second); resp.StatusCode != 400 || !strings.Contains(body, "body") {
		t.Errorf("a body that stops half way: %d %s", resp.StatusCode, body)
	}
	t.Logf("a half-sent body answered after %s", time.Since(start).Round(time.Millisecond))
	// An idle keep-alive connection.
	c = testnode.RawRequest(t, n, "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if resp, _ := testnode.ReadAnswer(t, c, time.Second); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("healthz: %d close %v", resp.StatusCode, resp.Close)
	}
	if !testnode.ClosedWithin(c, 2*time.Second) {
		t.Error("an idle connection was not closed")
	}

	// Two long-polls longer than every timeout above. One that sees a change after the
	// timeouts passed answers the new document in full: it is parked first, and the
	// change is made once the other, asked after it parked, has answered 304 at the end
	// of its wait (1s).
	r0, _ := n.Get("/v1/ingress/routes", testnode.IngressToken)
	etag := r0.Header.Get("ETag")
	type answer struct {
		code int
		body []byte
		err  error
	}
	across := make(chan answer, 1)
	start = time.Now()
	go func() {
		req, _ := http.NewRequest("GET", n.URL+"/v1/ingress/routes?wait=10s", nil)
		req.Header.Set("Authorization", "Bearer "+testnode.IngressToken)
		req.Header.Set("If-None-Match", etag)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			across <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		across <- answer{resp.StatusCode, b, err}
	}()
	nodetest.WaitFor(t, 5*time.Second, "the long-poll parked", func() bool {
		return testnode.MetricLine(t, n, "scafo_longpolls_parked 1")
	})
	start1 := time.Now()
	r1, _ := n.Get("/v1/ingress/routes?wait=1s", testnode.IngressToken, "If-None-Match", etag)
	if d := time.Since(start1); r1.StatusCode != 304 || d < 900*time.Millisecond {
		t.Errorf("long-poll: %d after %s, want 304 after 1s", r1.StatusCode, d)
	}
	n.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, `{"port":25000,"ready":true}`)
	r2 := <-across
	if r2.err != nil || r2.code != 200 || !strings.Contains(string(r2.body), "shop.apps.example.com") {
		t.Errorf("long-poll across a change: %d %v after %s: %.200s", r2.code, r2.err, time.Since(start), r2.body)
	}
}

// TestUnreadBodiesDoNotHoldConnections: a request whose route needs no body (a probe, a
// 404, a 405) announcing a body it never sends is answered at once and its connection
// closed, instead of holding it for the body timeout while net/http drains the body.
func TestUnreadBodiesDoNotHoldConnections(t *testing.T) {
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	n := testnode.Start(t, cfg)
	n.WaitReady()
	for _, req := range []string{
		testnode.SlowHealthz,
		"GET /v1/readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nx",
		"POST /no/such/route HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n",
		"DELETE /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n",
	} {
		start := time.Now()
		c := testnode.RawRequest(t, n, req)
		resp, _ := testnode.ReadAnswer(t, c, 2*time.Second)
		if !resp.Close || !testnode.ClosedWithin(c, time.Second) {
			t.Errorf("%.30q: answered %d but the connection stays open for the body", req, resp.StatusCode)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%.30q took %s: held for the body timeout", req, d)
		}
	}
}
