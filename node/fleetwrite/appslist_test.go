package fleetwrite

import (
	"context"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// TestListingApplicationsReadsOnlyWhatChanged: Apps reads an application object again
// only when its etag moved since the last list; a corrupt one is remembered by its etag
// too and stays out of the list (hostile review 4, F5: each list of N applications was
// N GETs, which a read-only token could repeat at its budget's rate).
func TestListingApplicationsReadsOnlyWhatChanged(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c"} {
		f.app(t, n, "acme")
	}
	if _, err := f.st.Put(ctx, fleet.AppKey("bad"), []byte("{not json"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	cs := &readLog{Store: f.st}
	gets := func() int { n, _ := cs.take(fleet.PrefixApps); return n }
	w := New(f.w.cfg, cs, f.id, f.w.inst, f.w.log)
	names := func() string {
		apps, err := w.Apps(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range apps {
			out = append(out, a.Name+"@"+strings.Join(a.Placement, "+"))
		}
		return strings.Join(out, ",")
	}
	if got := names(); got != "a@,b@,c@" || gets() != 4 {
		t.Fatalf("first list: %q, want a, b, c (the corrupt one left out), 4 GETs", got)
	}
	if got, n := names(), gets(); got != "a@,b@,c@" || n != 0 {
		t.Fatalf("unchanged: %q with %d GETs, want the same list and none", got, n)
	}
	putApp(t, f.w, "b", fleet.App{Account: "acme", Placement: []string{"vps-a"}}, "")
	if err := f.w.DeleteApp(ctx, admin, "c", ""); err != nil {
		t.Fatal(err)
	}
	if got, n := names(), gets(); got != "a@,b@vps-a" || n != 1 {
		t.Fatalf("b changed, c deleted: %q with %d GETs, want a, b on vps-a and one GET", got, n)
	}
}
