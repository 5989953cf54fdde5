package fleetcerts

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3/acme"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/node/rfc2136"
	"github.com/scafo/ingress/node/rfc2136/bindtest"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/routing"
)

// dnsEnv is a real BIND serving zones, a Pebble whose VA asks that BIND, and the
// provider and DNS01 options the managers share. Every log line of every manager (at
// debug level: CertMagic's DNS manager logs the records it writes) goes to logs too.
type dnsEnv struct {
	bind  *bindtest.Server
	peb   *pebbletest.Pebble
	prov  *rfc2136.Provider
	store certmagic.Storage
	logs  *proc.Buffer
}

func newDNSEnv(t *testing.T, zones []string, providerZones []string) *dnsEnv {
	t.Helper()
	// Resolver: Pebble asks this BIND as a CA asks its resolver (following a delegation
	// CNAME into the fleet's zone).
	b := bindtest.Start(t, bindtest.Config{Zones: zones, Resolver: true})
	p := pebbletest.Start(t, pebbletest.Config{DNSServer: b.Addr})
	return &dnsEnv{
		bind: b, peb: p,
		prov:  &rfc2136.Provider{Server: b.Addr, Zones: providerZones, KeyName: b.Key.Name, Secret: b.Key.Secret, Timeout: 5 * time.Second},
		store: &certmagic.FileStorage{Path: t.TempDir()},
		logs:  &proc.Buffer{},
	}
}

// noPropagationCheck (DNS01.PropagationTimeout) skips CertMagic's propagation checks
// (the first comes 2 s after the record is written) in tests about something else:
// Pebble asks the BIND the record was written to, which has it once the update is
// answered.
const noPropagationCheck = -1

func (e *dnsEnv) manager(t *testing.T, i int, opt Options) *Manager {
	t.Helper()
	opt.Storage = e.store
	opt.CA, opt.Roots, opt.Email = e.peb.Directory, e.peb.CARoots, "ops@example.com"
	if opt.RenewCheckInterval == 0 {
		opt.RenewCheckInterval = time.Minute
	}
	if opt.Poll == 0 {
		opt.Poll = 100 * time.Millisecond
	}
	opt.Log = slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, e.logs), &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", i)
	if opt.DNS01 != nil {
		opt.DNS01.Provider = e.prov
		opt.DNS01.Resolvers = []string{e.bind.Addr}
		if opt.DNS01.PropagationTimeout == 0 {
			opt.DNS01.PropagationTimeout = 30 * time.Second
		}
	}
	m, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startServing(t, m, ln, new(atomic.Int64))
	return m
}

// verifyCert checks that set holds a certificate for certName that verifies for
// dnsName against Pebble's root, and returns its serial.
func verifyCert(t *testing.T, p *pebbletest.Pebble, set *render.CertSet, certName, dnsName string) string {
	t.Helper()
	for _, c := range set.FleetCerts.Certificates {
		if len(c.Names) != 1 || c.Names[0] != certName {
			continue
		}
		rest := []byte(c.CertFile)
		var leaf *x509.Certificate
		inter := x509.NewCertPool()
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if leaf == nil {
				leaf = cert
			} else {
				inter.AddCert(cert)
			}
		}
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: p.IssuerRoot(t), Intermediates: inter}); err != nil {
			t.Fatalf("%s's certificate for %s: %v", certName, dnsName, err)
		}
		return strings.ToLower(leaf.SerialNumber.Text(16))
	}
	t.Fatalf("no certificate for %s in %s", certName, set)
	return ""
}

// TestPlatformWildcardAndApexAreIssuedOnceByDNS01ForEveryManager: three managers on
// one store, with DNS-01 for the platform domain against a real BIND (RFC 2136 with
// TSIG) and a Pebble whose VA asks that BIND. The document routes two hosts one label
// under the platform domain (and one two labels under, which keeps HTTP-01 and is
// left in backlog by a platform budget spent on the wildcard) and names the apex as
// the API host. Pebble issues exactly two certificates for the fleet (the wildcard and
// the apex) on exactly two orders; every manager holds both, with the same serials;
// the covered hosts are managed (their routers take the wildcard) with no
// certificate of their own; the wildcard verifies for any one-label host; no TXT
// record is left in the zone; the TSIG secret appears in no log line and no status.
// The third manager, with a platform budget of 0, never orders the wildcard (budgets
// are shared with HTTP-01) and loads both from the store.
func TestPlatformWildcardAndApexAreIssuedOnceByDNS01ForEveryManager(t *testing.T) {
	e := newDNSEnv(t, []string{"example.test"}, []string{"example.test"})
	const pd = "apps.example.test"
	doc := &routing.Document{V: routing.Version, API: &routing.API{Hosts: []string{pd}}}
	for _, h := range []string{"a." + pd, "b." + pd, "deep.x." + pd} {
		doc.Routes = append(doc.Routes, routing.Route{Host: h, Application: "app"})
	}
	var ms []*Manager
	for i, budget := range []int{1, 1, 0} {
		ms = append(ms, e.manager(t, i, Options{PlatformDomains: []string{pd}, PlatformBudget: budget, CustomBudget: 10, Poll: time.Hour,
			DNS01: &DNS01{Platform: true, PropagationTimeout: noPropagationCheck}}))
	}
	// The budget-0 manager first: it must never order, whoever is fastest.
	ms[2].Sync(doc)
	if s := stateOf(ms[2], "*."+pd); s.State != StateBacklog || s.Challenge != "dns-01" {
		t.Fatalf("budget 0: wildcard %+v, want backlog by dns-01", s)
	}
	ms[0].Sync(doc)
	ms[1].Sync(doc)

	// Each check steps every manager's loop once (the budget-0 manager loads from the
	// store at its loop's lookup, every 20 polls).
	nodetest.WaitFor(t, 120*time.Second, "every manager holds the wildcard and the apex", func() bool {
		for _, m := range ms {
			m.poll()
		}
		for _, m := range ms {
			if stateOf(m, "*."+pd).State != StateValid || stateOf(m, pd).State != StateValid {
				return false
			}
		}
		return true
	})
	if issued := e.peb.Issued(); len(issued) != 2 {
		t.Fatalf("Pebble issued %d certificates (%v), want 2 (the wildcard and the apex, once for the fleet)", len(issued), issued)
	}
	if n := e.peb.Orders(); n != 2 {
		t.Fatalf("Pebble accepted %d orders, want 2", n)
	}
	serials := map[string]string{}
	for i, m := range ms {
		set := m.Current()
		for _, h := range []string{"a." + pd, "b." + pd, pd, "*." + pd} {
			if !set.FleetCerts.Managed[h] {
				t.Fatalf("manager %d: %s is not managed: %v", i, h, set.FleetCerts.Managed)
			}
		}
		for _, c := range set.FleetCerts.Certificates {
			if c.Names[0] == "a."+pd || c.Names[0] == "b."+pd {
				t.Fatalf("manager %d: a covered host got its own certificate: %v", i, c.Names)
			}
		}
		for _, n := range []string{"*." + pd, pd} {
			dnsName := n
			if n == "*."+pd {
				dnsName = "anything." + pd
			}
			s := verifyCert(t, e.peb, set, n, dnsName)
			if prev, ok := serials[n]; ok && prev != s {
				t.Fatalf("manager %d holds %s serial %s, another %s", i, n, s, prev)
			}
			serials[n] = s
		}
		if i > 0 && set.Fingerprint != ms[0].Current().Fingerprint {
			t.Fatalf("fingerprints differ: %s %s", set.Fingerprint, ms[0].Current().Fingerprint)
		}
	}
	if s := stateOf(ms[2], "*."+pd); s.Attempts != 0 || s.ObtainedHere {
		t.Fatalf("the budget-0 manager ordered the wildcard: %+v", s)
	}
	// The deeper host is not covered by a one-label wildcard: HTTP-01, paced (the budget
	// of 1 went to the wildcard), so it waits.
	if s := stateOf(ms[0], "deep.x."+pd); s.State != StateBacklog || s.Challenge != "" {
		t.Fatalf("deep.x: %+v, want backlog by HTTP-01", s)
	}
	nodetest.WaitFor(t, 30*time.Second, "no TXT record left in the zone", func() bool {
		return len(e.bind.ZoneTXT(t, "example.test")) == 0
	})
	if n := strings.Count(e.bind.Log(), "adding an RR at '_acme-challenge."+pd+"' TXT"); n < 1 || n > 2 {
		t.Fatalf("BIND logged %d signed TXT additions, want 1 or 2 (one per authorization; Pebble may reuse one)", n)
	}
	assertNoSecret(t, e, ms...)
}

// assertNoSecret: the TSIG secret is in no log line of any manager (CertMagic's
// included, at debug level), no status, no error.
func assertNoSecret(t *testing.T, e *dnsEnv, ms ...*Manager) {
	t.Helper()
	secret := e.bind.Key.Secret
	if strings.Contains(e.logs.String(), secret) {
		t.Fatal("the TSIG secret is in the logs")
	}
	if !strings.Contains(e.logs.String(), "_acme-challenge") && !strings.Contains(e.logs.String(), "acme.fleet") {
		t.Fatal("the logs captured nothing of the DNS-01 work: the check above proves nothing")
	}
	for _, m := range ms {
		b, _ := json.Marshal(m.Status())
		if strings.Contains(string(b), secret) {
			t.Fatal("the TSIG secret is in a status")
		}
	}
}

// TestCustomWildcardIsOrderedOnlyWithItsDelegationInPlace: a custom wildcard claim
// *.shop.customer.test with delegation into acme.fleet.test (both zones on one real
// BIND, the customer's edited by the test as the customer would). Without the CNAME
// the status is needs-delegation naming the exact CNAME to create, and over several
// checks no order reaches Pebble; a CNAME pointing at another claim's target is
// refused the same way, naming the right one; with the right CNAME the wildcard is
// issued (the TXT written under acme.fleet.test, validated by Pebble through the
// CNAME) and verifies for any host under it, and the TXT is gone afterwards. The
// solver refuses to write a TXT record for a name the fleet does not issue.
func TestCustomWildcardIsOrderedOnlyWithItsDelegationInPlace(t *testing.T) {
	e := newDNSEnv(t, []string{"fleet.test", "customer.test"}, []string{"fleet.test"})
	const wild = "*.shop.customer.test"
	m := e.manager(t, 0, Options{CustomBudget: 10, Poll: time.Hour, DNS01: &DNS01{DelegationZone: "acme.fleet.test", PropagationTimeout: noPropagationCheck}})
	m.Sync(&routing.Document{V: routing.Version, Routes: []routing.Route{{Host: wild, Application: "shop"}}})

	target := DelegationTarget("acme.fleet.test", "shop", wild)
	if !strings.HasSuffix(target, ".acme.fleet.test") || DelegationTarget("acme.fleet.test", "other-app", wild) == target {
		t.Fatalf("target %q: not under the zone, or not bound to the application", target)
	}
	stepUntil(t, m, 30*time.Second, "the missing delegation reported", func() bool {
		s := stateOf(m, wild)
		return s.State == StateNeedsDelegation && s.Delegation != nil && s.Delegation.CheckedAt != nil
	})
	s, ok := m.NameStatus(wild)
	if _, other := m.NameStatus("x.shop.customer.test"); !ok || other {
		t.Fatalf("NameStatus: %v for the claim, %v for a name the fleet does not issue", ok, other)
	}
	if s.Delegation.CNAME != "_acme-challenge.shop.customer.test" || s.Delegation.Target != target || s.Delegation.InPlace ||
		!strings.Contains(s.LastError, "no CNAME at _acme-challenge.shop.customer.test") || !strings.Contains(s.LastError, target) {
		t.Fatalf("status %+v", s)
	}
	// Several full re-checks later: still no order.
	step(m, 2*delegationEvery+2)
	if n, s := e.peb.Orders(), stateOf(m, wild); n != 0 || s.Attempts != 0 || s.State != StateNeedsDelegation {
		t.Fatalf("without the CNAME: %d orders, status %+v", n, s)
	}

	// A CNAME at another claim's target (another application's) is not this claim's.
	wrong := DelegationTarget("acme.fleet.test", "other-app", wild)
	e.bind.Update(t, "customer.test", []string{"_acme-challenge.shop.customer.test. 60 IN CNAME " + wrong + "."}, nil)
	stepUntil(t, m, 30*time.Second, "the wrong CNAME reported", func() bool {
		return strings.Contains(stateOf(m, wild).LastError, "CNAME to "+wrong+", not to "+target)
	})
	step(m, delegationEvery+2)
	if n, s := e.peb.Orders(), stateOf(m, wild); n != 0 || s.Attempts != 0 {
		t.Fatalf("with another claim's CNAME: %d orders, status %+v", n, s)
	}

	// The solver writes only where the policy says: a challenge for a name the fleet
	// does not issue by DNS-01 is refused before the provider is called.
	sol := m.dnsIssuer.DNS01Solver
	for _, id := range []string{"customer.test", "evil.test", "x.shop.customer.test"} {
		err := sol.Present(context.Background(), acme.Challenge{Type: acme.ChallengeTypeDNS01, Token: "t", KeyAuthorization: "t.k", Identifier: acme.Identifier{Type: "dns", Value: id}})
		if err == nil || !strings.Contains(err.Error(), "not a name this fleet issues by DNS-01") {
			t.Fatalf("Present for %s: %v", id, err)
		}
	}
	if txt := e.bind.ZoneTXT(t, "fleet.test"); len(txt) != 0 {
		t.Fatalf("TXT written for a refused name: %q", txt)
	}

	// The right CNAME: issued.
	e.bind.Update(t, "customer.test", []string{"_acme-challenge.shop.customer.test. 60 IN CNAME " + target + "."},
		[]string{"_acme-challenge.shop.customer.test. 60 IN CNAME x."})
	stepUntil(t, m, 120*time.Second, "the custom wildcard issued", func() bool { return stateOf(m, wild).State == StateValid })
	s = stateOf(m, wild)
	if !s.Delegation.InPlace || s.LastError != "" || s.Challenge != "dns-01" {
		t.Fatalf("issued, but status %+v", s)
	}
	verifyCert(t, e.peb, m.Current(), wild, "anything.shop.customer.test")
	if n := len(e.peb.Issued()); n != 1 || e.peb.Orders() != 1 {
		t.Fatalf("Pebble issued %d on %d orders, want 1 on 1", n, e.peb.Orders())
	}
	if !strings.Contains(e.bind.Log(), "adding an RR at '"+target+"' TXT") {
		t.Fatal("BIND did not log the TXT at the delegated target")
	}
	nodetest.WaitFor(t, 30*time.Second, "no TXT left in the fleet's zone", func() bool { return len(e.bind.ZoneTXT(t, "fleet.test")) == 0 })

	// The customer removes the CNAME: CertMagic's next order or renewal of the name is
	// aborted before it reaches the CA (cert_obtaining looks the CNAME up again).
	e.bind.Update(t, "customer.test", nil, []string{"_acme-challenge.shop.customer.test. 60 IN CNAME x."})
	err := m.onEvent(context.Background(), "cert_obtaining", map[string]any{"identifier": wild, "renewal": true})
	if err == nil || !strings.Contains(err.Error(), "no CNAME at _acme-challenge.shop.customer.test") {
		t.Fatalf("renewal without the delegation: %v", err)
	}
	if s := stateOf(m, wild); s.Delegation.InPlace || !strings.Contains(s.LastError, "no CNAME") || s.State != StateValid {
		t.Fatalf("after the CNAME went: %+v (the held certificate stays valid until it expires)", s)
	}
	assertNoSecret(t, e, m)
}

// step runs n polls of m's loop (each one a chance to act), the test's ticker: a
// manager the test steps has Options.Poll an hour.
func step(m *Manager, n int) {
	for range n {
		m.poll()
	}
}

// stepUntil steps m's loop until cond holds (CertMagic works on its own goroutines).
func stepUntil(t *testing.T, m *Manager, d time.Duration, what string, cond func() bool) {
	t.Helper()
	nodetest.WaitFor(t, d, what, func() bool {
		m.poll()
		return cond()
	})
}

// TestDNS01OptionsAreChecked: the combinations New refuses.
func TestDNS01OptionsAreChecked(t *testing.T) {
	prov := &rfc2136.Provider{Server: "127.0.0.1:53", Zones: []string{"fleet.test"}, KeyName: "k", Secret: "c2VjcmV0"}
	cases := []struct {
		name string
		opt  Options
		sub  string
	}{
		{"no provider", Options{DNS01: &DNS01{Platform: true}}, "without a DNS provider"},
		{"both platform wildcard paths", Options{PlatformWildcard: true, DNS01: &DNS01{Provider: prov, Platform: true}}, "exclude each other"},
		{"bad delegation zone", Options{DNS01: &DNS01{Provider: prov, DelegationZone: "not a zone"}}, "not a domain name"},
		{"one-label delegation zone", Options{DNS01: &DNS01{Provider: prov, DelegationZone: "test"}}, "not a domain name"},
		{"delegation zone outside the provider's zones", Options{DNS01: &DNS01{Provider: prov, DelegationZone: "acme.other.test"}}, "delegation zone acme.other.test is in none of the DNS provider's zones (fleet.test)"},
		{"platform domain outside the provider's zones", Options{PlatformDomains: []string{"apps.example.com"}, DNS01: &DNS01{Provider: prov, Platform: true}}, "_acme-challenge.apps.example.com (the platform wildcard's challenge) is in none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opt.Storage = &certmagic.FileStorage{Path: t.TempDir()}
			_, err := New(c.opt)
			if err == nil || !strings.Contains(err.Error(), c.sub) {
				t.Fatalf("New: %v, want %q", err, c.sub)
			}
		})
	}
	if _, err := New(Options{Storage: &certmagic.FileStorage{Path: t.TempDir()}, DNS01: &DNS01{Provider: prov, DelegationZone: "acme.fleet.test."}}); err != nil {
		t.Fatal(errors.Join(errors.New("a valid DNS-01 configuration"), err))
	}
}

// TestDNS01FailuresAreHeldOffAndPropagationWaitsAreBoundedAndVisible: DNS-01 orders
// share HTTP-01's hold-offs. A provider whose TSIG secret BIND does not know fails its
// first order (BIND refuses the signed update: the status says so, without the
// secret) and, with a fail limit of 1, is held off: no second order over many polls.
// A propagation check against a server that never gets the record (a secondary that
// lags: a second BIND serving the same zone) shows the wait in the status, with its
// bound, and fails when the bound passes; that name is held off too.
func TestDNS01FailuresAreHeldOffAndPropagationWaitsAreBoundedAndVisible(t *testing.T) {
	e := newDNSEnv(t, []string{"example.test"}, []string{"example.test"})
	const pd = "apps.example.test"
	doc := &routing.Document{V: routing.Version, API: &routing.API{Hosts: []string{pd}}}

	// A wrong secret.
	badSecret := bindtest.NewKey("x").Secret
	m := e.manager(t, 0, Options{PlatformDomains: []string{pd}, FailLimit: 1, FailHold: time.Hour, Poll: time.Hour, DNS01: &DNS01{Platform: true}})
	m.opt.DNS01.Provider = &rfc2136.Provider{Server: e.bind.Addr, Zones: []string{"example.test"}, KeyName: e.bind.Key.Name, Secret: badSecret}
	m.Sync(doc)
	stepUntil(t, m, 60*time.Second, "the apex failed", func() bool { return stateOf(m, pd).State == StateFailed })
	s := stateOf(m, pd)
	if !strings.Contains(s.LastError, "NOTAUTH (TSIG BADSIG)") || s.NextAttempt == nil || time.Until(*s.NextAttempt) < 50*time.Minute {
		t.Fatalf("status %+v: want the refusal and a hold-off of an hour", s)
	}
	orders := e.peb.Orders()
	step(m, 2*20+1) // two of the loop's lookups, each a reconcile
	if n := e.peb.Orders(); n != orders || stateOf(m, pd).Attempts != 1 {
		t.Fatalf("held off, yet %d orders (was %d), status %+v", n, orders, stateOf(m, pd))
	}
	if strings.Contains(e.logs.String(), badSecret) || strings.Contains(e.logs.String(), e.bind.Key.Secret) {
		t.Fatal("a TSIG secret is in the logs")
	}
	if txt := e.bind.ZoneTXT(t, "example.test"); len(txt) != 0 {
		t.Fatalf("a refused update wrote %q", txt)
	}

	// A propagation check that never sees the record: a lagging server.
	lagging := bindtest.Start(t, bindtest.Config{Zones: []string{"example.test"}})
	// The bound is 1 s: CertMagic checks 2 s after writing the record, then gives up.
	m2 := e.manager(t, 1, Options{PlatformDomains: []string{pd}, PlatformBudget: 1, FailLimit: 1, FailHold: time.Hour,
		DNS01: &DNS01{Platform: true, PropagationTimeout: time.Second}})
	m2.opt.DNS01.Resolvers = []string{lagging.Addr}
	m2.Sync(&routing.Document{V: routing.Version, API: &routing.API{Hosts: []string{pd}}, Routes: []routing.Route{{Host: "a." + pd, Application: "app"}}})
	var phase string
	nodetest.WaitFor(t, 60*time.Second, "the propagation wait in the status", func() bool {
		phase = stateOf(m2, "*."+pd).Phase + stateOf(m2, pd).Phase
		return strings.Contains(phase, "to propagate")
	})
	if !strings.Contains(phase, "_acme-challenge."+pd) || !strings.Contains(phase, "at most 1s") {
		t.Fatalf("phase %q", phase)
	}
	nodetest.WaitFor(t, 60*time.Second, "the propagation timeout", func() bool {
		a, w := stateOf(m2, pd), stateOf(m2, "*."+pd)
		return a.State == StateFailed && w.State == StateFailed
	})
	for _, n := range []string{pd, "*." + pd} {
		if s := stateOf(m2, n); !strings.Contains(s.LastError, "propagate") || s.Phase != "" {
			t.Fatalf("%s: %+v", n, s)
		}
	}
	// The written record is cleaned up after the failed wait, on the primary.
	nodetest.WaitFor(t, 30*time.Second, "the TXT records removed after the failure", func() bool { return len(e.bind.ZoneTXT(t, "example.test")) == 0 })
	if n := len(e.peb.Issued()); n != 0 {
		t.Fatalf("Pebble issued %d", n)
	}
}

// TestPlatformWildcardRenewsOnceByDNS01AndEveryManagerRolls: two managers on one store
// that holds the platform wildcard and apex from an earlier issuance, both inside their
// renewal window (a day left of 61). The apex, an API host, is taken on and renewed at
// once; the wildcard is left to backlog (a platform budget of 0), loaded from the store
// by the loop's lookup, and renewed by CertMagic's maintenance (stepped by the test:
// Cache.RenewManagedCertificates), which must pick the DNS configuration for a cached
// wildcard (HTTP-01 cannot renew it). Both are renewed by DNS-01 exactly once for the
// fleet (the store's locks): Pebble issues two certificates on two orders, each logged
// as a renewal by one manager; both managers roll to the renewed serials, which verify
// against Pebble's root; the renewals' TXT records are removed. The renewed
// certificates (Pebble's 90 days) are outside the window, so no wall-clock window
// decides how many renewals there are.
func TestPlatformWildcardRenewsOnceByDNS01AndEveryManagerRolls(t *testing.T) {
	e := newDNSEnv(t, []string{"example.test"}, []string{"example.test"})
	const pd = "apps.example.test"
	names := []string{"*." + pd, pd}
	issuerKey := (&certmagic.ACMEIssuer{CA: e.peb.Directory}).IssuerKey()
	stale := map[string]string{}
	for _, n := range names {
		stale[n] = storeDueCert(t, e.store, issuerKey, n)
	}
	doc := &routing.Document{V: routing.Version, API: &routing.API{Hosts: []string{pd}},
		Routes: []routing.Route{{Host: "a." + pd, Application: "app"}}}
	var ms []*Manager
	for i := range 2 {
		m := e.manager(t, i, Options{PlatformDomains: []string{pd}, PlatformBudget: 0, RenewCheckInterval: time.Hour,
			DNS01: &DNS01{Platform: true, PropagationTimeout: noPropagationCheck}})
		m.Sync(doc)
		ms = append(ms, m)
	}
	// The loop's lookup (every 20 polls) loads the backlogged wildcard from the store.
	for _, m := range ms {
		for range 20 {
			m.poll()
		}
	}
	nodetest.WaitFor(t, 30*time.Second, "both managers hold the stored wildcard", func() bool {
		for _, m := range ms {
			m.poll()
			if s := stateOf(m, "*."+pd); s.State != StateValid {
				return false
			}
		}
		return true
	})
	if s := stateOf(ms[0], "*."+pd); s.Serial != stale["*."+pd] || s.Attempts != 0 {
		t.Fatalf("wildcard %+v: want the stored certificate (serial %s), not ordered", s, stale["*."+pd])
	}
	// Maintenance steps (CertMagic's renewal check, the test's ticker) until both
	// managers hold renewed certificates for both names.
	nodetest.WaitFor(t, 90*time.Second, "both managers on the same renewed certificates", func() bool {
		for _, m := range ms {
			if err := m.cache.RenewManagedCertificates(t.Context()); err != nil {
				t.Fatal(err)
			}
			m.poll()
		}
		for _, n := range names {
			a, b := stateOf(ms[0], n), stateOf(ms[1], n)
			if a.State != StateValid || a.Serial != b.Serial || a.Serial == stale[n] {
				return false
			}
		}
		return true
	})
	if n, o := len(e.peb.Issued()), e.peb.Orders(); n != 2 || o != 2 {
		t.Fatalf("Pebble issued %d certificates on %d orders, want 2 on 2 (each name renewed once for the fleet)", n, o)
	}
	// CertMagic emits cert_obtained (the manager logs it) after the certificate is stored.
	nodetest.WaitFor(t, 30*time.Second, "the renewals logged", func() bool {
		return strings.Count(e.logs.String(), `msg="fleet certificate obtained"`) >= 2
	})
	logs := e.logs.String()
	for _, n := range names {
		if c := strings.Count(logs, `msg="fleet certificate obtained" node=0 name=`+n+` renewal=true`) +
			strings.Count(logs, `msg="fleet certificate obtained" node=1 name=`+n+` renewal=true`); c != 1 {
			t.Fatalf("%s: %d renewals logged, want 1", n, c)
		}
		dnsName := strings.Replace(n, "*", "anything", 1)
		if s := verifyCert(t, e.peb, ms[1].Current(), n, dnsName); s != stateOf(ms[0], n).Serial {
			t.Fatalf("%s: manager 1 delivers serial %s, the status says %s", n, s, stateOf(ms[0], n).Serial)
		}
	}
	if c := strings.Count(logs, `msg="fleet certificate obtained"`); c != 2 {
		t.Fatalf("%d obtains logged, want the 2 renewals", c)
	}
	if ms[0].Current().Fingerprint != ms[1].Current().Fingerprint {
		t.Fatal("the managers deliver different sets")
	}
	nodetest.WaitFor(t, 30*time.Second, "no TXT record left after the renewals", func() bool {
		return len(e.bind.ZoneTXT(t, "example.test")) == 0
	})
}

// storeDueCert writes to storage, as CertMagic stores what issuerKey issued, a
// certificate for name inside its renewal window (issued 60 days ago, a day left; a
// throwaway CA signs it), and returns its serial as Status gives it.
func storeDueCert(t *testing.T, storage certmagic.Storage, issuerKey, name string) string {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "earlier CA"},
		NotBefore: now.Add(-90 * 24 * time.Hour), NotAfter: now.Add(90 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial := big.NewInt(now.UnixNano())
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: serial, DNSNames: []string{name},
		NotBefore: now.Add(-60 * 24 * time.Hour), NotAfter: now.Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	meta, _ := json.Marshal(certmagic.CertificateResource{SANs: []string{name}})
	for k, v := range map[string][]byte{
		certmagic.StorageKeys.SiteCert(issuerKey, name): append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
			pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...),
		certmagic.StorageKeys.SitePrivateKey(issuerKey, name): pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		certmagic.StorageKeys.SiteMeta(issuerKey, name):       meta,
	} {
		if err := storage.Store(t.Context(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	return strings.ToLower(serial.Text(16))
}

// TestTurningDNS01OnKeepsEachHostsCertificateUntilTheWildcardArrives: a fleet whose
// platform hosts have certificates of their own (HTTP-01, validated by Pebble through
// the same BIND) restarts with DNS-01 for the platform. The new manager delivers the
// host's own certificate, loaded from the store and never ordered again, until the
// wildcard is held, then the wildcard alone: once the host had a certificate, no Set
// lacks one for it. Pebble issues one more certificate (the wildcard; the apex's is
// loaded from the store).
func TestTurningDNS01OnKeepsEachHostsCertificateUntilTheWildcardArrives(t *testing.T) {
	const pd, host = "apps.example.test", "a.apps.example.test"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := bindtest.Start(t, bindtest.Config{Zones: []string{"example.test"}, Resolver: true,
		Records: []string{pd + ". 60 IN A 127.0.0.1", host + ". 60 IN A 127.0.0.1"}})
	e := &dnsEnv{bind: b, peb: pebbletest.Start(t, pebbletest.Config{DNSServer: b.Addr, HTTPPort: ln.Addr().(*net.TCPAddr).Port}),
		prov:  &rfc2136.Provider{Server: b.Addr, Zones: []string{"example.test"}, KeyName: b.Key.Name, Secret: b.Key.Secret},
		store: &certmagic.FileStorage{Path: t.TempDir()}, logs: &proc.Buffer{}}
	doc := &routing.Document{V: routing.Version, API: &routing.API{Hosts: []string{pd}}, Routes: []routing.Route{{Host: host, Application: "app"}}}

	// Before: HTTP-01 for the host and the apex.
	m1, err := New(Options{Storage: e.store, CA: e.peb.Directory, Roots: e.peb.CARoots, RenewCheckInterval: time.Minute,
		PlatformDomains: []string{pd}, PlatformBudget: 10, Poll: 100 * time.Millisecond, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	startServing(t, m1, ln, new(atomic.Int64))
	m1.Sync(doc)
	nodetest.WaitFor(t, 90*time.Second, "the host and the apex by HTTP-01", func() bool {
		return stateOf(m1, host).State == StateValid && stateOf(m1, pd).State == StateValid
	})
	own := stateOf(m1, host).Serial
	m1.Close()
	if n := len(e.peb.Issued()); n != 2 {
		t.Fatalf("Pebble issued %d before, want 2", n)
	}

	// After: DNS-01 for the platform, on the same store.
	var m2 *Manager
	var mu sync.Mutex
	var gaps []string
	covered, sawOwn := false, false
	onChange := func() {
		set := m2.Current()
		mu.Lock()
		defer mu.Unlock()
		has := false
		for _, c := range set.FleetCerts.Certificates {
			if c.Names[0] == host || c.Names[0] == "*."+pd {
				has = true
			}
			if c.Names[0] == host {
				sawOwn = true
			}
		}
		if covered && !has {
			gaps = append(gaps, set.String())
		}
		covered = covered || has
	}
	m2 = e.manager(t, 1, Options{PlatformDomains: []string{pd}, PlatformBudget: 1, DNS01: &DNS01{Platform: true, PropagationTimeout: noPropagationCheck}, OnChange: onChange})
	m2.Sync(doc)
	nodetest.WaitFor(t, 90*time.Second, "the wildcard", func() bool { return stateOf(m2, "*."+pd).State == StateValid })
	nodetest.WaitFor(t, 10*time.Second, "the host's own certificate no longer delivered", func() bool {
		for _, c := range m2.Current().FleetCerts.Certificates {
			if c.Names[0] == host {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	if !sawOwn {
		t.Fatal("the host's own certificate was never delivered by the new manager: the bridge was not exercised")
	}
	if len(gaps) > 0 {
		t.Fatalf("sets without a certificate for %s after it had one: %v", host, gaps)
	}
	if n := len(e.peb.Issued()); n != 3 {
		t.Fatalf("Pebble issued %d in all, want 3 (the wildcard only, after)", n)
	}
	if s := stateOf(m2, pd); s.State != StateValid || s.Attempts != 0 {
		t.Fatalf("apex %+v: want the stored certificate, not a new order", s)
	}
	t.Logf("the host's own certificate %s bridged until the wildcard %s", own, stateOf(m2, "*."+pd).Serial)
}
