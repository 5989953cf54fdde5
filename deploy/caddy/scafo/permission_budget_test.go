package scafo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/scafo/ingress/render/routing"
)

// budgetPermission is a tls.permission.scafo over a document naming new1…new9,
// bulk1…bulk100 and held.example.org, each its own application's (so no application's
// share of the budget binds: these tests are of the budget itself), a storage
// (CertMagic's file storage, its key layout) holding a certificate for
// held.example.org only, the clock at *now.
func budgetPermission(t *testing.T, budget int, interval time.Duration, now *time.Time) (*Permission, *observer.ObservedLogs) {
	t.Helper()
	d := &routing.Document{V: 1}
	for i := 1; i <= 9; i++ {
		d.Routes = append(d.Routes, routing.Route{Host: fmt.Sprintf("new%d.example.org", i), Application: fmt.Sprintf("new%d", i), Upstreams: ups("10.0.0.1:1")})
	}
	for i := 1; i <= DefaultIssuanceBudget; i++ { // distinct names for the default budget
		d.Routes = append(d.Routes, routing.Route{Host: fmt.Sprintf("bulk%d.example.org", i), Application: fmt.Sprintf("bulk%d", i), Upstreams: ups("10.0.0.1:1")})
	}
	d.Routes = append(d.Routes, routing.Route{Host: "held.example.org", Application: "held", Upstreams: ups("10.0.0.1:1")})
	d.Seal()
	return docPermission(t, d, budget, interval, now)
}

// docPermission is a tls.permission.scafo over d, with budgetPermission's storage and
// clock.
func docPermission(t *testing.T, d *routing.Document, budget int, interval time.Duration, now *time.Time) (*Permission, *observer.ObservedLogs) {
	t.Helper()
	p := &Poller{}
	p.cur.Store(NewTable(d))
	st := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	// held.example.org holds a certificate 1 day into its 90 (not due for renewal).
	storeCert(t, st, "held.example.org", now.Add(-24*time.Hour), now.Add(89*24*time.Hour))
	for _, k := range []string{
		"certificates/acme-v02.api.letsencrypt.org-directory/held.example.org/held.example.org.key",
		// Another name's key alone, or a name's directory with no .crt, holds nothing.
		"certificates/acme-v02.api.letsencrypt.org-directory/new8.example.org/new8.example.org.key",
	} {
		if err := st.Store(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zap.DebugLevel)
	return &Permission{Budget: budget, BudgetInterval: caddy.Duration(interval), app: &App{poller: p}, storage: st,
		logger: zap.New(core), now: func() time.Time { return *now }}, logs
}

// An approved name with no certificate in the storage is an order at the CA. At most
// Budget such approvals per interval (a sliding window); a further one is refused with
// ErrPermissionDenied and logged with the reason; a name holding a certificate is
// approved whatever the budget and never counted; a name the document does not name
// is refused by the document and not counted either; the window slides with the clock.
func TestPermissionBudgetsApprovalsOfNamesWithNoCertificate(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, logs := budgetPermission(t, 3, time.Hour, &now)
	ctx := inHandshake(context.Background()) // CertMagic asks at a handshake
	allow := func(name string) {
		t.Helper()
		if err := perm.CertificateAllowed(ctx, name); err != nil {
			t.Fatalf("%s at %s: %v, want approved", name, now.Format(time.TimeOnly), err)
		}
	}
	refuse := func(name, why string) {
		t.Helper()
		err := perm.CertificateAllowed(ctx, name)
		if !errors.Is(err, caddytls.ErrPermissionDenied) || !strings.Contains(err.Error(), why) {
			t.Fatalf("%s at %s: %v, want ErrPermissionDenied saying %q", name, now.Format(time.TimeOnly), err, why)
		}
	}

	allow("new1.example.org")
	refuse("nope.example.org", "does not name it")   // not counted
	refuse("x.new1.example.org", "does not name it") // not counted
	now = now.Add(10 * time.Minute)
	allow("new2.example.org")
	allow("held.example.org") // holds a valid certificate, at a handshake: a load, not counted
	now = now.Add(10 * time.Minute)
	allow("new8.example.org") // a key alone is no certificate: counted
	refuse("new3.example.org", "issuance budget is spent")
	refuse("new1.example.org", "issuance budget is spent") // approved before, still no certificate: another order
	for range 20 {
		allow("held.example.org") // never held back
	}

	// The refusal is logged with the name and the reason.
	entries := logs.FilterMessage("on-demand certificate refused").All()
	if len(entries) != 2 {
		t.Fatalf("%d refusals logged, want 2: %+v", len(entries), logs.All())
	}
	f := entries[0].ContextMap()
	if f["server_name"] != "new3.example.org" || !strings.Contains(fmt.Sprint(f["reason"]), "3 approvals of names with no certificate in the storage in the last 1h0m0s") ||
		!strings.Contains(fmt.Sprint(f["reason"]), "the next one in 40m0s") {
		t.Fatalf("the refusal's log: %v", f)
	}

	// The window slides: new1's approval (04:00) leaves it at 05:00, new2's at 05:10.
	now = time.Date(2026, 12, 2, 4, 59, 59, 0, time.UTC)
	refuse("new3.example.org", "issuance budget is spent")
	now = time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	allow("new3.example.org")
	refuse("new4.example.org", "issuance budget is spent")
	now = time.Date(2026, 12, 2, 5, 10, 0, 0, time.UTC)
	allow("new4.example.org")
	refuse("new5.example.org", "issuance budget is spent")
	now = now.Add(2 * time.Hour)
	for _, n := range []string{"new5.example.org", "new6.example.org", "new7.example.org"} {
		allow(n)
	}
	refuse("new9.example.org", "issuance budget is spent")
}

// The default is 100 per hour; `budget off` (-1) is no budget at all.
func TestPermissionBudgetDefaultAndOff(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, _ := budgetPermission(t, 0, 0, &now)
	ctx := context.Background()
	for i := range DefaultIssuanceBudget {
		if err := perm.CertificateAllowed(ctx, fmt.Sprintf("bulk%d.example.org", i+1)); err != nil {
			t.Fatalf("approval %d of the default budget: %v", i+1, err)
		}
	}
	if err := perm.CertificateAllowed(ctx, "new1.example.org"); !errors.Is(err, caddytls.ErrPermissionDenied) {
		t.Fatalf("approval %d with the default budget: %v, want refused", DefaultIssuanceBudget+1, err)
	}
	now = now.Add(DefaultIssuanceBudgetInterval)
	if err := perm.CertificateAllowed(ctx, "new1.example.org"); err != nil {
		t.Fatalf("an interval later: %v", err)
	}

	off, _ := budgetPermission(t, -1, 0, &now)
	for i := range 3 * DefaultIssuanceBudget {
		if err := off.CertificateAllowed(ctx, "new1.example.org"); err != nil {
			t.Fatalf("budget off, approval %d: %v", i+1, err)
		}
	}
	if err := off.CertificateAllowed(ctx, "nope.example.org"); !errors.Is(err, caddytls.ErrPermissionDenied) {
		t.Fatalf("budget off still asks the document: %v", err)
	}
}

// adaptPermission adapts a Caddyfile whose global on_demand_tls option is
// `permission scafo { <body> }` (no block for "") and returns the permission's JSON.
func adaptPermission(t *testing.T, body string) string {
	t.Helper()
	block := ""
	if body != "" {
		block = " {\n   " + body + "\n  }"
	}
	in := "{\n on_demand_tls {\n  permission scafo" + block + "\n }\n}\nexample.org {\n respond 200\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(in), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatalf("%q: %v", body, err)
	}
	var m struct {
		Apps struct {
			TLS struct {
				Automation struct {
					OnDemand struct {
						Permission json.RawMessage `json:"permission"`
					} `json:"on_demand"`
				} `json:"automation"`
			} `json:"tls"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return string(m.Apps.TLS.Automation.OnDemand.Permission)
}

// `permission scafo { budget … per_app … }` in the Caddyfile, as the global
// on_demand_tls option adapts it to JSON; bad values refused, in the Caddyfile with
// their reason (a count that is none, a share over the budget or with the budget off)
// and in JSON.
func TestPermissionBudgetCaddyfile(t *testing.T) {
	for in, want := range map[string]string{
		"budget 5 10m":                `{"budget":5,"budget_interval":600000000000,"module":"scafo"}`,
		"budget 7":                    `{"budget":7,"module":"scafo"}`,
		"budget off":                  `{"budget":-1,"module":"scafo"}`,
		"":                            `{"module":"scafo"}`,
		"budget 50 30m\n   per_app 5": `{"budget":50,"budget_interval":1800000000000,"module":"scafo","per_app":5}`,
		"per_app 100":                 `{"module":"scafo","per_app":100}`, // the default budget, wholly
		"per_app off":                 `{"module":"scafo","per_app":-1}`,
		"per_app 3\n   budget 3":      `{"budget":3,"module":"scafo","per_app":3}`,
	} {
		if got := adaptPermission(t, in); got != want {
			t.Errorf("%q adapts to %s, want %s", in, got, want)
		}
	}
	for bad, why := range map[string]string{
		"scafo {\n budget 0\n}": "", "scafo {\n budget -3\n}": "", "scafo {\n budget lots\n}": "", "scafo {\n budget 5 soon\n}": "",
		"scafo {\n budget 5 -1m\n}": "", "scafo {\n budget 1 2 3\n}": "", "scafo {\n budget\n}": "", "scafo {\n limit 5\n}": "", "scafo extra": "",
		"scafo {\n per_app 0\n}":                "want a positive count",
		"scafo {\n per_app -2\n}":               "want a positive count",
		"scafo {\n per_app lots\n}":             "want a positive count",
		"scafo {\n per_app\n}":                  "argument",
		"scafo {\n per_app 1 2\n}":              "argument",
		"scafo {\n per_app 101\n}":              "more than the budget 100",
		"scafo {\n budget 5\n per_app 6\n}":     "more than the budget 5",
		"scafo {\n budget off\n per_app 3\n}":   "budget off",
		"scafo {\n per_app off\n budget off\n}": "budget off",
		"scafo {\n per_app 3\n budget 2 10m\n}": "more than the budget 2",
		"scafo {\n budget 20\n per_app 2 1h\n}": "argument",
		"scafo {\n budget 20\n perapp 2\n}":     "unknown option",
	} {
		p := new(Permission)
		if err := p.UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error saying %q", bad, err, why)
		}
	}
	for _, bad := range []*Permission{{Budget: -2}, {BudgetInterval: -1}, {PerApp: -2}, {Budget: -1, PerApp: 3}, {Budget: -1, PerApp: -1},
		{Budget: 5, PerApp: 6}, {PerApp: DefaultIssuanceBudget + 1}} {
		if err := bad.validate(); err == nil {
			t.Errorf("budget %d, interval %d, per_app %d: accepted", bad.Budget, bad.BudgetInterval, bad.PerApp)
		}
	}
	for _, good := range []*Permission{{}, {Budget: -1}, {PerApp: -1}, {Budget: 1}, {Budget: 5, PerApp: 5}} {
		if err := good.validate(); err != nil {
			t.Errorf("budget %d, per_app %d: %v", good.Budget, good.PerApp, err)
		}
	}
}

// TestOneFailingNameCannotSpendEveryonesBudget (hostile review, round four): one
// document name whose orders keep failing (its DNS points elsewhere), handshaked again
// after each failure by an anonymous client, spent the whole budget (100 approvals in
// 50 minutes), and every other name with no certificate was refused for the rest of
// the hour. Now a name is approved again at most every nameRetry while it holds no
// certificate (doubling after each approval: retryAfter), refused without spending in
// between.
func TestOneFailingNameCannotSpendEveryonesBudget(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, logs := budgetPermission(t, 100, time.Hour, &now)
	ctx := inHandshake(context.Background())
	approved := 0
	for range 100 {
		now = now.Add(30 * time.Second) // a handshake after each failed order
		if perm.CertificateAllowed(ctx, "new1.example.org") == nil {
			approved++
		}
	}
	if want := 3; approved != want { // at 04:00:30, 04:10:30, 04:30:30 (retryAfter doubles: 10, 20, 40 min)
		t.Errorf("one certificate-less name handshaked every 30 s for 50 min: %d approvals, want %d (after %s, then doubling)", approved, want, nameRetry)
	}
	for i := 2; i <= 9; i++ {
		if err := perm.CertificateAllowed(ctx, fmt.Sprintf("new%d.example.org", i)); err != nil {
			t.Fatalf("another name after one name's 100 handshakes: %v", err)
		}
	}
	err := perm.CertificateAllowed(ctx, "new2.example.org")
	if !errors.Is(err, caddytls.ErrPermissionDenied) || !strings.Contains(err.Error(), "still no certificate") {
		t.Fatalf("new2 again at once: %v, want refused naming its last approval", err)
	}
	if len(logs.FilterMessage("on-demand certificate refused").All()) == 0 {
		t.Error("the repeat refusals are not logged")
	}
	for range 20 {
		if err := perm.CertificateAllowed(ctx, "held.example.org"); err != nil {
			t.Fatalf("a name holding a certificate: %v", err) // never held back
		}
	}
}
