package traefikprovider

import (
	"strings"
	"testing"
)

const (
	epochA = "3f9a0c1e5b7d2a64"
	epochB = "0000000000000001"
)

// switchToSecond starts a provider on [first, second], takes first's configuration,
// then breaks first so the provider moves to second.
func switchToSecond(t *testing.T, start starter, first, second *fakeNode, watchWait string) *harness {
	t.Helper()
	cfg := testConfig(first.URL(), second.URL())
	if watchWait != "" {
		cfg.WatchWait = watchWait
	}
	h := start(t, cfg)
	want := first.Body()
	if got := h.next(t, wait); got != want {
		t.Fatalf("emitted %s, want the first node's %s", got, want)
	}
	first.WaitFor(t, "a held long-poll", wait, func(n *fakeNode) bool { return n.Waiting == 1 })
	first.SetMode(modeBroken)
	first.Srv.CloseClientConnections()
	return h
}

// A node a tick behind, reached after a switch, is not applied: the provider keeps what
// it has, long-polls past the older body, and applies the node once it moves on.
func TestOlderSerialIsNeverApplied(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		body0 := routerConfig("shop.example.com", "http://10.83.0.1:24000")
		body1 := routerConfig("shop.example.com", "http://10.83.0.1:24001")
		body2 := routerConfig("shop.example.com", "http://10.83.0.1:24002")
		first, second := newFakeNode(t, body1), newFakeNode(t, body0)
		first.SetBodySerial(body1, 5, epochA)
		second.SetBodySerial(body0, 4, epochA)

		h := switchToSecond(t, start, first, second, "")
		second.WaitFor(t, "a long-poll held past both bodies", wait, func(n *fakeNode) bool {
			return n.Waiting == 1 && len(n.Reqs) >= 2
		})
		h.none(t)
		reqs := second.Requests()
		if reqs[0].Status != 200 || reqs[0].IfNoneMatch != etagOf(body1) {
			t.Errorf("first request to the second node: %+v, want a 200 to If-None-Match %s", reqs[0], etagOf(body1))
		}
		if inm := reqs[len(reqs)-1].IfNoneMatch; !strings.Contains(inm, etagOf(body1)) || !strings.Contains(inm, etagOf(body0)) {
			t.Errorf("held long-poll asked If-None-Match %q, want both ETags", inm)
		}
		if c := h.logs.count("older than serial 5"); c != 1 {
			t.Errorf("%d log lines about the older node, want 1:\n%s", c, h.logs)
		}

		// It catches up to what was applied: nothing to emit, the poll stays held (the
		// provider took the answer and holds its next long-poll).
		asked := len(second.Requests())
		second.SetBodySerial(body1, 5, epochA)
		second.WaitFor(t, "the next held long-poll", wait, func(n *fakeNode) bool {
			return len(n.Reqs) > asked && n.Waiting == 1
		})
		h.none(t)

		// It moves on: emitted at once.
		second.SetBodySerial(body2, 6, epochA)
		if got := h.next(t, wait); got != body2 {
			t.Fatalf("emitted %s, want %s", got, body2)
		}
	})
}

// The same serial is not older: a node at the applied serial is applied, whatever its
// body; so is a node without the header (a legacy node), and a node of another epoch (a
// store the operator adopted).
func TestSameSerialLegacyNodeAndAnotherEpochAreApplied(t *testing.T) {
	body1 := routerConfig("shop.example.com", "http://10.83.0.1:24001")
	other := routerConfig("shop.example.com", "http://10.83.0.9:24009")
	for _, tc := range []struct {
		name string
		set  func(n *fakeNode)
	}{
		{"same serial", func(n *fakeNode) { n.SetBodySerial(other, 5, epochA) }},
		{"no header", func(n *fakeNode) { n.SetBody(other) }},
		{"another epoch", func(n *fakeNode) { n.SetBodySerial(other, 1, epochB) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachRuntime(t, func(t *testing.T, start starter) {
				first, second := newFakeNode(t, body1), newFakeNode(t, other)
				first.SetBodySerial(body1, 5, epochA)
				tc.set(second)
				h := switchToSecond(t, start, first, second, "")
				if got := h.next(t, wait); got != other {
					t.Fatalf("emitted %s, want %s", got, other)
				}
			})
		})
	}
}

// A 304 at a later serial confirms what was applied at that serial: a node behind it,
// though ahead of the serial the body came with, is not applied.
func TestConfirmationAtALaterSerialRaisesTheFloor(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		body1 := routerConfig("shop.example.com", "http://10.83.0.1:24001")
		body6 := routerConfig("shop.example.com", "http://10.83.0.1:24006")
		body7 := routerConfig("shop.example.com", "http://10.83.0.1:24007")
		first, second := newFakeNode(t, body1), newFakeNode(t, body6)
		first.SetBodySerial(body1, 5, epochA)
		second.SetBodySerial(body6, 6, epochA)

		cfg := testConfig(first.URL(), second.URL())
		cfg.WatchWait = "300ms"
		h := start(t, cfg)
		if got := h.next(t, wait); got != body1 {
			t.Fatalf("emitted %s, want %s", got, body1)
		}
		first.SetSerial(7) // the same revision, derived again at serial 7
		first.WaitFor(t, "a 304 at serial 7 and the next held long-poll", wait, func(n *fakeNode) bool {
			return len(n.Reqs) >= 3 && n.Reqs[1].Status == 304 && n.Waiting == 1
		})
		first.SetMode(modeBroken)
		first.Srv.CloseClientConnections()
		second.WaitFor(t, "a long-poll held at the second node", wait, func(n *fakeNode) bool {
			return n.Waiting == 1 && len(n.Reqs) >= 2
		})
		h.none(t)
		second.SetBodySerial(body7, 7, epochA)
		if got := h.next(t, wait); got != body7 {
			t.Fatalf("emitted %s, want %s", got, body7)
		}
	})
}

// A node that reaches the applied serial still serving the older body (it derives the
// same revision there, which wakes no long-poll) is applied then: the long-poll, held
// at most behindWait while behind (not WatchWait, 30s here), ends in a 304 at that
// serial, and the provider asks again without the older ETag.
func TestBehindNodeReachingTheSerialWithItsBodyIsApplied(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		body0 := routerConfig("shop.example.com", "http://10.83.0.1:24000")
		body1 := routerConfig("shop.example.com", "http://10.83.0.1:24001")
		first, second := newFakeNode(t, body1), newFakeNode(t, body0)
		first.SetBodySerial(body1, 5, epochA)
		second.SetBodySerial(body0, 4, epochA)

		h := switchToSecond(t, start, first, second, "")
		second.WaitFor(t, "a long-poll held past both bodies", wait, func(n *fakeNode) bool {
			return n.Waiting == 1 && len(n.Reqs) >= 2
		})
		h.none(t)
		second.SetSerial(5)
		if got := h.next(t, wait); got != body0 {
			t.Fatalf("emitted %s, want %s", got, body0)
		}
	})
}
