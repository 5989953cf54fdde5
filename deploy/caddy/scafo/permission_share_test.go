package scafo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/scafo/ingress/render/routing"
)

// shareDoc names shop1…shop30 (application shop), blog1…blog30 (blog),
// docs1…docs30 (docs), a wildcard *.wild.example.org (wild), and the API apex
// apps.example.com.
func shareDoc() *routing.Document {
	d := &routing.Document{V: 1}
	for _, app := range []string{"shop", "blog", "docs"} {
		for i := 1; i <= 30; i++ {
			d.Routes = append(d.Routes, routing.Route{Host: fmt.Sprintf("%s%d.example.org", app, i), Application: app, Upstreams: ups("10.0.0.1:1")})
		}
	}
	d.Routes = append(d.Routes, routing.Route{Host: "*.wild.example.org", Application: "wild", Upstreams: ups("10.0.0.1:2")})
	d.API = &routing.API{Hosts: []string{"apps.example.com"}, Upstreams: ups("10.0.0.9:7400"), Denied: routing.DeniedAPIPrefixes}
	d.Seal()
	return d
}

// TestFailingNamesOfOneApplicationCannotRefuseAnothersFirstName is the residual of
// issue 25 the last note reported: the budget was per Caddy, so 17 names whose orders
// fail (DNS pointing elsewhere), each handshaked again every 10 minutes by an
// anonymous client, spent the whole default budget (17 × 6 = 102 approvals an hour),
// and every other tenant's new name was refused. Now the names of one application
// spend its share (a tenth of the budget by default): another application's first
// name, and the API apex, are approved.
func TestFailingNamesOfOneApplicationCannotRefuseAnothersFirstName(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, logs := docPermission(t, shareDoc(), 0, 0, &now) // the defaults: 100 an hour
	ctx := context.Background()
	approved := 0
	for range 120 { // an hour, a handshake for each name every 30 s
		now = now.Add(30 * time.Second)
		for i := 1; i <= 17; i++ {
			if perm.CertificateAllowed(ctx, fmt.Sprintf("shop%d.example.org", i)) == nil {
				approved++ // ordered, and the order fails: no certificate lands
			}
		}
	}
	for _, name := range []string{"blog1.example.org", "docs1.example.org", "apps.example.com"} {
		if err := perm.CertificateAllowed(ctx, name); err != nil {
			t.Fatalf("%s, the first name of its application, after an hour of 17 failing names of shop (%d approvals): %v", name, approved, err)
		}
	}
	if want := 10; approved != want { // DefaultShare(100)
		t.Errorf("17 failing names of shop, handshaked every 30 s for an hour: %d approvals, want its share %d", approved, want)
	}
	refusals := logs.FilterMessage("on-demand certificate refused").All()
	shareRefused := 0
	for _, e := range refusals {
		f := e.ContextMap()
		if f["application"] != "shop" {
			t.Fatalf("a refusal of another application's name: %v", f)
		}
		if strings.Contains(fmt.Sprint(f["reason"]), `application "shop"'s share of the issuance budget is spent`) {
			shareRefused++
		}
	}
	if shareRefused == 0 {
		t.Errorf("no refusal logged with the share's reason: %v", refusals)
	}
}

// TestPermissionSharesTheBudgetPerApplication: one application's share, the API
// hosts' bucket, the budget over every share, `per_app off`, the default share, and
// the share's window sliding, each a sequence of handshakes with what each must get.
func TestPermissionSharesTheBudgetPerApplication(t *testing.T) {
	const (
		ok     = ""
		share  = "share of the issuance budget is spent"
		budget = "the issuance budget is spent"
		undoc  = "does not name it"
	)
	type step struct {
		after time.Duration // the clock moves this much first
		name  string
		want  string // ok, or what the refusal says
	}
	for _, c := range []struct {
		name           string
		budget, perApp int
		steps          []step
	}{
		{"the default share is a tenth of the default budget", 0, 0, append(func() []step {
			var s []step
			for i := 1; i <= 10; i++ {
				s = append(s, step{0, fmt.Sprintf("shop%d.example.org", i), ok})
			}
			return s
		}(), step{0, "shop11.example.org", `application "shop"'s ` + share}, step{0, "blog1.example.org", ok}, step{0, "apps.example.com", ok})},
		{"shares under a budget", 5, 2, []step{
			{0, "shop1.example.org", ok}, {0, "shop2.example.org", ok}, {0, "shop3.example.org", share},
			{0, "blog1.example.org", ok}, {0, "blog2.example.org", ok}, {0, "blog3.example.org", share},
			{0, "apps.example.com", ok},
			{0, "docs1.example.org", budget}, // 5 in all: the budget binds before docs' share
			{0, "x.wild.example.org", undoc}, // a wildcard's name: the document's refusal, not a share's
		}},
		{"the API hosts are a bucket of their own", 10, 1, []step{
			{0, "apps.example.com", ok}, {0, "shop1.example.org", ok}, {0, "shop2.example.org", share},
		}},
		{"per_app off: the budget alone", 5, -1, []step{
			{0, "shop1.example.org", ok}, {0, "shop2.example.org", ok}, {0, "shop3.example.org", ok},
			{0, "shop4.example.org", ok}, {0, "shop5.example.org", ok}, {0, "shop6.example.org", budget},
		}},
		{"a budget under 10 shares 1 each", 3, 0, []step{
			{0, "shop1.example.org", ok}, {0, "shop2.example.org", share}, {0, "blog1.example.org", ok},
			{0, "docs1.example.org", ok}, {0, "apps.example.com", budget},
		}},
		{"a share's window slides", 100, 2, []step{
			{0, "shop1.example.org", ok}, {10 * time.Minute, "shop2.example.org", ok},
			{10 * time.Minute, "shop3.example.org", share + ": 2 approvals of its names with no certificate in the storage in the last 1h0m0s (its share is 2 of 100); the next one in 40m0s"},
			{40*time.Minute - time.Second, "shop3.example.org", share},
			{time.Second, "shop3.example.org", ok}, // shop1's approval left the window
			{0, "shop4.example.org", share},
			{10 * time.Minute, "shop4.example.org", ok},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
			perm, _ := docPermission(t, shareDoc(), c.budget, time.Hour, &now)
			perm.PerApp = c.perApp
			if err := perm.validate(); err != nil {
				t.Fatal(err)
			}
			for i, s := range c.steps {
				now = now.Add(s.after)
				err := perm.CertificateAllowed(context.Background(), s.name)
				if s.want == ok && err != nil {
					t.Fatalf("step %d, %s: %v, want approved", i, s.name, err)
				}
				if s.want != ok && (!errors.Is(err, caddytls.ErrPermissionDenied) || !strings.Contains(err.Error(), s.want)) {
					t.Fatalf("step %d, %s: %v, want ErrPermissionDenied saying %q", i, s.name, err, s.want)
				}
			}
		})
	}
}

// TestApplicationOfIsTheExactRoutesApplication: a name's bucket is the application of
// the route that names it exactly; the API apex's is APIBucket; a name only a
// wildcard covers, the wildcard itself, an unknown name and another group's path
// target have none (on-demand TLS refuses them before any budget).
func TestApplicationOfIsTheExactRoutesApplication(t *testing.T) {
	tab := NewTable(shareDoc())
	for name, want := range map[string]string{"shop7.example.org": "shop", "blog30.example.org": "blog", "apps.example.com": APIBucket} {
		if got, ok := tab.ApplicationOf(name); !ok || got != want {
			t.Errorf("ApplicationOf(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"x.wild.example.org", "*.wild.example.org", "nope.example.org", "SHOP7.example.org", "shop7.example.org."} {
		if got, ok := tab.ApplicationOf(name); ok {
			t.Errorf("ApplicationOf(%q) = %q, want none", name, got)
		}
	}
	eu := NewGroupTable(euDoc(), []string{"eu"})
	if got, ok := eu.ApplicationOf("go.tito.io"); ok {
		t.Errorf("the eu table gives go.tito.io (group us) a bucket: %q", got)
	}
	if got, _ := eu.ApplicationOf("ti.to"); got != "tito-classic" {
		t.Errorf("ApplicationOf(ti.to) = %q", got)
	}
	var none *Table
	if _, ok := none.ApplicationOf("shop7.example.org"); ok {
		t.Error("no table: a bucket")
	}
}
