package fleetwrite

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// budgetFixture is n writers of one store (n nodes of one fleet) with a routing change
// budget of burst changes refilled perMinute, on a clock the test drives.
type budgetFixture struct {
	st      store.Store
	ws      []*Writer
	clock   time.Time
	mu      sync.Mutex
	refused []string
}

func newBudgetFixture(t *testing.T, nodes, burst int, perMinute float64) *budgetFixture {
	t.Helper()
	f0 := newFixture(t)
	bf := &budgetFixture{st: f0.st, clock: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)}
	for i := range nodes {
		reg, err := OpenRegistry(filepath.Join(t.TempDir(), "instances.json"), 24000, 24009, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		w := New(Config{
			Node:            "vps-" + string(rune('a'+i)),
			PlatformDomains: []string{"apps.example.com"},
			APIPort:         7400,
			RouteBudget:     RouteBudget{Burst: burst, PerMinute: perMinute},
			OnRouteRefused: func(c string) {
				bf.mu.Lock()
				bf.refused = append(bf.refused, c)
				bf.mu.Unlock()
			},
		}, f0.st, &store.Identity{}, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		w.now = func() time.Time { return bf.clock }
		bf.ws = append(bf.ws, w)
	}
	return bf
}

// evil puts mallory's application evil, placed on w's node, and allocates its
// instance (not ready: it routes nothing and is charged nothing) with a token of roles;
// it returns the token and the instance.
func evil(t *testing.T, w *Writer, roles ...string) (Actor, Instance) {
	t.Helper()
	a, _, _, err := w.PutApp(context.Background(), admin, "evil", fleet.App{Account: "mallory", Placement: []string{w.cfg.Node}}, "")
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenFor(a, roles...)
	inst, _, err := w.AllocateInstance(context.Background(), tok, "evil")
	if err != nil {
		t.Fatal(err)
	}
	return tok, inst
}

func tokenFor(a fleet.App, roles ...string) Actor {
	return Actor{Token: fleet.TokenRecord{ID: "t-" + a.Name, Account: a.Account, App: a.Name, AppID: a.ID, Roles: roles}}
}

func isBudget(err error) bool {
	var rb *ErrRouteBudget
	return errors.As(err, &rb)
}

// The budget is the account's, fleet-wide: readiness flips alternated through two
// writers of one store (two nodes) are refused on both once burst changes are spent,
// whatever node made them; a no-op costs nothing; time refills it; the admin is never
// refused; another account is untouched.
func TestRouteBudgetIsSharedByEveryNodeOfTheFleet(t *testing.T) {
	ctx := context.Background()
	bf := newBudgetFixture(t, 2, 4, 6) // 4 at once, one every 10 s
	a, b := bf.ws[0], bf.ws[1]
	evil, _, _, err := a.PutApp(ctx, admin, "evil", fleet.App{Account: "mallory", Placement: []string{"vps-a", "vps-b"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	shop, _, _, err := a.PutApp(ctx, admin, "shop", fleet.App{Account: "acme"}, "")
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenFor(evil, fleet.RoleInstance)
	for _, w := range bf.ws {
		if _, _, err := w.AllocateInstance(ctx, tok, "evil"); err != nil { // not ready: routes nothing, free
			t.Fatal(err)
		}
	}
	ready := map[*Writer]bool{}
	flip := func(w *Writer) error {
		_, err := w.SetInstance(ctx, tok, "evil", nil, !ready[w])
		if err == nil {
			ready[w] = !ready[w]
		}
		return err
	}
	for i := range 4 {
		w := bf.ws[i%2]
		if err := flip(w); err != nil {
			t.Fatalf("change %d of a budget of 4: %v", i+1, err)
		}
		// The same state again changes nothing routed: free, however often.
		for range 3 {
			if _, err := w.SetInstance(ctx, tok, "evil", nil, ready[w]); err != nil {
				t.Fatalf("a no-op after change %d: %v", i+1, err)
			}
		}
	}
	for _, w := range bf.ws {
		err := flip(w)
		var rb *ErrRouteBudget
		if !errors.As(err, &rb) {
			t.Fatalf("%s: a fifth routing change of a budget of 4: %v, want ErrRouteBudget", w.cfg.Node, err)
		}
		if rb.Account != "mallory" || rb.Change != "instance" || rb.RetryAfter <= 0 || rb.RetryAfter > 10*time.Second {
			t.Errorf("%s: refusal %+v", w.cfg.Node, rb)
		}
	}
	if len(bf.refused) != 2 || bf.refused[0] != "instance" {
		t.Errorf("OnRouteRefused calls %v, want two of instance", bf.refused)
	}
	// A refused change changed nothing.
	if inst, _ := a.inst.Get("evil"); inst.Ready != ready[a] {
		t.Errorf("a refused change was made: ready %v", inst.Ready)
	}
	// The admin is never refused, and spends nothing.
	for i := range 6 {
		if _, err := bf.ws[i%2].SetInstance(ctx, admin, "evil", ptr(24000+i%2), i%2 == 0); err != nil {
			t.Fatalf("admin change %d: %v", i, err)
		}
	}
	// Another account has its own budget.
	allocate(t, a, tokenFor(shop, fleet.RoleInstance), "shop")
	if _, err := a.SetInstance(ctx, tokenFor(shop, fleet.RoleInstance), "shop", nil, true); err != nil {
		t.Fatalf("another account's change refused: %v", err)
	}
	// 10 s refill one change (6 a minute), for the fleet, not one per node.
	bf.clock = bf.clock.Add(10 * time.Second)
	ready[a], ready[b] = mustInst(t, a).Ready, mustInst(t, b).Ready
	if err := flip(b); err != nil {
		t.Fatalf("after the refill of one: %v", err)
	}
	if err := flip(a); !isBudget(err) {
		t.Fatalf("a second change after the refill of one: %v, want ErrRouteBudget", err)
	}
}

func mustInst(t *testing.T, w *Writer) fleet.Instance {
	t.Helper()
	i, ok := w.inst.Get("evil")
	if !ok {
		t.Fatal("no instance")
	}
	return i
}

// Port moves are routing changes too (within the pair as outside it); a release of a
// ready instance withdraws a route; path maps spend the budget and a republish of the
// same map does not.
func TestRouteBudgetCountsPortMovesReleasesAndPathMaps(t *testing.T) {
	ctx := context.Background()
	bf := newBudgetFixture(t, 1, 3, 6)
	w := bf.ws[0]
	tok, inst := evil(t, w, fleet.RoleInstance, fleet.RolePublish)
	claim(t, w, "evil", "evil.example.org")
	// A not-ready instance's port routes nothing: moving it is free.
	if _, err := w.SetInstance(ctx, tok, "evil", ptr(inst.Ports[1]), false); err != nil {
		t.Fatal(err)
	}
	if _, err := w.SetInstance(ctx, tok, "evil", ptr(inst.Ports[0]), true); err != nil { // 1
		t.Fatal(err)
	}
	if _, err := w.SetInstance(ctx, tok, "evil", ptr(inst.Ports[1]), true); err != nil { // 2
		t.Fatal(err)
	}
	paths := map[string]string{"api": "evil.apps.example.com"}
	if _, _, err := w.PublishPaths(ctx, tok, "evil", "evil.example.org", paths, ""); err != nil { // 3
		t.Fatal(err)
	}
	if _, _, err := w.PublishPaths(ctx, tok, "evil", "evil.example.org", paths, ""); err != nil {
		t.Fatalf("a republish of the same map: %v", err)
	}
	if _, _, err := w.PublishPaths(ctx, tok, "evil", "evil.example.org", map[string]string{}, ""); !isBudget(err) {
		t.Fatalf("a path map change past the budget: %v, want ErrRouteBudget", err)
	}
	if c, _, _ := w.Paths(ctx, admin, "evil", "evil.example.org"); len(c.Paths) != 1 {
		t.Errorf("a refused publish wrote: %v", c.Paths)
	}
	if _, err := w.SetInstance(ctx, tok, "evil", ptr(inst.Ports[0]), true); !isBudget(err) {
		t.Fatalf("a move within the pair past the budget: %v, want ErrRouteBudget", err)
	}
	if err := w.ReleaseInstance(ctx, tok, "evil"); !isBudget(err) {
		t.Fatalf("releasing a ready instance past the budget: %v, want ErrRouteBudget", err)
	}
	if _, ok := w.inst.Get("evil"); !ok {
		t.Error("a refused release released")
	}
	// A change that fails for its own reasons (a port held by another application)
	// gives its charge back.
	bf.clock = bf.clock.Add(10 * time.Second)
	shop, _, _, _ := w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme"}, "")
	shopInst, _, err := w.AllocateInstance(ctx, tokenFor(shop, fleet.RoleInstance), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.SetInstance(ctx, tok, "evil", ptr(shopInst.Port), true); !errors.Is(err, ErrPortTaken) {
		t.Fatalf("moving onto another application's port: %v", err)
	}
	if _, err := w.SetInstance(ctx, tok, "evil", nil, false); err != nil {
		t.Fatalf("the change refunded by a failed one: %v", err)
	}
}

// A bucket object that does not decode (a hand edit, a bad restore) is treated as a
// full bucket and rewritten: it never locks the account out. Nor does a bucket dated
// far in the future (a node's clock years ahead): it refills from now.
func TestCorruptRouteBudgetIsTreatedAsFullAndRewritten(t *testing.T) {
	ctx := context.Background()
	bf := newBudgetFixture(t, 1, 2, 6)
	w := bf.ws[0]
	tok, _ := evil(t, w, fleet.RoleInstance)
	ready := false
	for _, garbage := range []string{`{"tokens":`, `[]`, `{"tokens":"x"}`, `{}`, "\x00\xff"} {
		if _, err := bf.st.Put(ctx, RouteBudgetKey("mallory"), []byte(garbage), store.Condition{}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 { // the whole burst of 2: the corrupt object counted as full
			ready = !ready
			if _, err := w.SetInstance(ctx, tok, "evil", nil, ready); err != nil {
				t.Fatalf("bucket %q, change %d: %v", garbage, i+1, err)
			}
		}
		if _, err := w.SetInstance(ctx, tok, "evil", nil, !ready); !isBudget(err) {
			t.Fatalf("bucket %q: a third change: %v, want ErrRouteBudget (the rewritten bucket is spent)", garbage, err)
		}
	}
	future := `{"tokens":0,"at":"9999-01-01T00:00:00Z"}`
	if _, err := bf.st.Put(ctx, RouteBudgetKey("mallory"), []byte(future), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.SetInstance(ctx, tok, "evil", nil, !ready); !isBudget(err) {
		t.Fatalf("an empty bucket dated in the future: %v, want ErrRouteBudget", err)
	}
	bf.clock = bf.clock.Add(10 * time.Second)
	if _, err := w.SetInstance(ctx, tok, "evil", nil, !ready); err != nil {
		t.Fatalf("an empty bucket dated in the year 9999, 10 s later: %v (locked out until then)", err)
	}
}

// A budget that cannot be read charges nothing: while the store is unreachable no node
// publishes, and this node's own instances must keep working.
func TestAnUnreadableRouteBudgetLetsTheChangeThrough(t *testing.T) {
	ctx := context.Background()
	bf := newBudgetFixture(t, 1, 1, 6)
	w := bf.ws[0]
	tok, _ := evil(t, w, fleet.RoleInstance)
	w.st = &hooks{Store: w.st, get: func(key string) error {
		if strings.HasPrefix(key, prefixRouteBudgets) {
			return store.ErrUnavailable
		}
		return nil
	}}
	for i := range 3 {
		if _, err := w.SetInstance(ctx, tok, "evil", nil, i%2 == 0); err != nil {
			t.Fatalf("change %d with the budget unreadable: %v", i+1, err)
		}
	}
}

// TestADeployOfATenPlacementAppPassesTheDefaultRouteBudget: the defaults must never
// refuse an ordinary tenant. A 10-placement application's first rollout (an instance
// made ready on each node), a deploy that drains each node then moves it to the idle
// port of its pair, and the same drained rollback (50 routing changes, back to back,
// through 10 nodes of one store) all pass at DefaultWrites' writes.routeBurst and
// writes.routePerMinute.
func TestADeployOfATenPlacementAppPassesTheDefaultRouteBudget(t *testing.T) {
	ctx := context.Background()
	def := DefaultWrites()
	ws := newBudgetFixture(t, 10, def.RouteBurst, def.RoutePerMinute).ws // no refill: the clock stands still
	var placement []string
	for _, w := range ws {
		placement = append(placement, w.cfg.Node)
	}
	app, _, _, err := ws[0].PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Placement: placement}, "")
	if err != nil {
		t.Fatal(err)
	}
	tok := Actor{Token: fleet.TokenRecord{ID: "ci", Account: "acme", App: "shop", AppID: app.ID, Roles: []string{fleet.RoleInstance}}}
	pairs := make([][2]int, len(ws))
	for i, w := range ws {
		inst, _, err := w.AllocateInstance(ctx, tok, "shop")
		if err != nil {
			t.Fatal(err)
		}
		pairs[i] = inst.Ports
		if _, err := w.SetInstance(ctx, tok, "shop", &inst.Port, true); err != nil {
			t.Fatalf("first rollout on %s: %v", w.Instances()[0].Node, err)
		}
	}
	for step, to := range []int{1, 0} { // deploy to the idle member, then roll back
		for i, w := range ws {
			if _, err := w.SetInstance(ctx, tok, "shop", nil, false); err != nil {
				t.Fatalf("step %d, draining node %d: %v", step, i, err)
			}
			if _, err := w.SetInstance(ctx, tok, "shop", &pairs[i][to], true); err != nil {
				t.Fatalf("step %d, moving node %d within its pair: %v", step, i, err)
			}
		}
	}
}
