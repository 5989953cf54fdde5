package httpapi_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
)

// Issue 25 item 6: idle keep-alive connections of one address cannot hold the general
// connections. With limits.maxConnsPerSource 2, two keep-alives from 127.0.0.3 (each
// answered, kept open) are all that address holds in general: its third connection is
// served like a reserved one (a write is 503 naming the per-source cap, a poll is
// served, both close), while another address (127.0.0.2) still gets a general
// connection for its write; once one of the first two closes, the address gets a
// general connection again.
func TestOneAddressCannotHoldTheGeneralConnections(t *testing.T) {
	t.Parallel()
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Limits.MaxConns = 40
	cfg.Limits.ReservedConns = 4
	cfg.Limits.MaxConnsPerSource = 2
	n := testnode.Start(t, cfg)
	n.WaitReady()
	// The test's own client (waitReady) keeps connections from 127.0.0.1: the address
	// under test is 127.0.0.3.
	held3 := func() int {
		_, held := n.Conns.Held("127.0.0.3")
		return held
	}

	var held []net.Conn
	for range 2 {
		c := testnode.DialFrom(t, n, "127.0.0.3", testnode.HealthzKeepAlive)
		if resp, body := testnode.ReadAnswer(t, c, 2*time.Second); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("keep-alive healthz: %d close=%v %s", resp.StatusCode, resp.Close, body)
		}
		held = append(held, c)
	}
	write := "PUT /v1/apps/shop HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testnode.AdminToken + "\r\nContent-Length: 18\r\n\r\n{\"account\":\"acme\"}"
	// Without a token: the admin's or the ingress's passes the per-source cap
	// (httpapi's TestTheNodesTokensPassTheCapOfAnAddressTheyShare).
	anonWrite := "PUT /v1/apps/shop HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 18\r\n\r\n{\"account\":\"acme\"}"
	resp, body := testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.3", anonWrite), 2*time.Second)
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close || !strings.Contains(body, "maxConnsPerSource") {
		t.Errorf("a third connection's write from the same address: %d close=%v %s, want 503 naming maxConnsPerSource", resp.StatusCode, resp.Close, body)
	}
	poll := "GET /v1/ingress/routes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testnode.IngressToken + "\r\n\r\n"
	if resp, body := testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.3", poll), 2*time.Second); resp.StatusCode != 200 || !resp.Close {
		t.Errorf("a third connection's poll from the same address: %d close=%v %s, want 200 and closed", resp.StatusCode, resp.Close, body)
	}
	if resp, body := testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.2", write), 2*time.Second); resp.StatusCode/100 != 2 || resp.Close {
		t.Errorf("another address's write: %d close=%v %s, want it served on a general connection", resp.StatusCode, resp.Close, body)
	}
	held[0].Close()
	nodetest.WaitFor(t, 2*time.Second, "the held connection's slot freed", func() bool { return held3() == 1 })
	if resp, body := testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.3", write), 2*time.Second); resp.StatusCode/100 != 2 || resp.Close {
		t.Errorf("the address's write once it holds one connection: %d close=%v %s, want it served", resp.StatusCode, resp.Close, body)
	}
}

// Issue 25 item 6: a connection older than limits.connMaxAge ends with its next answer
// (Connection: close), however busy its client keeps it; under the age it stays open.
func TestAConnectionPastItsMaxAgeIsClosedAfterItsAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		age   time.Duration
		close bool
	}{{time.Hour, false}, {time.Nanosecond, true}} {
		cfg := testnode.Config(t, "vps-a", t.TempDir())
		cfg.Limits.ConnMaxAge = ptypes.Duration(tc.age)
		n := testnode.Start(t, cfg)
		n.WaitReady()
		c := testnode.DialFrom(t, n, "127.0.0.1", testnode.HealthzKeepAlive)
		resp, body := testnode.ReadAnswer(t, c, 2*time.Second)
		if resp.StatusCode != 200 || resp.Close != tc.close {
			t.Errorf("connMaxAge %s: %d close=%v %s, want close=%v", tc.age, resp.StatusCode, resp.Close, body, tc.close)
		}
		if tc.close && !testnode.ClosedWithin(c, time.Second) {
			t.Errorf("connMaxAge %s: the connection stayed open after Connection: close", tc.age)
		}
	}
}
