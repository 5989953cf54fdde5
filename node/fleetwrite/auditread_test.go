package fleetwrite

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// Issue 38 item 4: a status page asks for the audit log every 30 s. With fewer records
// than the limit, every read listed each day back to the retention horizon (31 lists at
// 30 days) and read every record again. A second read now lists today and yesterday
// only, reads no record it has read, and still sees a record written since, one on a
// day it had listed empty once that knowledge expires, and never a swept one.
func TestAuditRereadsListTheRecentDaysOnly(t *testing.T) {
	f := newFixture(t)
	f.w.cfg.AuditRetention = 30 * 24 * time.Hour
	ctx := context.Background()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(ts time.Time) { f.w.now = func() time.Time { return ts } }
	put := func(app string) {
		t.Helper()
		putApp(t, f.w, app, fleet.App{Account: "acme"}, "")
	}
	at(now.Add(-10 * 24 * time.Hour))
	put("old")
	at(now)
	put("today")

	cs := &readLog{Store: f.w.st}
	f.w.st = cs
	read := func() []string {
		t.Helper()
		recs, err := f.w.Audit(ctx, 20)
		if err != nil {
			t.Fatal(err)
		}
		var apps []string
		for _, r := range recs {
			apps = append(apps, r.App)
		}
		return apps
	}
	reads := func() (int, int) { g, l := cs.take(""); return len(l), g }

	if got := read(); len(got) != 2 || got[0] != "today" || got[1] != "old" {
		t.Fatalf("first read: %v, want [today old]", got)
	}
	if l, g := reads(); l != 32 || g != 2 {
		t.Fatalf("first read: %d lists, %d gets; want 32 (today back to the horizon) and 2", l, g)
	}
	if got := read(); len(got) != 2 {
		t.Fatalf("second read: %v", got)
	}
	// today, yesterday, and the one day that held a record.
	if l, g := reads(); l != 3 || g != 0 {
		t.Fatalf("second read: %d lists, %d gets; want 3 and 0", l, g)
	}

	// A record written today since is read; the others come from memory.
	at(now.Add(time.Minute))
	put("later")
	reads() // the write's own reads
	if got := read(); len(got) != 3 || got[0] != "later" {
		t.Fatalf("after a write: %v, want later first", got)
	}
	if l, g := reads(); l != 3 || g != 1 {
		t.Fatalf("after a write: %d lists, %d gets; want 3 and 1", l, g)
	}

	// A record lands on a day listed empty (a restored store, a clock a day off): it is
	// seen once the empty day's knowledge expires.
	at(now.Add(-5 * 24 * time.Hour))
	f.w.st = cs.Store
	put("restored")
	f.w.st = cs
	at(now.Add(auditEmptyFor))
	if got := read(); len(got) != 4 || got[2] != "restored" {
		t.Fatalf("an hour later: %v, want the restored record third", got)
	}

	// A swept record is not answered from memory.
	at(now.Add(26 * 24 * time.Hour))
	if _, err := f.w.SweepAudit(ctx, f.w.now()); err != nil {
		t.Fatal(err)
	}
	for _, app := range read() {
		if app == "old" || app == "restored" {
			t.Fatalf("swept record %q answered after the sweep", app)
		}
	}
}

// TestAuditKeepsNoOversizedRecordInMemory: a record planted in audit/ far larger than any
// a node writes is answered, but not kept between reads (each could be up to
// store.MaxObjectSize, and the memory holds 512 of them for the process's life); the
// node's own records are still read once.
func TestAuditKeepsNoOversizedRecordInMemory(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	putApp(t, f.w, "shop", fleet.App{Account: "acme"}, "")
	now := f.w.now().UTC()
	big, _ := json.Marshal(AuditRecord{Time: now, Actor: strings.Repeat("x", 256<<10), Node: "vps-z", Action: "planted"})
	if _, err := f.w.st.Put(ctx, auditSegment(now)+"235959.999999999Z-planted.json", big, store.Condition{}); err != nil {
		t.Fatal(err)
	}
	cs := &readLog{Store: f.w.st}
	f.w.st = cs
	for i := range 2 {
		recs, err := f.w.Audit(ctx, 20)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2 || recs[0].Action != "planted" || recs[1].App != "shop" {
			t.Fatalf("read %d: %d records, want the planted one then shop's", i, len(recs))
		}
	}
	// Read 1: both records; read 2: the planted one again, shop's from memory.
	if g, _ := cs.take(""); g != 3 {
		t.Fatalf("%d gets over two reads; want 3 (the oversized record read each time, shop's once)", g)
	}
}

// TestAuditForgetsExpiredEmptyDays: a page reading the audit log for months keeps at
// most the days of one retention window in memory, not one more day per day of uptime
// (the days that slid past the horizon are never read again).
func TestAuditForgetsExpiredEmptyDays(t *testing.T) {
	f := newFixture(t)
	f.w.cfg.AuditRetention = 7 * 24 * time.Hour
	ctx := context.Background()
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for d := range 120 {
		now := start.Add(time.Duration(d) * 24 * time.Hour)
		f.w.now = func() time.Time { return now }
		if _, err := f.w.Audit(ctx, 20); err != nil {
			t.Fatal(err)
		}
	}
	f.w.audit.mu.Lock()
	n := len(f.w.audit.empty)
	f.w.audit.mu.Unlock()
	if n > 8 {
		t.Fatalf("after 120 days of reads at a 7-day retention the memory holds %d empty days; want at most 8", n)
	}
}
