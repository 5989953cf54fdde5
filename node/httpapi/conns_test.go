package httpapi_test

// The connection cap and its reserve, the per-source cap, and the deadlines that cut
// slow clients (limits.go): the API in process served on a loopback listener as the
// node serves it (node/server.go: API.Listen, ConnContext, the header and idle
// timeouts), without a node. Each step waits on the listener's own events.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/httpapi"
)

// listening is an API served on a loopback listener.
type listening struct {
	*inProcess
	addr    string
	mu      sync.Mutex
	counts  connCounts
	changed chan struct{} // signalled after each change of open
}

// listenAPI serves an in-process API (configure may be nil) on a loopback listener capped
// at total connections, reserved of them the reserve, perSource general ones per address.
func listenAPI(t *testing.T, total, reserved, perSource int, idle time.Duration, configure func(*httpapi.Config)) *listening {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listening{inProcess: newInProcess(t, func(c *httpapi.Config) {
		c.ConnMaxAge = time.Hour
		if configure != nil {
			configure(c)
		}
	}), addr: tcp.Addr().String(), changed: make(chan struct{}, 1)}
	srv := &http.Server{Handler: l.H, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idle, ConnContext: httpapi.ConnContext}
	go srv.Serve(l.Srv.Listen(countingListener{tcp, l}, total, reserved, perSource))
	t.Cleanup(func() { srv.Close() })
	return l
}

type countingListener struct {
	net.Listener
	l *listening
}

func (c countingListener) Accept() (net.Conn, error) {
	conn, err := c.Listener.Accept()
	if err == nil {
		c.l.add(1)
		conn = &countedConn{Conn: conn, l: c.l}
	}
	return conn, err
}

type countedConn struct {
	net.Conn
	l    *listening
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.add(-1) })
	return err
}

// connCounts are the connections below the cap: open now, the most open at once, and
// accepted in all.
type connCounts struct{ open, peak, accepted int }

func (l *listening) add(d int) {
	l.mu.Lock()
	l.counts.open += d
	l.counts.peak = max(l.counts.peak, l.counts.open)
	if d > 0 {
		l.counts.accepted++
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default: // one pending signal is enough: the waiter reads the count again
	}
}

// waitOpen returns once n connections are open.
func (l *listening) waitOpen(t *testing.T, n int) {
	t.Helper()
	l.waitFor(t, fmt.Sprintf("%d connections open", n), func(c connCounts) bool { return c.open == n })
}

// waitFor returns once cond holds, checked at each change of the count; it
// fails the test after 30s (a failure's bound, not a pace).
func (l *listening) waitFor(t *testing.T, what string, cond func(connCounts) bool) connCounts {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		c := l.counts
		l.mu.Unlock()
		if cond(c) {
			return c
		}
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("connections %+v, waiting for %s", c, what)
		}
	}
}

// dial opens a connection from src and sends req as is.
func (l *listening) dial(t *testing.T, src, req string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads c's next answer within d.
func answer(t *testing.T, c net.Conn, d time.Duration) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", d, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// closedWithin reports whether the API closes c within d (its answers read already).
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil // EOF: closed by the API; a timeout is an error
}

// Raw requests.
const (
	slowAdminPut = "PUT /v1/apps/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ipAdmin + "\r\nContent-Length: 100\r\n\r\n" // its body never comes
	slowHealthz  = "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"
	slowHeaders  = "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" // never ended
	healthz      = "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	rawPoll      = "GET /v1/ingress/routes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ipIngress + "\r\n\r\n"
	adminWrite   = "PUT /v1/apps/shop HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ipAdmin + "\r\nContent-Length: 18\r\n\r\n{\"account\":\"acme\"}"
	anonWrite    = "PUT /v1/apps/shop HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 18\r\n\r\n{\"account\":\"acme\"}"
)

// TestTheConnectionCapKeepsItsReserveForPollsAndProbes: with 2 general connections, 2
// reserved and one general connection per address:
//   - a second connection of an address holding one serves a poll and closes, and
//     refuses a write without a token at once (503 naming limits.maxConnsPerSource);
//     the node's own tokens passing that cap is TestTheNodesTokensPassTheCapOfAnAddressTheyShare's;
//   - with the general part held, a new connection serves one poll or probe and closes,
//     and refuses anything else at once (503);
//   - with every slot held, a connection beyond the cap gets the listener's bare 503,
//     with every answer's headers; a freed slot is taken again.
//
// An address whose held connection closed gets a general connection again.
//
// Each refusal counts once under its own reason (conn_per_source, conn_reserve,
// conn_limit).
func TestTheConnectionCapKeepsItsReserveForPollsAndProbes(t *testing.T) {
	t.Parallel()
	n := listenAPI(t, 4, 2, 1, 200*time.Millisecond, nil)
	want := map[string]float64{}
	counted := func(what string) {
		t.Helper()
		// The listener counts its refusal after closing the connection: yield until it has.
		for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
			got := refusedCounts(t, n)
			if fmt.Sprint(got) == fmt.Sprint(fillReasons(want)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s: counts %v, want %v", what, got, fillReasons(want))
			}
		}
	}

	held := n.dial(t, "127.0.0.2", slowAdminPut) // 127.0.0.2's one general connection
	n.waitOpen(t, 1)
	resp, body := answer(t, n.dial(t, "127.0.0.2", anonWrite), 2*time.Second)
	if resp.StatusCode != 503 || !resp.Close || !strings.Contains(body, "maxConnsPerSource") {
		t.Errorf("a second connection's write from 127.0.0.2: %d close=%v %s, want 503 naming maxConnsPerSource", resp.StatusCode, resp.Close, body)
	}
	want[httpapi.RefusedConnPerSource]++
	counted("a write past the per-source cap")
	if resp, body := answer(t, n.dial(t, "127.0.0.2", rawPoll), 2*time.Second); resp.StatusCode != 200 || !resp.Close {
		t.Errorf("a second connection's poll from 127.0.0.2: %d close=%v %s, want 200 and closed", resp.StatusCode, resp.Close, body)
	}
	// Once its held connection closes, the address gets a general connection again.
	held.Close()
	n.waitOpen(t, 0)
	c := n.dial(t, "127.0.0.2", adminWrite)
	if resp, body := answer(t, c, 2*time.Second); resp.StatusCode/100 != 2 || resp.Close {
		t.Errorf("127.0.0.2's write once it holds no connection: %d close=%v %s, want it served on a general connection", resp.StatusCode, resp.Close, body)
	}
	c.Close()
	n.waitOpen(t, 0)
	held = n.dial(t, "127.0.0.2", slowAdminPut)
	n.dial(t, "127.0.0.3", slowAdminPut) // the general part full
	n.waitOpen(t, 2)

	for _, tc := range []struct {
		what, req string
		code      int
	}{
		{"a poll", rawPoll, 200},
		{"a readiness probe", "GET /v1/readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 200},
		{"HEAD of a poll", strings.Replace(rawPoll, "GET", "HEAD", 1), 200},
		{"status with the admin token", "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ipAdmin + "\r\n\r\n", 200},
		// Issue 25 item 1: the admin token gets what the ingress token gets from the
		// reserve (reads of polls and status), not anything it asks for.
		{"a write with the admin token", adminWrite, 503},
		{"a read of the write API with the admin token", "GET /v1/apps HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ipAdmin + "\r\n\r\n", 503},
		{"a poll without the token", "GET /v1/ingress/routes HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 503},
		{"a probe with a body", slowHealthz, 503},
		{"a write with an application token", "PUT /v1/apps/shop/domains/ti.to/paths HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer scafo_0123456789abcdef_" + strings.Repeat("ab", 32) + "\r\nContent-Length: 100\r\n\r\n", 503},
	} {
		c := n.dial(t, "127.0.0.4", tc.req)
		resp, body := answer(t, c, 2*time.Second)
		if resp.StatusCode != tc.code || !resp.Close || !closedWithin(c, time.Second) {
			t.Errorf("%s on a reserved connection: %d (close %v) %s, want %d and the connection closed", tc.what, resp.StatusCode, resp.Close, body, tc.code)
		}
		if tc.code == 503 {
			want[httpapi.RefusedConnReserve]++
			counted(tc.what + " on a reserved connection")
		}
		n.waitOpen(t, 2)
	}

	// Every slot held (the reserved ones by headers that never end): the next connection
	// gets a 503 after a short wait.
	n.dial(t, "127.0.0.5", slowHeaders)
	n.dial(t, "127.0.0.6", slowHeaders)
	n.waitOpen(t, 4)
	resp, body = answer(t, n.dial(t, "127.0.0.7", rawPoll), 3*time.Second)
	if resp.StatusCode != 503 || !strings.Contains(body, "connection limit") ||
		resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("beyond the cap: %d %v %s, want 503 with no-store and nosniff (every answer's)", resp.StatusCode, resp.Header, body)
	}
	held.Close() // a freed slot is taken again
	n.waitOpen(t, 3)
	want[httpapi.RefusedConnLimit]++
	counted("a connection beyond the cap")
	if resp, body := answer(t, n.dial(t, "127.0.0.8", rawPoll), 3*time.Second); resp.StatusCode != 200 {
		t.Errorf("a poll once a slot is free: %d %s", resp.StatusCode, body)
	}
}

// Issue 25 item 6: a connection older than limits.connMaxAge ends with its next answer
// (Connection: close), however busy its client keeps it; under the age it stays open.
func TestAConnectionPastItsMaxAgeIsClosedAfterItsAnswer(t *testing.T) {
	t.Parallel()
	for _, age := range []time.Duration{time.Hour, time.Nanosecond} {
		n := listenAPI(t, 40, 4, 8, time.Minute, func(c *httpapi.Config) { c.ConnMaxAge = age })
		c := n.dial(t, "127.0.0.1", healthz)
		resp, body := answer(t, c, 2*time.Second)
		if closes := age < time.Second; resp.StatusCode != 200 || resp.Close != closes || closes && !closedWithin(c, time.Second) {
			t.Errorf("connMaxAge %s: %d close=%v %s, want close=%v and closed", age, resp.StatusCode, resp.Close, body, closes)
		}
	}
}

// TestUnreadBodiesDoNotHoldConnections: a request whose route needs no body (a probe, a
// 404, a 405) announcing a body it never sends is answered at once and its connection
// closed, instead of held for the body timeout (10 s) while net/http drains the body.
func TestUnreadBodiesDoNotHoldConnections(t *testing.T) {
	t.Parallel()
	n := listenAPI(t, 40, 4, 8, time.Minute, nil)
	for _, req := range []string{
		slowHealthz,
		"GET /v1/readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nx",
		"POST /no/such/route HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n",
		"DELETE /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n",
	} {
		c := n.dial(t, "127.0.0.1", req)
		if resp, _ := answer(t, c, 5*time.Second); !resp.Close || !closedWithin(c, 5*time.Second) {
			t.Errorf("%.30q: answered %d but the connection stays open for the body", req, resp.StatusCode)
		}
	}
}

// TestDeadlinesCutSlowClientsNotLongPolls: a body that does not arrive, an answer that
// is not taken and an idle connection are cut after their timeouts; a long-poll, which
// has no body, outlives all of them.
func TestDeadlinesCutSlowClientsNotLongPolls(t *testing.T) {
	t.Parallel()
	n := listenAPI(t, 40, 4, 8, 400*time.Millisecond, func(c *httpapi.Config) {
		c.BodyTimeout, c.WriteTimeout = 300*time.Millisecond, 200*time.Millisecond
	})
	// A body sent in part, on a request that reads it.
	c := n.dial(t, "127.0.0.1", "PUT /v1/apps/shop HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+ipAdmin+"\r\nContent-Length: 100\r\n\r\n{\"acc")
	if resp, body := answer(t, c, 2*time.Second); resp.StatusCode != 400 || !strings.Contains(body, "body") {
		t.Errorf("a body that stops half way: %d %s", resp.StatusCode, body)
	}
	// An idle keep-alive connection.
	c = n.dial(t, "127.0.0.1", healthz)
	if resp, _ := answer(t, c, time.Second); resp.StatusCode != 200 || resp.Close || !closedWithin(c, 2*time.Second) {
		t.Errorf("an idle connection: %d close=%v, want kept alive, then closed at the idle timeout", resp.StatusCode, resp.Close)
	}

	// A long-poll longer than every timeout above, answered by a change once they passed:
	// it is parked first, and the change made once another, asked after it parked, has
	// answered 304 at the end of its wait (1s).
	etag := n.Rec("GET", "/v1/ingress/routes", ipIngress, "").Header().Get("ETag")
	across := n.dial(t, "127.0.0.1", "GET /v1/ingress/routes?wait=10s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+ipIngress+"\r\nIf-None-Match: "+etag+"\r\n\r\n")
	n.awaitParked(t, 1)
	start := time.Now()
	r1, _ := answer(t, n.dial(t, "127.0.0.1", "GET /v1/ingress/routes?wait=1s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+ipIngress+"\r\nIf-None-Match: "+etag+"\r\n\r\n"), 5*time.Second)
	if d := time.Since(start); r1.StatusCode != 304 || d < 900*time.Millisecond {
		t.Errorf("long-poll: %d after %s, want 304 after 1s", r1.StatusCode, d)
	}
	n.Publish("shop.example", "blog.example")
	if resp, body := answer(t, across, 10*time.Second); resp.StatusCode != 200 || !strings.Contains(body, "blog.example") {
		t.Errorf("long-poll across a change: %d %.200s", resp.StatusCode, body)
	}
}

// TestTheNodesTokensPassTheCapOfAnAddressTheyShare (issue 39, item 4): on the node's
// machine 127.0.0.1 is the ingress beside the node, the operators' CLI and every
// tenant's release at once. A tenant process holding limits.maxConnsPerSource idle
// connections from it made every /v1/storage request of the local Caddy (certificate
// loads, stores, locks) and the operators' writes answer 503. Now a connection past the
// per-source cap serves a request with the ingress or admin token, body included; a
// tenant's token or none still gets the 503 (a health probe still passes, as before),
// and with the general part full the reserve's rule is unchanged: a write with the
// ingress token is refused there.
func TestTheNodesTokensPassTheCapOfAnAddressTheyShare(t *testing.T) {
	t.Parallel()
	n := listenAPI(t, 6, 2, 1, time.Minute, nil)
	n.dial(t, "127.0.0.1", slowHeaders) // a tenant process holds 127.0.0.1's one general connection
	n.waitOpen(t, 1)
	ask := func(src, method, path, tok, body string) (int, string) {
		t.Helper()
		req := method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		if tok != "" {
			req += "Authorization: Bearer " + tok + "\r\n"
		}
		resp, b := answer(t, n.dial(t, src, req+fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)), 5*time.Second)
		return resp.StatusCode, b
	}
	for _, c := range []struct {
		method, path, tok, body string
		want                    int
	}{
		{"PUT", "/v1/storage/keys/certificates/x/a.example.org/a.example.org.crt", ipIngress, "pem", 200}, // the local Caddy stores a certificate
		{"GET", "/v1/storage/keys/certificates/x/a.example.org/a.example.org.crt", ipIngress, "", 200},
		{"PUT", "/v1/apps/shop", ipAdmin, `{"account":"acme","placement":["vps-a"]}`, 201}, // an operator's write
		{"PUT", "/v1/apps/shop", "scafo_0123456789abcdef_" + strings.Repeat("ab", 32), `{"account":"acme"}`, 503},
		{"GET", "/v1/storage/keys/x", "", "", 503},
		{"GET", "/v1/storage/keys/x", ipIngress + "x", "", 503},
		{"GET", "/v1/healthz", "", "", 200},
	} {
		code, body := ask("127.0.0.1", c.method, c.path, c.tok, c.body)
		if code != c.want || code == 503 && !strings.Contains(body, "maxConnsPerSource") {
			t.Errorf("%s %s (token %.8q…) past 127.0.0.1's cap: %d %s, want %d (a 503 naming limits.maxConnsPerSource)", c.method, c.path, c.tok, code, body, c.want)
		}
		n.waitOpen(t, 1)
	}

	// The general part full (127.0.0.1 to .4, one each): the reserve's rule alone.
	for i := 2; i <= 4; i++ {
		n.dial(t, fmt.Sprintf("127.0.0.%d", i), slowHeaders)
	}
	n.waitOpen(t, 4)
	if code, body := ask("127.0.0.9", "PUT", "/v1/storage/keys/x", ipIngress, "pem"); code != 503 || !strings.Contains(body, "kept for ingress polls") {
		t.Errorf("a write with the ingress token on a reserved connection (the general part full): %d %s, want the reserve's 503", code, body)
	}
}
