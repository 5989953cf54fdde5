package node

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
)

// Hostile round six: the applied probe's callback comes from the Traefik that serves
// the body, through the same address as everything that Traefik forwards to the node
// (the public apex's internet clients included). An anonymous flood through the apex
// that holds that address's general connections (limits.maxConnsPerSource), or the
// node's whole general part, must not refuse the callback: it is Traefik's own traffic,
// a GET without a body, verified by its MAC without a store read, like a health probe.
// Refused, ?wait=applied never answered 200 for that ingress while the flood lasted
// (202 at its timeout, every write). A forged callback on the reserve is a 404 (and the
// connection closes), like any other request the reserve serves.
func TestAppliedCallbackIsServedFromTheConnectionReserve(t *testing.T) {
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	cfg.Limits.MaxConns = 40
	cfg.Limits.ReservedConns = 4
	cfg.Limits.MaxConnsPerSource = 2
	n := startNode(t, cfg)
	n.waitReady()
	_, _, cb := probePoll(t, n, "edge-p")
	if cb == "" {
		t.Fatal("no callback in the probe body")
	}
	// 127.0.0.3 is the Traefik: the flood it forwards holds its general connections.
	for range 2 {
		c := dialFrom(t, n, "127.0.0.3", healthzKeepAlive)
		if resp, body := readAnswer(t, c, 2*time.Second); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("keep-alive healthz: %d close=%v %s", resp.StatusCode, resp.Close, body)
		}
	}
	// A write from that address is refused (the reserve is not for it)...
	write := "PUT /v1/apps/shop HTTP/1.1\r\nHost: node\r\nAuthorization: Bearer " + testAdminToken + "\r\nContent-Length: 18\r\n\r\n{\"account\":\"acme\"}"
	if resp, body := readAnswer(t, dialFrom(t, n, "127.0.0.3", write), 2*time.Second); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a write past the per-source cap: %d %s, want 503", resp.StatusCode, body)
	}
	// ...and so is a forged callback's neighbour that is no route of the reserve.
	other := "GET /v1/ingress/appliedx/a/b/c HTTP/1.1\r\nHost: node\r\n\r\n"
	if resp, body := readAnswer(t, dialFrom(t, n, "127.0.0.3", other), 2*time.Second); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("an anonymous non-callback path past the per-source cap: %d %s, want 503", resp.StatusCode, body)
	}
	// A forged callback: 404, closed.
	forged := strings.TrimSuffix(cb, cb[len(cb)-4:]) + "0000"
	if forged == cb {
		forged = strings.TrimSuffix(cb, cb[len(cb)-4:]) + "1111"
	}
	resp, body := readAnswer(t, dialFrom(t, n, "127.0.0.3", "GET "+forged+" HTTP/1.1\r\nHost: node\r\n\r\n"), 2*time.Second)
	if resp.StatusCode != http.StatusNotFound || !resp.Close {
		t.Errorf("a forged callback past the per-source cap: %d close=%v %s, want 404 and closed", resp.StatusCode, resp.Close, body)
	}
	// The real callback: recorded, and the ingress is current.
	resp, body = readAnswer(t, dialFrom(t, n, "127.0.0.3", "GET "+cb+" HTTP/1.1\r\nHost: node\r\n\r\n"), 2*time.Second)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "recorded") || !resp.Close {
		t.Fatalf("the callback past the per-source cap: %d close=%v %s, want 200 recorded (closed)", resp.StatusCode, resp.Close, body)
	}
	waitFor(t, 2*time.Second, "edge-p current after its callback", func() bool {
		return ingressesOf(t, n)["edge-p"].State == "current"
	})
	// With a body, a callback is no callback: refused on the reserve.
	withBody := "GET " + cb + " HTTP/1.1\r\nHost: node\r\nContent-Length: 2\r\n\r\n{}"
	if resp, body := readAnswer(t, dialFrom(t, n, "127.0.0.3", withBody), 2*time.Second); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a callback with a body past the per-source cap: %d %s, want 503", resp.StatusCode, body)
	}
	_ = api.PathIngressApplied
}
