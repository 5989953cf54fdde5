package fleetwrite

import (
	"context"
	"testing"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// Issue 25 item 10: the retention sweep keeps the cutoff day itself. Retention 30 days
// swept at 2026-12-02 13:00 UTC: the cutoff is 2026-11-02, so a record of Nov 2 (even
// one from its first minute) stays and one of Nov 1 (its last minute) goes: an
// off-by-one-day sweep fails one way or the other.
func TestAuditSweepKeepsTheCutoffDay(t *testing.T) {
	f := newFixture(t)
	f.w.cfg.AuditRetention = 30 * 24 * time.Hour
	ctx := context.Background()
	for _, tc := range []struct {
		app string
		at  time.Time
	}{
		{"before", time.Date(2026, 11, 1, 23, 59, 0, 0, time.UTC)},
		{"cutoff", time.Date(2026, 11, 2, 0, 1, 0, 0, time.UTC)},
		{"after", time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)},
	} {
		f.w.now = func() time.Time { return tc.at }
		if _, _, _, err := f.w.PutApp(ctx, admin, tc.app, fleet.App{Account: "acme"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	f.w.now = func() time.Time { return time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC) }
	n, err := f.w.SweepAudit(ctx, f.w.now())
	if err != nil || n != 1 {
		t.Fatalf("sweep deleted %d (%v), want 1 (Nov 1's record)", n, err)
	}
	recs, err := f.w.Audit(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var apps []string
	for _, r := range recs {
		apps = append(apps, r.App)
	}
	if len(apps) != 2 || apps[0] != "after" || apps[1] != "cutoff" {
		t.Fatalf("after the sweep: %v, want [after cutoff] (the cutoff day is kept)", apps)
	}
}
