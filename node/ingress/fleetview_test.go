package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
)

// getFails fails the GET of one key once, and counts the GETs of ingresses/ that
// returned an object.
type getFails struct {
	store.Store
	key  string
	once atomic.Bool
	read atomic.Int32
}

func (g *getFails) Get(ctx context.Context, key string) (store.Object, error) {
	if key == g.key && g.once.CompareAndSwap(false, true) {
		return store.Object{}, fmt.Errorf("reading: %w", store.ErrUnavailable)
	}
	obj, err := g.Store.Get(ctx, key)
	if err == nil && strings.HasPrefix(key, Prefix) {
		g.read.Add(1)
	}
	return obj, err
}

// A read of the fleet's reports that fails midway keeps what it read: the next read
// GETs only the reports still missing (else a cold view too slow to finish within
// ingressViewTimeout would start over, and fail, every time).
func TestAFailedReadOfTheIngressReportsKeepsWhatItRead(t *testing.T) {
	st := dirStore(t)
	const reports = 60
	c := newFleetClock()
	seedReports(t, st, c, reports)
	gf := &getFails{Store: st, key: Prefix + "edge-030.json"}
	book := nodeBook(gf, "vps-a", c, newFleetMark(1, rev('a')))
	// A view of age 0 reads the store every time; this book has no local report, so
	// the view is the reports read.
	v := book.Fleet(t.Context(), 0)
	first := int(gf.read.Load())
	if v.Error == "" || !strings.Contains(v.Error, "edge-030") || len(v.Ingresses) != first || first >= reports {
		t.Fatalf("a read with edge-030 failing: %d reports, error %q (%d read); want the error and the ones read", len(v.Ingresses), v.Error, first)
	}
	v = book.Fleet(t.Context(), 0)
	if v.Error != "" || len(v.Ingresses) != reports {
		t.Fatalf("the next read: %d reports, error %q; want all %d", len(v.Ingresses), v.Error, reports)
	}
	if again := int(gf.read.Load()) - first; again != reports-first {
		t.Errorf("the next read GET %d reports, want the %d still missing (the first read got %d)", again, reports-first, first)
	}
	t.Logf("the failed read got %d of %d reports; the next one GET the %d others", first, reports, reports-first)
}

// viewBook is a book of node vps-a over a fresh directory store, with the reports
// tests' settings (nodeBook: lostAfter 2s, forgetAfter 1h) and its clock stopped at now.
func viewBook(t *testing.T, now time.Time) (*Book, store.Store) {
	t.Helper()
	st := dirStore(t)
	return nodeBook(st, "vps-a", &fleetClock{now: now}, newFleetMark(1, "r1")), st
}

// putReports writes each report object (key under Prefix → value) to st.
func putReports(t *testing.T, st store.Store, objs map[string]string) {
	t.Helper()
	for k, v := range objs {
		if _, err := st.Put(t.Context(), Prefix+k, []byte(v), store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
}

func reportJSON(t *testing.T, r Report) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func skippedReasons(v View) map[string]string {
	out := map[string]string{}
	for _, sk := range v.Skipped {
		out[sk.Object] = sk.Reason
	}
	return out
}

// TestCorruptIngressObjectIsSkippedWithAReason: a corrupt report object is skipped with
// its reason; the rest are listed (a planted node is never shown:
// TestAStoredReportIsCheckedFieldByField has every spelling).
func TestCorruptIngressObjectIsSkippedWithAReason(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b, st := viewBook(t, now)
	good := reportJSON(t, Report{Name: "edge-1", Kind: api.KindHTTP, Node: "vps-b", Serial: 1, Seen: now})
	putReports(t, st, map[string]string{
		"edge-1.json": good,
		"bad.json":    "{",
		"other.json":  strings.Replace(good, "edge-1", "edge-2", 1),
		"kind.json":   strings.Replace(strings.Replace(good, "edge-1", "kind", 1), `"http"`, `"squid"`, 1),
		// A node of 3 000 characters with a bidi override: never shown.
		"node.json": strings.Replace(strings.Replace(good, "edge-1", "node", 1), "vps-b", "vps‮"+strings.Repeat("b", 3000), 1),
	})
	v := b.Fleet(t.Context(), 0)
	if len(v.Ingresses) != 1 || v.Ingresses[0].Name != "edge-1" || v.Ingresses[0].Served == nil {
		t.Errorf("ingresses %+v, want edge-1 alone (served)", v.Ingresses)
	}
	reasons := skippedReasons(v)
	if !strings.Contains(reasons["ingresses/bad.json"], "malformed") || !strings.Contains(reasons["ingresses/other.json"], "does not match") ||
		!strings.Contains(reasons["ingresses/kind.json"], "kind") || reasons["ingresses/node.json"] != "invalid node" {
		t.Errorf("skipped %v, want the four bad objects with their reasons", reasons)
	}
}

// TestIngressNotSeenForForgetAfterIsForgotten: an ingress not heard from for
// ingresses.forgetAfter is forgotten: its object is deleted by the next node that reads
// the reports; one not heard from for less is listed lost.
func TestIngressNotSeenForForgetAfterIsForgotten(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b, st := viewBook(t, now) // forgetAfter 1h
	for name, age := range map[string]time.Duration{"old": 2 * time.Hour, "recent": 30 * time.Minute} {
		putReports(t, st, map[string]string{name + ".json": reportJSON(t, Report{Name: name, Kind: api.KindPlugin, Node: "vps-b", Serial: 1, Seen: now.Add(-age)})})
	}
	ins := map[string]api.Ingress{}
	for _, in := range b.Fleet(t.Context(), 0).Ingresses {
		ins[in.Name] = in
	}
	if _, ok := ins["old"]; ok {
		t.Errorf("an ingress not seen for 2h is listed (forgetAfter 1h): %+v", ins["old"])
	}
	if ins["recent"].State != "lost" {
		t.Errorf("an ingress not seen for 30m: %+v, want listed lost", ins["recent"])
	}
	if _, err := st.Get(t.Context(), Prefix+"old.json"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the forgotten ingress's object: %v, want deleted", err)
	}
}

// TestIngressReportSeenInTheFutureIsSkippedNotWaitedForForever: a report object seen in
// the future (a corrupt object, or one written by a node whose clock ran far ahead and
// then left) would never be lost nor forgotten: a ghost every ?wait=applied waits for,
// answering 202 forever. Seen more than lostAfter ahead of this node's clock, it is
// skipped with the reason, like any other malformed report, and a wait is not held by it.
func TestIngressReportSeenInTheFutureIsSkippedNotWaitedForForever(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b, st := viewBook(t, now) // lostAfter 2s
	putReports(t, st, map[string]string{"ghost.json": reportJSON(t, Report{Name: "ghost", Kind: api.KindPlugin, Node: "vps-z", Serial: 1, Seen: now.Add(365 * 24 * time.Hour)})})
	if body, done := b.Await(t.Context(), 1, time.Minute); !done || !body.Applied {
		t.Errorf("a wait with only a ghost report in the store: %+v (done %v), want applied at once", body, done)
	}
	v := b.Fleet(t.Context(), 0)
	for _, in := range v.Ingresses {
		if in.Name == "ghost" {
			t.Errorf("a report seen a year ahead is listed %+v, want skipped", in)
		}
	}
	if reasons := skippedReasons(v); !strings.Contains(reasons["ingresses/ghost.json"], "future") {
		t.Errorf("skipped %v, want ingresses/ghost.json with a reason naming the future", reasons)
	}
}
