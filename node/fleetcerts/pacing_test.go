package fleetcerts

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/render/routing"
)

// pacedManager is one manager on a fresh store behind its own challenge server on
// 127.0.0.1, with a Pebble (validation on) whose HTTP-01 port is that server's.
// clock, when not nil, is the manager's clock; a manager without Options.Poll polls
// every 50 ms.
func pacedManager(t *testing.T, opt Options, clock func() time.Time) (*Manager, *pebbletest.Pebble) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := pebbletest.Start(t, pebbletest.Config{HTTPPort: ln.Addr().(*net.TCPAddr).Port})
	opt.Storage = &certmagic.FileStorage{Path: t.TempDir()}
	opt.CA, opt.Roots, opt.Email = p.Directory, p.CARoots, "ops@example.com"
	opt.RenewCheckInterval = time.Minute
	opt.PlatformDomains = []string{"apps.example.com"}
	opt.Log = testLogger(t)
	if opt.Poll == 0 {
		opt.Poll = 50 * time.Millisecond // a reconcile pass every second
	}
	m, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	if clock != nil {
		m.now = clock
	}
	startServing(t, m, ln, new(atomic.Int64))
	return m, p
}

func states(m *Manager) map[string][]string {
	out := map[string][]string{}
	for _, s := range m.Status() {
		out[s.State] = append(out[s.State], s.Name)
	}
	return out
}

// TestCustomDomainsArePacedByTheCustomBudget: with a custom budget of 2, claiming 5
// custom domains starts exactly 2 orders (Pebble issues 2 of them) and lists the other
// 3 as backlog, and they stay there across further reconcile passes within the hour;
// the API apex is ordered whatever the budget. Before the custom budget existed all 5
// were ordered at once.
func TestCustomDomainsArePacedByTheCustomBudget(t *testing.T) {
	const budget, extra = 2, 3
	m, p := pacedManager(t, Options{CustomBudget: budget, PlatformBudget: 0, Poll: time.Hour}, nil)
	doc := &routing.Document{V: routing.Version, API: &routing.API{Hosts: []string{"apps.example.com"}}}
	for i := range budget + extra {
		doc.Routes = append(doc.Routes, routing.Route{Host: fmt.Sprintf("c%d.example.org", i), Application: "app"})
	}
	m.Sync(doc)
	stepUntil(t, m, 90*time.Second, "the budget's names and the API apex valid", func() bool {
		return len(states(m)[StateValid]) == budget+1
	})
	// Several more reconcile passes: nothing else starts within the hour. Three of the
	// loop's budget lookups (every 20 polls).
	step(m, 61)
	st := states(m)
	if len(st[StateValid]) != budget+1 || len(st[StateBacklog]) != extra || len(st[StatePending])+len(st[StateFailed]) != 0 {
		t.Fatalf("states %v: want %d valid (the budget and the API apex), %d backlog", st, budget+1, extra)
	}
	if stateOf(m, "apps.example.com").State != StateValid {
		t.Fatalf("the API apex is not valid: %+v", stateOf(m, "apps.example.com"))
	}
	if issued := p.Issued(); len(issued) != budget+1 {
		t.Fatalf("Pebble issued %d certificates, want %d (the budget and the API apex)", len(issued), budget+1)
	}
	for _, n := range st[StateBacklog] {
		if s := stateOf(m, n); s.Attempts != 0 {
			t.Fatalf("backlogged %s was attempted: %+v", n, s)
		}
	}
}

// TestAFailingNameIsHeldOffAndNotReordered: a custom domain whose DNS points where
// nothing answers (Pebble's validation is refused) fails; after FailLimit failures in
// a row it is no longer managed (CertMagic would order again after 1 min, 2 min, ...:
// about eight orders in the first hour), is listed failed with nextAttempt at the end
// of the hold-off, is not ordered again within it, is ordered once when it ends, and
// the next hold-off is twice as long (capped at FailHoldMax). The manager's clock and
// loop are the test's: the hold-offs are exact.
func TestAFailingNameIsHeldOffAndNotReordered(t *testing.T) {
	const hold, holdMax = time.Hour, 90 * time.Minute
	clock := newTestClock()
	m, p := pacedManager(t, Options{CustomBudget: 10, FailLimit: 1, FailHold: hold, FailHoldMax: holdMax, Poll: time.Hour}, clock.Now)
	const name = "elsewhere.example.org"
	p.AddA(t, name, "127.0.0.3") // nothing listens there
	m.Sync(docWith(name))

	var s api.CertName
	stepUntil(t, m, 60*time.Second, "the first failure", func() bool {
		s = stateOf(m, name)
		return s.State == StateFailed && s.Attempts == 1
	})
	m.mu.Lock()
	_, managed := m.managed[name]
	m.mu.Unlock()
	if managed {
		t.Fatal("a name that failed FailLimit times is still managed: CertMagic goes on ordering it")
	}
	if want := clock.Now().Add(hold); s.NextAttempt == nil || !s.NextAttempt.Equal(want.UTC()) || s.LastError == "" {
		t.Fatalf("status after the first failure: %+v, want nextAttempt %s (%s ahead) and the error", s, want, hold)
	}
	// Within the hold-off: not taken on again, however many reconcile passes (two of
	// the loop's lookups at its start and two a second before its end). Taking it on is
	// the loop's own decision (managed, before CertMagic orders): checked after each.
	heldOff := func(attempts int) {
		t.Helper()
		for range 2 {
			step(m, 20)
			m.mu.Lock()
			_, managed := m.managed[name]
			m.mu.Unlock()
			if s := stateOf(m, name); managed || s.Attempts != attempts || s.State != StateFailed {
				t.Fatalf("within the hold-off at %s: managed %v, %+v; want %d attempts, failed", clock.Now(), managed, s, attempts)
			}
		}
	}
	heldOff(1)
	clock.Advance(hold - time.Second)
	heldOff(1)
	// At its end: one more order, which fails and holds it off twice as long (capped).
	clock.Advance(time.Second)
	stepUntil(t, m, 60*time.Second, "the attempt after the hold-off", func() bool {
		s = stateOf(m, name)
		return s.State == StateFailed && s.Attempts == 2
	})
	if want := clock.Now().Add(holdMax); s.NextAttempt == nil || !s.NextAttempt.Equal(want.UTC()) {
		t.Fatalf("status after the second failure: %+v, want nextAttempt %s (%s doubled, capped at %s)", s, want, hold, holdMax)
	}
	heldOff(2)
	clock.Advance(holdMax - time.Second)
	heldOff(2)
	if n := len(p.Issued()); n != 0 || p.Orders() != 2 {
		t.Fatalf("Pebble issued %d certificates on %d orders for a name pointing nowhere, want none on 2", n, p.Orders())
	}
}

// testClock is a manager's clock that moves only when the test advances it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestRetriesCountAgainstTheBudget: CertMagic retries a failed obtain on its own (1 min
// later, then 2, …); each retry is one more order on the fleet's account, so it takes a
// slot of the name's budget as it starts, and the names taken on next wait for it. The
// first attempt was paid for when the name was taken on; the API apex and renewals (a
// certificate held) pay nothing. Driven through the manager's event handler, with the
// events CertMagic emits (the retry interval is not settable from outside CertMagic).
func TestRetriesCountAgainstTheBudget(t *testing.T) {
	m, err := New(Options{Storage: &certmagic.FileStorage{Path: t.TempDir()}, PlatformDomains: []string{"apps.example.com"}, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.Sync(&routing.Document{V: routing.Version, API: &routing.API{Hosts: []string{"apps.example.com"}},
		Routes: []routing.Route{{Host: "c.example.org", Application: "a"}, {Host: "s.apps.example.com", Application: "a"}, {Host: "r.example.org", Application: "a"}}})
	m.mu.Lock()
	for _, n := range []string{"c.example.org", "s.apps.example.com", "apps.example.com", "r.example.org"} {
		m.names[n] = &nameState{}
	}
	m.names["r.example.org"].cert = &heldCert{notAfter: time.Now().Add(time.Hour)}
	m.mu.Unlock()
	ev := func(name string) {
		if err := m.onEvent(t.Context(), "cert_obtaining", map[string]any{"identifier": name}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		ev("c.example.org")
		ev("s.apps.example.com")
		ev("apps.example.com")
		ev("r.example.org")
	}
	m.mu.Lock()
	custom, platform := len(m.customAdmitted), len(m.admitted)
	m.mu.Unlock()
	if custom != 2 || platform != 2 {
		t.Fatalf("after 3 attempts each: custom slots %d, platform slots %d; want 2 and 2 (the retries of c and s only)", custom, platform)
	}
}

// TestNamesThatFailedBeforeDoNotTakeTheBudgetFirst: names were taken on in sorted
// order, so names that had failed (a tenant's custom domains whose DNS points elsewhere)
// and sort first took the custom budget again every time their hold-off ended, and the
// other accounts' new names waited behind them: 1 000 such names cost a 50-an-hour
// budget 20 hours of every day. A name never held off is now taken on before one that
// was, fewer hold-offs first.
func TestNamesThatFailedBeforeDoNotTakeTheBudgetFirst(t *testing.T) {
	m := startedManager(t, Options{Storage: &certmagic.FileStorage{Path: t.TempDir()}, CustomBudget: 2, Poll: time.Hour})
	failed := []string{"a1.example.org", "a2.example.org", "a3.example.org"}
	m.mu.Lock()
	for i, n := range failed {
		m.names[n] = &nameState{holds: 1 + i, heldUntil: time.Now().Add(-time.Second)} // hold-offs over
	}
	m.mu.Unlock()
	m.Sync(docWith(append(failed, "z.example.org")...))
	m.mu.Lock()
	_, fresh := m.managed["z.example.org"]
	_, once := m.managed["a1.example.org"]
	_, twice := m.managed["a2.example.org"]
	m.mu.Unlock()
	if !fresh || !once || twice {
		t.Fatalf("budget 2: z (never failed) taken on %v, a1 (held once) %v, a2 (held twice) %v; want z and a1", fresh, once, twice)
	}
}
