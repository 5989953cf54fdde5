package fleetwrite

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// TestConcurrentWritesAreChargedExactlyTheirRoutingChanges (hostile round five): 8
// writers of one tenant, each 60 writes chosen among a readiness flip, a move within
// the pair (ready or not), a port another application holds (refused after the
// charge: refunded), through one registry, with a budget too large to
// refuse anything. What the account's bucket lost must be exactly the routing changes
// the registry wrote (the routed port, read under its lock at every write): one more
// is a charge no change paid for (a double charge, a lost refund); one fewer is a
// change that went free (a refund farmed, an uncharged write). Fails if SetInstance
// skips its refund for a write that changed nothing routed (ch != rerouted), or
// refunds one that did, or if the registry lets a write read as free change a route
// uncharged. Every write's read is followed by another registry write before its own
// (landedBetween), unless every other writer is waiting to do the same.
func TestConcurrentWritesAreChargedExactlyTheirRoutingChanges(t *testing.T) {
	ctx := context.Background()
	const burst = 100000
	bf := newBudgetFixture(t, 1, burst, 0)
	w := bf.ws[0]
	evil, _, _, err := w.PutApp(ctx, admin, "evil", fleet.App{Account: "mallory", Placement: []string{"vps-a"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	other, _, _, err := w.PutApp(ctx, admin, "other", fleet.App{Account: "alice", Placement: []string{"vps-a"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenFor(evil, fleet.RoleInstance)
	oi, _, err := w.AllocateInstance(ctx, tokenFor(other, fleet.RoleInstance), "other")
	if err != nil {
		t.Fatal(err)
	}
	const writers = 8
	lb := newLandedBetween(writers)
	w.afterInstanceRead = lb.wait
	lost := &countingHandler{msg: "refunding a routing change that wrote nothing"}
	w.log = slog.New(lost)
	var routes []int // the routed port at the start of every registry write
	now := w.inst.now
	w.inst.now = func() time.Time {
		routes = append(routes, routed(w.inst.state.Instances["evil"], w.inst.state.Instances["evil"].AppID == evil.ID)) // under the lock
		lb.landed()
		return now()
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer lb.done()
			for i := range 60 {
				in, _, err := w.AllocateInstance(ctx, tok, "evil")
				if err != nil {
					t.Errorf("allocate: %v", err)
					return
				}
				switch (g*7 + i*3) % 5 {
				case 0, 1:
					_, err = w.SetInstance(ctx, tok, "evil", nil, (g+i)%2 == 0)
				case 2:
					p := in.Ports[0]
					if p == in.Port {
						p = in.Ports[1]
					}
					_, err = w.SetInstance(ctx, tok, "evil", &p, true)
				case 3:
					p := in.Ports[1]
					_, err = w.SetInstance(ctx, tok, "evil", &p, false)
				case 4:
					p := oi.Port
					if _, err = w.SetInstance(ctx, tok, "evil", &p, true); err == nil {
						t.Errorf("evil took other's port %d", p)
					}
					err = nil
				}
				if err != nil && !isBudget(err) { // contention: 8 lost compare-and-swaps are a 429
					t.Errorf("write: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	final, ok := w.inst.Get("evil")
	routes = append(routes, routed(final, ok && final.AppID == evil.ID))
	changes := 0
	for i := 1; i < len(routes); i++ {
		if routes[i] != routes[i-1] {
			changes++
		}
	}
	obj, err := bf.st.Get(ctx, RouteBudgetKey("mallory"))
	if err != nil {
		t.Fatal(err)
	}
	var b routeBucket
	if err := json.Unmarshal(obj.Value, &b); err != nil {
		t.Fatal(err)
	}
	spent := burst - b.Tokens
	// A refund that lost its compare-and-swap 8 times is lost (logged): the account's own
	// contention overcharges it, never another's, never in its favour.
	t.Logf("%d routing changes written, %g charged, %d refunds lost to contention", changes, spent, lost.n.Load())
	if changes == 0 || spent != float64(changes)+float64(lost.n.Load()) {
		t.Fatalf("%d routing changes written, %g charged to the account (%d refunds lost)", changes, spent, lost.n.Load())
	}
	if _, err := bf.st.Get(ctx, RouteBudgetKey("alice")); err == nil {
		t.Error("alice's bucket was written: a charge went to the wrong account")
	}
}

// landedBetween holds a write between its read of the instance and its charge until
// another registry write has landed (landed, called under the registry's lock), or
// until every writer still running waits there too, when one of them goes on: the
// interleaving the charge must survive happens at every write, not by chance.
type landedBetween struct {
	mu              sync.Mutex
	cond            *sync.Cond
	writes          int // registry writes so far
	active, waiting int // writers running, and waiting in wait
}

func newLandedBetween(writers int) *landedBetween {
	lb := &landedBetween{active: writers}
	lb.cond = sync.NewCond(&lb.mu)
	return lb
}

func (lb *landedBetween) wait() {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	seen := lb.writes
	lb.waiting++
	for lb.writes == seen && lb.waiting < lb.active {
		lb.cond.Wait()
	}
	lb.waiting--
}

func (lb *landedBetween) landed() {
	lb.mu.Lock()
	lb.writes++
	lb.cond.Broadcast()
	lb.mu.Unlock()
}

// done is a writer's end: it will land nothing more.
func (lb *landedBetween) done() {
	lb.mu.Lock()
	lb.active--
	lb.cond.Broadcast()
	lb.mu.Unlock()
}

// countingHandler counts the records logged with message msg.
type countingHandler struct {
	msg string
	n   atomic.Int64
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
