package ingress

// Reports shared between nodes through the store: two or more books (one per node) over
// one directory store, stepped by the test on one virtual clock (a poll is Begin and
// End, the node's flush is Flush at now). The backends' conditional writes are proven
// equal by storetest; these run on the directory store.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

// fleetClock is the virtual clock of the nodes of a test.
type fleetClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFleetClock() *fleetClock {
	return &fleetClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fleetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fleetClock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// fleetMark is what the nodes of a test know and publish (every node the same): the
// store serial known, the serial the published document is known to be derived from,
// its revision, and the revisions published to ?group= selections (a selection not set
// is served the whole document's).
type fleetMark struct {
	known, published atomic.Uint64
	rev              atomic.Value // string
	groups           sync.Map     // selection → revision
}

func newFleetMark(serial uint64, revision string) *fleetMark {
	m := &fleetMark{}
	m.set(serial, revision)
	return m
}

// set is a pass that took serial and published revision.
func (m *fleetMark) set(serial uint64, revision string) {
	m.rev.Store(revision)
	m.published.Store(serial)
	m.known.Store(serial)
}

func (m *fleetMark) groupRevision(groups string) string {
	if r, ok := m.groups.Load(groups); ok {
		return r.(string)
	}
	return m.rev.Load().(string)
}

// lostAfterTest is the reports tests' ingresses.lostAfter (a refresh every 500ms).
const lostAfterTest = 2 * time.Second

// nodeBook is the book of node self over st, with the reports tests' settings
// (lostAfter 2s, forgetAfter 1h) on clock c, knowing and publishing m.
func nodeBook(st store.Store, self string, c *fleetClock, m *fleetMark) *Book {
	b := New(Options{Store: st, Log: slog.New(slog.DiscardHandler), Self: self,
		Config:        Config{LostAfter: ptypes.Duration(lostAfterTest), ForgetAfter: ptypes.Duration(time.Hour), MaxTracked: 256},
		Known:         func() (uint64, string) { return m.known.Load(), "" },
		Current:       func() (string, uint64) { return m.rev.Load().(string), m.published.Load() },
		GroupRevision: m.groupRevision})
	b.Now = c.Now
	return b
}

func dirStore(t *testing.T) store.Store {
	t.Helper()
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// pluginPoll is one poll of a provider plugin named name reporting serial and revision
// to b (a 304 or a 200: a plugin's report is what it applied).
func pluginPoll(t *testing.T, b *Book, name string, serial uint64, revision string) {
	t.Helper()
	p, why := b.Begin(Report{Name: name, Kind: api.KindPlugin, Serial: serial, Revision: revision})
	if p == nil {
		t.Fatalf("%s's report refused: %s", name, why)
	}
	b.End(p, nil)
}

// storedReport reads an ingress's object from the store.
func storedReport(t *testing.T, st store.Store, name string) Report {
	t.Helper()
	obj, err := st.Get(context.Background(), Prefix+name+".json")
	if err != nil {
		t.Fatalf("reading %s's report: %v", name, err)
	}
	var rep Report
	if err := json.Unmarshal(obj.Value, &rep); err != nil {
		t.Fatalf("%s's report %s: %v", name, obj.Value, err)
	}
	return rep
}

// listed is b's fleet view (read from the store now) by name.
func listed(t *testing.T, b *Book) map[string]api.Ingress {
	t.Helper()
	out := map[string]api.Ingress{}
	for _, in := range b.Fleet(t.Context(), 0).Ingresses {
		out[in.Name] = in
	}
	return out
}

// A report is stored by the node its ingress polls, read by every other node, and never
// moves the store serial (else applying a serial would make a new one); an ingress that
// stops polling is shown lost by the other node once lostAfter has passed.
func TestIngressReportsAreSharedAndNeverMoveTheSerial(t *testing.T) {
	st := dirStore(t)
	serial, err := store.BumpSerial(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	c, m := newFleetClock(), newFleetMark(serial, rev('a'))
	a, b := nodeBook(st, "vps-a", c, m), nodeBook(st, "vps-b", c, m)

	pluginPoll(t, a, "edge-1", serial, rev('a'))
	a.Flush(t.Context(), c.Now())
	if stored := storedReport(t, st, "edge-1"); stored.Serial != serial || stored.Node != "vps-a" || stored.Kind != api.KindPlugin {
		t.Errorf("stored report %+v, want a plugin at serial %d from vps-a", stored, serial)
	}
	in, ok := listed(t, b)["edge-1"]
	if !ok || in.State != "current" || in.Kind != api.KindPlugin || in.Node != "vps-a" || in.Served != nil ||
		in.Applied == nil || in.Applied.Serial != serial || in.Applied.Revision != rev('a') || in.Behind != 0 {
		t.Errorf("b's view of edge-1 = %+v, want a current plugin polling vps-a, applied serial %d revision %s, behind 0", in, serial, rev('a'))
	}

	// Polls every 25 ms for 3 s, flushed every MinWriteGap: the report is rewritten
	// (refreshed), the serial never moves.
	first := storedReport(t, st, "edge-1").Seen
	for i := 1; i <= 120; i++ {
		now := c.Add(MinWriteGap / 10)
		pluginPoll(t, a, "edge-1", serial, rev('a'))
		if i%10 == 0 {
			a.Flush(t.Context(), now)
		}
	}
	if last := storedReport(t, st, "edge-1").Seen; !last.After(first.Add(lostAfterTest)) {
		t.Errorf("edge-1's report not refreshed while it polls: seen %s, then %s", first, last)
	}
	if got, _, err := store.ReadSerial(t.Context(), st); err != nil || got != serial {
		t.Errorf("the store serial moved from %d to %d with reports alone (%v)", serial, got, err)
	}

	// It stops polling: past lostAfter, b lists it lost; a has let it go from memory
	// (its object stays, lost, until forgetAfter).
	for range 12 {
		a.Flush(t.Context(), c.Add(MinWriteGap))
	}
	if in := listed(t, b)["edge-1"]; in.State != "lost" || in.Node != "vps-a" {
		t.Errorf("b's view of edge-1 after it stopped polling for %s: %+v, want lost", 12*MinWriteGap, in)
	}
	a.mu.Lock()
	_, kept := a.local["edge-1"]
	a.mu.Unlock()
	if kept {
		t.Error("vps-a still tracks edge-1 past lostAfter")
	}
}

// An ingress that moves to another node is reported by that node: its first write is
// create-only and loses to the object the first node wrote, so it rereads it and takes
// it over (If-Match); the first node's next write loses in turn and it lets the
// ingress go. The object then stays with the new node, refreshed, never lost, never
// written back by the old one; and when that node restarts, it takes its own object
// over the same way.
func TestAnIngressThatMovesIsTakenOverByItsNewNode(t *testing.T) {
	st := dirStore(t)
	c, m := newFleetClock(), newFleetMark(1, rev('a'))
	a, b := nodeBook(st, "vps-a", c, m), nodeBook(st, "vps-b", c, m)
	ctx := t.Context()

	pluginPoll(t, a, "edge-1", 1, rev('a'))
	a.Flush(ctx, c.Now())
	if in := listed(t, b)["edge-1"]; in.Node != "vps-a" || in.State != "current" {
		t.Fatalf("b lists edge-1 as %+v, want current on vps-a", in)
	}
	// Its last poll of vps-a is due a refresh, which vps-a has not written yet when
	// the ingress moves to vps-b.
	c.Add(600 * time.Millisecond)
	pluginPoll(t, a, "edge-1", 1, rev('a'))
	c.Add(100 * time.Millisecond)
	pluginPoll(t, b, "edge-1", 1, rev('a'))
	b.Flush(ctx, c.Now()) // create-only: loses to vps-a's object, takes it over
	if rep := storedReport(t, st, "edge-1"); rep.Node != "vps-a" {
		t.Fatalf("b's create-only write replaced vps-a's object: %+v", rep)
	}
	for range 3 { // polls of vps-b every 100ms, each node flushing every MinWriteGap
		c.Add(100 * time.Millisecond)
		pluginPoll(t, b, "edge-1", 1, rev('a'))
	}
	b.Flush(ctx, c.Now())
	if rep := storedReport(t, st, "edge-1"); rep.Node != "vps-b" {
		t.Fatalf("edge-1's object after vps-b took it over: %+v, want written by vps-b", rep)
	}
	first := storedReport(t, st, "edge-1")
	// Past lostAfter since edge-1 left vps-a, both nodes flushing: vps-a's pending
	// write loses, it lets edge-1 go; vps-b keeps it, refreshed.
	for range 2 * int(lostAfterTest/MinWriteGap) {
		now := c.Add(MinWriteGap)
		pluginPoll(t, b, "edge-1", 1, rev('a'))
		a.Flush(ctx, now)
		b.Flush(ctx, now)
		if rep := storedReport(t, st, "edge-1"); rep.Node != "vps-b" {
			t.Fatalf("edge-1's object written back by %s after vps-b took it over: %+v", rep.Node, rep)
		}
	}
	if last := storedReport(t, st, "edge-1"); !last.Seen.After(first.Seen.Add(lostAfterTest)) {
		t.Errorf("edge-1's object not refreshed by vps-b: seen %s, then %s", first.Seen, last.Seen)
	}
	for _, n := range []*Book{a, b} {
		if in := listed(t, n)["edge-1"]; in.Node != "vps-b" || in.State != "current" {
			t.Errorf("%s lists edge-1 as %+v, want current on vps-b", n.self, in)
		}
	}

	// vps-b restarted (a new book, the same store) knows no etag of the report it wrote:
	// its create-only write loses to its own object, and it takes the object over, so the
	// report keeps being refreshed (else edge-1 would be shown lost while it polls).
	before := storedReport(t, st, "edge-1")
	b = nodeBook(st, "vps-b", c, m)
	for range 3 * int(lostAfterTest/MinWriteGap) {
		now := c.Add(MinWriteGap)
		pluginPoll(t, b, "edge-1", 1, rev('a'))
		b.Flush(ctx, now)
	}
	if after := storedReport(t, st, "edge-1"); after.Node != "vps-b" || after.Seen.Sub(before.Seen) <= 2*lostAfterTest {
		t.Errorf("edge-1's object after %s of polls of the restarted vps-b: %+v (seen %s before)", 3*lostAfterTest, after, before.Seen)
	}
	if in := listed(t, a)["edge-1"]; in.State != "current" || in.Node != "vps-b" {
		t.Errorf("vps-a lists edge-1 as %+v, want current on vps-b", in)
	}
}

// listFails fails LIST of ingresses/ while on.
type listFails struct {
	store.Store
	on atomic.Bool
}

func (l *listFails) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if l.on.Load() && prefix == Prefix {
		return nil, fmt.Errorf("listing: %w", store.ErrUnavailable)
	}
	return l.Store.List(ctx, prefix)
}

// When the fleet's reports cannot be read, a write never answers "applied": the
// ingresses it cannot see may be behind. The view then says so, and lists this node's
// own ingresses.
func TestWaitAppliedIsNeverAppliedOnAPartialView(t *testing.T) {
	lf := &listFails{Store: dirStore(t)}
	c, m := newFleetClock(), newFleetMark(1, rev('a'))
	a := nodeBook(lf, "vps-a", c, m)
	pluginPoll(t, a, "edge-1", 1, rev('a'))
	a.Flush(t.Context(), c.Now())
	if body, _ := a.Await(t.Context(), 1, time.Minute); !body.Applied || body.Ingresses != 1 {
		t.Fatalf("with the reports readable: %+v, want applied by edge-1", body)
	}
	lf.on.Store(true)
	c.Add(ViewMaxAge) // the view read above has aged
	body, _ := a.Await(t.Context(), 1, time.Millisecond)
	if body.Applied || !strings.Contains(body.Detail, "could not be read") {
		t.Errorf("with the reports unreadable: %+v, want not applied, saying so", body)
	}
	if v := a.Fleet(t.Context(), 0); v.Error == "" || len(v.Ingresses) != 1 || v.Ingresses[0].Name != "edge-1" {
		t.Errorf("the view with the reports unreadable: error %q, %+v; want the error and this node's own", v.Error, v.Ingresses)
	}
}

// seedReports stores n reports of plugin ingresses edge-000… of vps-b, seen now, at
// serial 1.
func seedReports(t *testing.T, st store.Store, c *fleetClock, n int) {
	t.Helper()
	for i := range n {
		b, _ := json.Marshal(Report{Name: fmt.Sprintf("edge-%03d", i), Kind: api.KindPlugin, Node: "vps-b", Serial: 1, Seen: c.Now()})
		if _, err := st.Put(t.Context(), fmt.Sprintf("%sedge-%03d.json", Prefix, i), b, store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
}

// gatedGets holds every GET until n are in flight at once (then lets them all
// through), and counts the calls on ingresses/.
type gatedGets struct {
	store.Store
	n                  int
	mu                 sync.Mutex
	inflight, peak     int
	lists, gets, fails int
	open               chan struct{}
	opened             bool
}

func (g *gatedGets) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	g.mu.Lock()
	g.lists++
	g.mu.Unlock()
	return g.Store.List(ctx, prefix)
}

func (g *gatedGets) Get(ctx context.Context, key string) (store.Object, error) {
	g.mu.Lock()
	g.gets++
	g.inflight++
	g.peak = max(g.peak, g.inflight)
	if g.inflight >= g.n && !g.opened {
		g.opened = true
		close(g.open)
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inflight--
		g.mu.Unlock()
	}()
	select {
	case <-g.open:
		return g.Store.Get(ctx, key)
	case <-ctx.Done():
		g.mu.Lock()
		g.fails++
		g.mu.Unlock()
		return store.Object{}, ctx.Err()
	}
}

// A node reads the fleet's reports several at a time (at most viewReadConcurrency), one
// LIST and one GET per report: from an object store a region away (25 ms a request),
// 120 reports read one after another took 3 s, beyond the read's defaultViewTimeout,
// and the node never listed the fleet's ingresses (every ?wait=applied answered 202
// "could not be read"). Here every GET waits until 4 are in flight (120 reports at 25
// ms, 4 at once: 750 ms): a read that makes them one after another never completes
// (it fails at its timeout).
func TestIngressReportsAreReadConcurrently(t *testing.T) {
	const reports = 120
	inner := dirStore(t)
	c, m := newFleetClock(), newFleetMark(1, rev('a'))
	seedReports(t, inner, c, reports)
	g := &gatedGets{Store: inner, n: 4, open: make(chan struct{})}
	a := nodeBook(g, "vps-a", c, m)
	a.ViewTimeout = 10 * time.Second // a loaded machine: only a read that can never finish fails
	v := a.Fleet(t.Context(), StatusViewMaxAge)
	if v.Error != "" || len(v.Ingresses) != reports {
		t.Errorf("the first view: %d ingresses, error %q; want the %d reports", len(v.Ingresses), v.Error, reports)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lists != 1 || g.gets != reports || g.fails != 0 || g.peak < g.n || g.peak > viewReadConcurrency {
		t.Errorf("reading %d reports: %d LIST, %d GET (%d failed), at most %d at once; want one LIST, one GET per report, %d to %d at once",
			reports, g.lists, g.gets, g.fails, g.peak, g.n, viewReadConcurrency)
	}
}
