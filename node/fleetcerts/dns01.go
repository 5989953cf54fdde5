package fleetcerts

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/libdns/libdns"
	"github.com/mholt/acmez/v3"
	"github.com/mholt/acmez/v3/acme"
	"github.com/miekg/dns"
)

// DNS-01 (issue 27): the names HTTP-01 cannot cover, issued once for the fleet like
// every other name (the store's locks, the same Set):
//
//   - the platform wildcard *.<domain> of each platform domain whose hosts the document
//     routes (one label under it: the hosts it covers take no certificate of their own)
//     and the platform apex, with the TXT record at _acme-challenge.<domain> in a zone
//     the fleet's DNS provider edits;
//   - custom wildcard claims *.<name>, by delegation: the customer points
//     _acme-challenge.<name> by CNAME at <label>.<delegation zone> (DelegationTarget), a
//     name in a zone the fleet controls, and the TXT record is written there
//     (CertMagic's DNS01Solver with OverrideDomain). The CNAME is looked up before any
//     order, and again when CertMagic is about to order or renew (cert_obtaining,
//     aborted when it is missing): no order is placed for a missing delegation.
//
// The TXT records are written only for names this manager issues by DNS-01, at the
// name the policy derives (never a name from a request), and the provider refuses
// anything outside its zones.

// StateNeedsDelegation: a custom wildcard whose delegation CNAME is not in place; no
// order is placed until it is (LastError and Delegation say what to create).
const StateNeedsDelegation = "needs-delegation"

// DNS01 configures DNS-01 issuance (Options.DNS01).
type DNS01 struct {
	// Provider writes and removes the TXT records: any libdns provider (rfc2136.Provider
	// for RFC 2136 with TSIG).
	Provider certmagic.DNSProvider
	// Platform issues each platform domain's wildcard and apex by DNS-01 (the provider
	// must edit the zone holding _acme-challenge.<domain>). Not with PlatformWildcard
	// (Traefik's own resolver).
	Platform bool
	// DelegationZone is the zone custom wildcards are delegated into (the provider must
	// edit it); empty: custom wildcards get no fleet certificate.
	DelegationZone string
	// Resolvers (host:port) answer the zone lookup, the propagation check and the
	// delegation check; empty: the system's resolvers, and for propagation the zone's
	// authoritative servers.
	Resolvers []string
	// PropagationTimeout bounds the wait for the TXT record to be visible (0: 2 min);
	// PropagationDelay is waited before the first check. TTL is the record's (0: 60 s).
	PropagationTimeout, PropagationDelay, TTL time.Duration
}

// dnsName is how one wanted name is issued by DNS-01.
type dnsName struct {
	// owner is the CNAME the customer creates (delegated) or the TXT record's name.
	owner string
	// target is where the TXT record goes for a delegated name ("" : at owner).
	target string
}

func (d dnsName) delegated() bool { return d.target != "" }

// delegationState is the last check of a delegated name's CNAME.
type delegationState struct {
	checked time.Time
	ok      bool
	reason  string
}

// checkProviderZones refuses, when the provider lists its zones (libdns.ZoneLister),
// a configuration whose TXT records would fall outside all of them: every order would
// be placed and then fail.
func checkProviderZones(d *DNS01, platformDomains []string) error {
	zl, ok := d.Provider.(libdns.ZoneLister)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	zones, err := zl.ListZones(ctx)
	if err != nil || len(zones) == 0 {
		return nil // the provider cannot say: the first order will
	}
	var names []string
	in := func(name string) bool {
		for _, z := range zones {
			if dns.IsSubDomain(dns.CanonicalName(z.Name), dns.CanonicalName(name)) {
				return true
			}
		}
		return false
	}
	for _, z := range zones {
		names = append(names, strings.TrimSuffix(z.Name, "."))
	}
	if d.DelegationZone != "" && !in("x."+d.DelegationZone) {
		return fmt.Errorf("fleetcerts: the delegation zone %s is in none of the DNS provider's zones (%s)", d.DelegationZone, strings.Join(names, ", "))
	}
	if d.Platform {
		for _, pd := range platformDomains {
			if !in(ChallengeCNAME(pd)) {
				return fmt.Errorf("fleetcerts: %s (the platform wildcard's challenge) is in none of the DNS provider's zones (%s)", ChallengeCNAME(pd), strings.Join(names, ", "))
			}
		}
	}
	return nil
}

// DelegationTarget is the name a custom wildcard's _acme-challenge CNAME must point at:
// a label derived from the application and the name (a claim of the same name by
// another application gets another label, so a CNAME made for one claim never
// validates another's) under zone.
func DelegationTarget(zone, application, wildcard string) string {
	sum := sha256.Sum256([]byte("scafo-acme-delegation\x00" + application + "\x00" + wildcard))
	label := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10]))
	return label + "." + strings.TrimSuffix(strings.ToLower(zone), ".")
}

// ChallengeCNAME is the name a delegation CNAME is created at for wildcard (or name).
func ChallengeCNAME(wildcard string) string {
	return "_acme-challenge." + strings.TrimPrefix(wildcard, "*.")
}

// isDNSName reports whether name is issued by DNS-01 under opt (a pure function of
// the name, so CertMagic's cache can ask without locks).
func (opt *Options) isDNSName(name string) bool {
	if opt.DNS01 == nil {
		return false
	}
	if strings.HasPrefix(name, "*.") {
		return true
	}
	if opt.DNS01.Platform {
		for _, pd := range opt.PlatformDomains {
			if name == pd {
				return true
			}
		}
	}
	return false
}

// checkDelegation looks up owner's CNAME and reports whether it points at target.
func (m *Manager) checkDelegation(ctx context.Context, owner, target string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*m.lookupTimeout)
	defer cancel()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(owner), dns.TypeCNAME)
	var lastErr error
	for _, srv := range certmagic.RecursiveNameservers(m.opt.DNS01.Resolvers) {
		c := &dns.Client{Timeout: m.lookupTimeout}
		r, _, err := c.ExchangeContext(ctx, q, srv)
		if err == nil && r.Truncated {
			c.Net = "tcp"
			r, _, err = c.ExchangeContext(ctx, q, srv)
		}
		if err != nil {
			lastErr = err
			continue
		}
		if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
			lastErr = fmt.Errorf("%s answered %s", srv, dns.RcodeToString[r.Rcode])
			continue
		}
		for _, rr := range r.Answer {
			if cn, ok := rr.(*dns.CNAME); ok && strings.EqualFold(cn.Hdr.Name, dns.Fqdn(owner)) {
				if strings.EqualFold(strings.TrimSuffix(cn.Target, "."), target) {
					return true, ""
				}
				return false, fmt.Sprintf("delegation: %s is a CNAME to %s, not to %s (this claim's): point it at %s",
					owner, strings.TrimSuffix(cn.Target, "."), target, target)
			}
		}
		return false, fmt.Sprintf("delegation: no CNAME at %s: create %s CNAME %s. (no order is placed until it is in place)", owner, owner, target)
	}
	return false, fmt.Sprintf("delegation: looking up %s: %v (no order is placed until the CNAME is confirmed)", owner, lastErr)
}

// delegationEvery is how many polls apart a delegated name's CNAME is looked up again.
const delegationEvery = 20

// checkDelegations looks up the CNAMEs of the delegated names due a check (never
// checked, or delegationEvery polls ago), at most 50 per pass and all at once (a pass
// takes one lookup's timeout at most), and reports whether any changed.
func (m *Manager) checkDelegations(all bool) bool {
	type job struct {
		name string
		d    dnsName
	}
	m.mu.Lock()
	var jobs []job
	for n, d := range m.dns {
		if !d.delegated() {
			continue
		}
		st := m.names[n]
		if st == nil {
			st = &nameState{}
			m.names[n] = st
		}
		if all || st.deleg == nil {
			jobs = append(jobs, job{n, d})
		}
		if len(jobs) == 50 {
			break
		}
	}
	m.mu.Unlock()
	// The lookups run at once: each may take its whole timeout (a customer's DNS that
	// never answers), and this runs on the manager's loop, so one after the other a
	// tenant's 50 black-holed claims would hold every name's issuance and renewal for
	// minutes per pass.
	type result struct {
		ok     bool
		reason string
	}
	results := make([]result, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, reason := m.checkDelegation(context.Background(), j.d.owner, j.d.target)
			results[i] = result{ok, reason}
		}()
	}
	wg.Wait()
	changed := false
	for i, j := range jobs {
		ok, reason := results[i].ok, results[i].reason
		m.mu.Lock()
		if st := m.names[j.name]; st != nil && m.dns[j.name] == j.d {
			if st.deleg == nil || st.deleg.ok != ok || st.deleg.reason != reason {
				changed = true
			}
			st.deleg = &delegationState{checked: m.now(), ok: ok, reason: reason}
			if !ok {
				st.lastErr = reason
			} else if strings.HasPrefix(st.lastErr, "delegation: ") {
				st.lastErr = ""
			}
		}
		m.mu.Unlock()
	}
	return changed
}

// gateDelegation is called on cert_obtaining (before any order or renewal): a
// delegated name's CNAME is looked up now, and a missing one aborts the order.
func (m *Manager) gateDelegation(ctx context.Context, name string) error {
	m.mu.Lock()
	d, ok := m.dns[name]
	m.mu.Unlock()
	if !ok || !d.delegated() {
		return nil
	}
	okNow, reason := m.checkDelegation(ctx, d.owner, d.target)
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.names[name]; st != nil {
		st.deleg = &delegationState{checked: m.now(), ok: okNow, reason: reason}
		if !okNow {
			st.lastErr = reason
			// CertMagic's retries would each come back here; stop them until the
			// delegation is back (checkDelegations, then reconcile).
			if cancel, ok := m.managed[name]; ok {
				cancel()
				delete(m.managed, name)
			}
		}
	}
	if !okNow {
		return errors.New(reason)
	}
	return nil
}

// dnsSolver is the DNS-01 solver of the fleet's DNS issuer: per challenge it finds
// where the TXT record goes (the policy's, never the request's) and hands it to one of
// CertMagic's DNS01Solvers (one per target: each remembers what it presented until
// its CleanUp). It reports the phase in the name's status.
type dnsSolver struct {
	m       *Manager
	mu      sync.Mutex
	solvers map[string]*certmagic.DNS01Solver // by override domain ("": none)
}

var (
	_ acmez.Solver = (*dnsSolver)(nil)
	_ acmez.Waiter = (*dnsSolver)(nil)
)

// target is where the TXT record for identifier goes: "" at _acme-challenge.<id> (a
// platform name), a delegated target, or an error for a name this manager does not
// issue by DNS-01.
func (m *Manager) dnsTarget(id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.dns["*."+id]; ok && d.delegated() {
		return d.target, nil
	}
	if d, ok := m.dns[id]; ok && !d.delegated() {
		return "", nil
	}
	if d, ok := m.dns["*."+id]; ok && !d.delegated() {
		return "", nil
	}
	return "", fmt.Errorf("fleet certificates: %q is not a name this fleet issues by DNS-01: no TXT record written", id)
}

func (s *dnsSolver) solver(ch acme.Challenge) (*certmagic.DNS01Solver, error) {
	target, err := s.m.dnsTarget(ch.Identifier.Value)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.solvers == nil {
		s.solvers = map[string]*certmagic.DNS01Solver{}
	}
	sol := s.solvers[target]
	if sol == nil {
		o := s.m.opt.DNS01
		sol = &certmagic.DNS01Solver{DNSManager: certmagic.DNSManager{
			DNSProvider: o.Provider, TTL: o.TTL, Resolvers: o.Resolvers,
			PropagationDelay: o.PropagationDelay, PropagationTimeout: o.PropagationTimeout,
			OverrideDomain: target, Logger: s.m.cfg.Logger,
		}}
		s.solvers[target] = sol
	}
	return sol, nil
}

func recordName(ch acme.Challenge, sol *certmagic.DNS01Solver) string {
	if sol.OverrideDomain != "" {
		return sol.OverrideDomain
	}
	return ch.DNS01TXTRecordName()
}

func (s *dnsSolver) Present(ctx context.Context, ch acme.Challenge) error {
	sol, err := s.solver(ch)
	if err != nil {
		return err
	}
	s.m.setPhase(ch.Identifier.Value, "dns-01: writing TXT "+recordName(ch, sol))
	if err := sol.Present(ctx, ch); err != nil {
		s.m.setPhase(ch.Identifier.Value, "")
		return err
	}
	return nil
}

func (s *dnsSolver) Wait(ctx context.Context, ch acme.Challenge) error {
	sol, err := s.solver(ch)
	if err != nil {
		return err
	}
	timeout := s.m.opt.DNS01.PropagationTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	s.m.setPhase(ch.Identifier.Value, fmt.Sprintf("dns-01: waiting for TXT %s to propagate (since %s, at most %s)",
		recordName(ch, sol), time.Now().UTC().Format(time.RFC3339), timeout))
	err = sol.Wait(ctx, ch)
	if err != nil {
		s.m.setPhase(ch.Identifier.Value, "")
		return err
	}
	s.m.setPhase(ch.Identifier.Value, "dns-01: TXT "+recordName(ch, sol)+" visible; the CA validates")
	return nil
}

func (s *dnsSolver) CleanUp(ctx context.Context, ch acme.Challenge) error {
	defer s.m.setPhase(ch.Identifier.Value, "")
	sol, err := s.solver(ch)
	if err != nil {
		return err
	}
	return sol.CleanUp(ctx, ch)
}

// setPhase records the DNS-01 phase of the names identifier stands for.
func (m *Manager) setPhase(id, phase string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range []string{id, "*." + id} {
		if st := m.names[n]; st != nil && m.dns[n] != (dnsName{}) {
			st.phase = phase
		}
	}
}
