package node_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
)

// An anonymous client cannot hold a node's stop beyond drainBudget plus the header
// timeout (itself under Shutdown's 10 s): it fills the connection cap with connections
// that send nothing, dribbles a request a byte at a time, and floods connection attempts
// while the node stops. The stop still ends in time, and the requests already queued on
// the socket behind the full cap are answered (the limiter's 503), none reset or left
// unanswered.
func TestAnAttackerCannotHoldTheStop(t *testing.T) {
	cfg := testConfig(t, "vps-a", t.TempDir())
	cfg.Limits.MaxConns = 16
	cfg.Limits.ReservedConns = 4
	cfg.Limits.HeaderTimeout = ptypes.Duration(3 * time.Second)
	n := startNode(t, cfg)
	n.WaitReady()
	http.DefaultClient.CloseIdleConnections()
	addr := strings.TrimPrefix(n.URL, "http://")
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The cap, filled with silent connections and one that dribbles.
	for range 15 {
		dial()
	}
	slow := dial()
	ctx, stopAttack := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopAttack()
	wg.Go(func() {
		req := "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		pace := time.NewTicker(50 * time.Millisecond) // the attack itself: a byte every 50 ms of real time
		defer pace.Stop()
		for i := 0; ; i = (i + 1) % len(req) {
			if _, err := slow.Write([]byte{req[i]}); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-pace.C:
			}
		}
	})
	// The limiter finds the cap held (acceptWait): the next connection is answered its
	// 503 and closed.
	probe := dial()
	_ = probe.SetDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(probe), nil)
	if err != nil {
		t.Fatalf("a connection beyond the held cap: %v, want the limiter's 503", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a connection beyond the held cap: %s, want the limiter's 503", resp.Status)
	}
	// Requests queued behind the full cap.
	var queued []net.Conn
	for i := range 8 {
		c := dial()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := fmt.Fprintf(c, "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(i, err)
		}
		queued = append(queued, c)
	}
	// The flood: connection attempts through the stop.
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
					c.Close()
				}
			}
		})
	}
	start := time.Now()
	n.Cancel()
	select {
	case <-n.Exited():
		if err := n.Err(); err != nil {
			t.Logf("Run: %v", err)
		}
	case <-time.After(node.DrainBudget + 10*time.Second + 2*time.Second):
		t.Fatalf("the stop still runs %s after it began", time.Since(start))
	}
	// No tighter bound asserted: the stop's length beyond its budgets is the machine's
	// speed (about drainBudget plus the rest of the dribbler's header timeout, 3.1 s on a
	// quiet machine); what an attacker must not do is hold it past them, checked above.
	took := time.Since(start)
	stopAttack()
	for i, c := range queued {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("request %d, queued behind the full cap at the stop: %v, want an answer", i, err)
			continue
		}
		resp.Body.Close()
		if i == 0 {
			t.Logf("queued request %d: %s", i, resp.Status)
		}
	}
	// The queued requests are answered because the stop drains the socket: a harness
	// whose listener hid it (testnode's connection counter, until it forwarded
	// SyscallConn) made the stop only wait, and this test flaky (what it reset depended on
	// the machine's speed).
	if strings.Contains(n.Logs.String(), "not draining the API's socket") {
		t.Error("the stop did not drain the API's socket")
	}
	t.Logf("the stop took %s; its log: %s", took, n.Logs.String())
}
