// Package fleetcerts issues the fleet's certificates (docs/design.md §10): every node runs
// CertMagic over the fleet store, CertMagic's storage locks make one node issue a name
// while the others wait and load the result, HTTP-01 challenges are kept in the store
// (CertMagic's distributed solver) so any node answers any challenge, and the
// certificates held are handed to the render as one immutable Set.
//
// Names are exactly the document's non-wildcard route hosts and API hosts, minus, when
// a platform wildcard certificate is configured, the platform hosts (that certificate
// covers them). Platform hosts are otherwise paced: a node takes on at most
// PlatformBudget platform hosts without a certificate per hour; the rest wait, listed
// as "backlog". Custom domains are paced the same way on their own budget
// (CustomBudget); the API hosts never are. A name without a certificate that fails
// FailLimit obtains in a row is not managed for a hold-off (FailHold, doubling up to
// FailHoldMax), so a name whose DNS points elsewhere costs a few orders a day. A name that leaves the document stops being managed (its pending obtain
// is cancelled, CertMagic stops renewing it) and leaves the Set.
//
// With Options.DNS01 (dns01.go), the wildcards are issued by DNS-01 on the same store
// and locks: each platform domain's wildcard and apex (the platform hosts one label
// under it take the wildcard), and custom wildcard claims by delegation, never ordered
// before the delegation CNAME is in place. They share the budgets and hold-offs above.
//
// Private keys live only in the store and in the Set handed to the render; nothing here
// logs them or puts them in a Status.
package fleetcerts

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/miekg/dns"

	"github.com/scafo/ingress/internal/bucket"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// States of a name.
const (
	StatePending = "pending" // being obtained, or waiting for another node's result
	StateValid   = "valid"   // a certificate that has not expired is held
	StateFailed  = "failed"  // the last attempt failed; CertMagic retries (NextAttempt)
	StateBacklog = "backlog" // a platform host or custom domain waiting for its budget
)

// Hold-off defaults (Options.FailLimit, FailHold, FailHoldMax).
const (
	DefaultFailLimit   = 3
	DefaultFailHold    = time.Hour
	DefaultFailHoldMax = 24 * time.Hour
)

// Options configure a Manager.
type Options struct {
	// Storage is the fleet store's CertMagic storage (certstore.New).
	Storage certmagic.Storage
	// CA is the ACME directory URL; Email the account contact (may be empty).
	CA, Email string
	// Roots, when not nil, are the roots trusted for the connection to CA.
	Roots *x509.CertPool
	// RenewalWindow is CertMagic's RenewalWindowRatio (0: its default).
	RenewalWindow float64
	// RenewCheckInterval is how often CertMagic's maintenance checks for renewals.
	RenewCheckInterval time.Duration
	// PlatformDomains and PlatformWildcard are the names policy; PlatformBudget the
	// platform hosts without a certificate taken on per hour.
	PlatformDomains  []string
	PlatformWildcard bool
	PlatformBudget   int
	// CustomBudget is the custom domains (neither platform hosts nor API hosts)
	// without a certificate taken on per hour; the rest wait, listed as backlog.
	CustomBudget int
	// FailLimit obtains of a name without a certificate failing in a row stop its
	// management for FailHold, doubled at every further hold up to FailHoldMax (0:
	// DefaultFailLimit, DefaultFailHold, DefaultFailHoldMax).
	FailLimit             int
	FailHold, FailHoldMax time.Duration
	// HTTPEntryPoints carry the challenge router in the render.
	HTTPEntryPoints []string
	Log             *slog.Logger
	// Poll is how often the held certificates are compared with CertMagic's cache (in
	// memory) and names missing a certificate are looked up in the store. Default 1s;
	// store lookups of missing names at most every 20 Polls.
	Poll time.Duration
	// Settle is how long a name must have been in the document before this node starts
	// an order for it, so every other node knows the name (and answers its challenge)
	// by the time the CA validates through its Traefik: a name is claimed through one
	// node and reaches the others on their next reconcile pass. The node sets it to
	// two reconcile intervals plus a second.
	Settle time.Duration
	// CertDir, when set, delivers certificates as files under it (files.go) instead of
	// inline PEM.
	CertDir string
	// DNS01, when set, issues the wildcards (and, with DNS01.Platform, the platform
	// apexes) by DNS-01 (dns01.go); nil: exact names only, by HTTP-01.
	DNS01 *DNS01
}

// Set is one immutable view of the fleet certificates, for the render.
type Set struct {
	// Fingerprint changes whenever anything the render reads changes ("" for an empty
	// set with no managed names).
	Fingerprint string
	FleetCerts  *render.FleetCerts
}

// NameStatus is the operator's view of one name. No key material.
type NameStatus struct {
	Name        string     `json:"name"`
	State       string     `json:"state"`
	NotAfter    *time.Time `json:"notAfter,omitempty"`
	Serial      string     `json:"serial,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	// Attempts counts this node's obtain attempts (0: another node issued it, or none
	// was needed).
	Attempts int `json:"attempts,omitempty"`
	// ObtainedHere: this node obtained the certificate it holds.
	ObtainedHere bool `json:"obtainedHere,omitempty"`
	// Challenge is "dns-01" for a name issued by DNS-01 ("" for HTTP-01), and Phase
	// where its challenge stands while one is in progress (the TXT record written,
	// waiting for it to propagate, with the bound).
	Challenge string `json:"challenge,omitempty"`
	Phase     string `json:"phase,omitempty"`
	// Delegation is a custom wildcard's delegation: the CNAME its customer creates and
	// whether it is in place.
	Delegation *Delegation `json:"delegation,omitempty"`
}

// Manager runs fleet issuance on one node.
type Manager struct {
	opt    Options
	log    *slog.Logger
	store  *tracked // opt.Storage, counted so Close can wait for CertMagic
	cache  *certmagic.Cache
	cfg    *certmagic.Config
	issuer *certmagic.ACMEIssuer
	// dnsCfg and dnsIssuer issue the DNS-01 names (Options.DNS01; nil without): an
	// ACME issuer with a DNS-01 solver offers no other challenge, so the exact names
	// keep cfg.
	dnsCfg    *certmagic.Config
	dnsIssuer *certmagic.ACMEIssuer

	// lookups bounds the store reads anonymous challenge requests can cause; chal
	// coalesces them per host (challenge.go).
	lookups *tokenBucket
	chal    challengeLookups

	mu       sync.Mutex
	started  bool
	wanted   map[string]bool      // the names policy's names (the document's)
	since    map[string]time.Time // when each wanted name entered the document
	platform map[string]bool      // of those, platform hosts (paced)
	api      map[string]bool      // of those, API hosts (never paced)
	dns      map[string]dnsName   // of those, the names issued by DNS-01
	covered  map[string]bool      // platform hosts a platform wildcard covers (Managed, no certificate of their own)
	// bridge: covered hosts whose own certificate (issued by HTTP-01 before DNS-01 was
	// turned on, loaded from the store, never ordered) is delivered until their
	// wildcard is held, so turning DNS-01 on leaves no host without a certificate.
	bridge map[string]*heldCert
	// bridgeDue: the covered hosts changed; the loop's next tick runs loadBridges.
	bridgeDue bool
	managed   map[string]context.CancelFunc // names CertMagic manages here
	admitted  []time.Time                   // when platform hosts were taken on (last hour)
	// customAdmitted: when custom domains were taken on (last hour).
	customAdmitted []time.Time
	names          map[string]*nameState
	set            *Set
	polls          int
	settling       bool // a wanted name waits for Settle
	// backlogCursor is where the next loadBacklog pass starts in the sorted backlog.
	backlogCursor int
	onChange      func()

	// mgmtErrs are CertMagic's errors that no event reports (a certificate in the store
	// that cannot be loaded fails "initiating certificate management" and is then
	// never retried by CertMagic), by name; only noteError and takeMgmtErrs touch it,
	// under mgmtMu alone (CertMagic may log while m.mu is held).
	mgmtMu   sync.Mutex
	mgmtErrs map[string]string

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type nameState struct {
	// mgmtFailed: managing the name failed outside an obtain (mgmtErrs); it is
	// managed again from nextAttempt on.
	mgmtFailed  bool
	cert        *heldCert
	lastErr     string
	nextAttempt time.Time
	fails       int
	attempts    int
	// heldUntil: the name failed FailLimit obtains in a row and is not managed before
	// then; holds counts the hold-offs in a row (the next one doubles).
	heldUntil time.Time
	holds     int
	// runAttempts counts the obtain attempts since the name was last taken on: the
	// first was paid for when it was taken on, CertMagic's retries are paid for as
	// they start.
	runAttempts  int
	obtaining    bool
	obtainedHere bool
	// renewErr is why the last renewal of the certificate held failed ("" when it did
	// not, or none was tried): CertMagic renews only inside the renewal window, so a
	// held certificate with renewErr set is inside it and not being replaced. Cleared
	// when a renewal succeeds here or another certificate is taken (a peer renewed).
	renewErr string
	// deleg is the last check of a delegated name's CNAME (nil: not checked yet);
	// phase its DNS-01 challenge's progress.
	deleg *delegationState
	phase string
}

// heldCert is a certificate taken from CertMagic's cache, encoded for the render.
type heldCert struct {
	serial   string
	notAfter time.Time
	certPEM  string
	keyPEM   string
}

// New builds a Manager; Start begins issuance.
func New(opt Options) (*Manager, error) {
	if opt.Storage == nil {
		return nil, errors.New("fleetcerts: no storage")
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.FailLimit <= 0 {
		opt.FailLimit = DefaultFailLimit
	}
	if opt.FailHold <= 0 {
		opt.FailHold = DefaultFailHold
	}
	if opt.FailHoldMax <= 0 {
		opt.FailHoldMax = DefaultFailHoldMax
	}
	if d := opt.DNS01; d != nil {
		if d.Provider == nil {
			return nil, errors.New("fleetcerts: DNS-01 without a DNS provider")
		}
		if d.Platform && opt.PlatformWildcard {
			return nil, errors.New("fleetcerts: the platform wildcard by DNS-01 and by Traefik's resolver (PlatformWildcard) exclude each other")
		}
		if d.DelegationZone != "" {
			if _, ok := dns.IsDomainName(d.DelegationZone); !ok || !strings.Contains(strings.Trim(d.DelegationZone, "."), ".") {
				return nil, fmt.Errorf("fleetcerts: delegation zone %q is not a domain name", d.DelegationZone)
			}
			d.DelegationZone = strings.ToLower(strings.TrimSuffix(d.DelegationZone, "."))
		}
		if err := checkProviderZones(d, opt.PlatformDomains); err != nil {
			return nil, err
		}
	}
	m := &Manager{
		opt:     opt,
		log:     opt.Log,
		lookups: newTokenBucket(50, 100),
		wanted:  map[string]bool{}, platform: map[string]bool{}, api: map[string]bool{}, since: map[string]time.Time{},
		dns: map[string]dnsName{}, covered: map[string]bool{}, bridge: map[string]*heldCert{},
		managed: map[string]context.CancelFunc{},
		names:   map[string]*nameState{},
		set:     &Set{FleetCerts: &render.FleetCerts{HTTPEntryPoints: opt.HTTPEntryPoints, Managed: map[string]bool{}}},
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	m.store = &tracked{Storage: opt.Storage}
	zl := zapToSlog(opt.Log.With("component", "certmagic"), m.noteError)
	var cfg, dnsCfg *certmagic.Config
	m.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(c certmagic.Certificate) (*certmagic.Config, error) {
			if dnsCfg != nil && len(c.Names) > 0 && opt.isDNSName(c.Names[0]) {
				return dnsCfg, nil
			}
			return cfg, nil
		},
		RenewCheckInterval: opt.RenewCheckInterval,
		Logger:             zl,
	})
	cfg = certmagic.New(m.cache, certmagic.Config{
		Storage:            m.store,
		RenewalWindowRatio: opt.RenewalWindow,
		OnEvent:            m.onEvent,
		Logger:             zl,
		// The fleet's certificates are delivered to Traefik, which staples nothing
		// from here; OCSP fetching would only cost requests.
		OCSP: certmagic.OCSPConfig{DisableStapling: true},
	})
	m.cfg = cfg
	if opt.DNS01 != nil {
		dnsCfg = certmagic.New(m.cache, certmagic.Config{
			Storage:            m.store,
			RenewalWindowRatio: opt.RenewalWindow,
			OnEvent:            m.onEvent,
			Logger:             zl,
			OCSP:               certmagic.OCSPConfig{DisableStapling: true},
		})
		m.dnsCfg = dnsCfg
	}
	return m, nil
}

// cfgFor is the CertMagic configuration that issues name.
func (m *Manager) cfgFor(name string) *certmagic.Config {
	if m.dnsCfg != nil && m.opt.isDNSName(name) {
		return m.dnsCfg
	}
	return m.cfg
}

// Start begins issuance. listen is the node API's listener address: CertMagic's
// HTTP-01 solver would otherwise bind port 80 itself; pointed at the node's own
// listener it finds the port taken by a server that answers (HandleChallenge) and only
// keeps the challenge in the store.
func (m *Manager) Start(listen net.Addr) {
	host, port := "", "80"
	if a, ok := listen.(*net.TCPAddr); ok {
		port = strconv.Itoa(a.Port)
		if !a.IP.IsUnspecified() {
			host = a.IP.String()
		}
	}
	p, _ := strconv.Atoi(port)
	m.issuer = certmagic.NewACMEIssuer(m.cfg, certmagic.ACMEIssuer{
		CA:                      m.opt.CA,
		TestCA:                  m.opt.CA,
		Email:                   m.opt.Email,
		Agreed:                  true,
		TrustedRoots:            m.opt.Roots,
		DisableTLSALPNChallenge: true,
		ListenHost:              host,
		AltHTTPPort:             p,
		Logger:                  m.cfg.Logger,
	})
	m.cfg.Issuers = []certmagic.Issuer{m.issuer}
	if m.dnsCfg != nil {
		m.dnsIssuer = certmagic.NewACMEIssuer(m.dnsCfg, certmagic.ACMEIssuer{
			CA:           m.opt.CA,
			TestCA:       m.opt.CA,
			Email:        m.opt.Email,
			Agreed:       true,
			TrustedRoots: m.opt.Roots,
			DNS01Solver:  &dnsSolver{m: m},
			Logger:       m.cfg.Logger,
		})
		m.dnsCfg.Issuers = []certmagic.Issuer{m.dnsIssuer}
	}
	m.mu.Lock()
	m.started = true
	m.mu.Unlock()
	go m.loop()
	m.reconcile()
}

// SetOnChange sets the function called (without locks held) after the Set changed.
func (m *Manager) SetOnChange(f func()) {
	m.mu.Lock()
	m.onChange = f
	m.mu.Unlock()
}

// Close stops issuance and CertMagic's maintenance. Calls after the first do nothing.
func (m *Manager) Close() { m.closeOnce.Do(m.close) }

func (m *Manager) close() {
	m.mu.Lock()
	started := m.started
	for n, cancel := range m.managed {
		cancel()
		delete(m.managed, n)
	}
	m.mu.Unlock()
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	if started {
		<-m.done
	}
	m.cache.Stop()
	// Obtains cancelled above release their locks on their own goroutines; one that
	// only now reaches the store writes nothing (tracked.close).
	m.store.close()
	if !m.store.idle(10 * time.Second) {
		m.log.Warn("fleet certificates: CertMagic still busy with the store 10s after close")
	}
}

// Names returns the names the policy gives the fleet, from doc: every non-wildcard
// route host and API host, less platform hosts when platformWildcard. isPlatform tells
// the paced ones.
func Names(doc *routing.Document, platformDomains []string, platformWildcard bool) (names []string, isPlatform map[string]bool) {
	isPlatform = map[string]bool{}
	seen := map[string]bool{}
	add := func(h string, platform bool) {
		if seen[h] || routing.IsWildcard(h) {
			return
		}
		seen[h] = true
		if platform {
			if platformWildcard {
				return
			}
			isPlatform[h] = true
		}
		names = append(names, h)
	}
	if doc == nil {
		return nil, isPlatform
	}
	for _, r := range doc.Routes {
		_, under := fleet.PlatformOwner(r.Host, platformDomains)
		add(r.Host, under)
	}
	if doc.API != nil {
		for _, h := range doc.API.Hosts {
			add(h, false)
		}
	}
	slices.Sort(names)
	return names, isPlatform
}

// namePolicy is what Sync derives from a document: the names the fleet issues (sorted),
// which are paced platform hosts, API hosts, and issued by DNS-01, and the platform
// hosts a platform wildcard covers.
type namePolicy struct {
	names    []string
	platform map[string]bool
	api      map[string]bool
	dns      map[string]dnsName
	covered  map[string]bool
}

// policy is Names with DNS-01 (dns01.go): with DNS01.Platform, a platform host one
// label under a platform domain is covered by that domain's wildcard (ordered once, on
// the platform budget) and the platform apex is issued by DNS-01; with a delegation
// zone, a custom wildcard is issued by delegation (on the custom budget). Without
// DNS01 it is exactly Names.
func (m *Manager) policy(doc *routing.Document) namePolicy {
	p := namePolicy{platform: map[string]bool{}, api: map[string]bool{}, dns: map[string]dnsName{}, covered: map[string]bool{}}
	if doc == nil {
		return p
	}
	d := m.opt.DNS01
	platformDNS := d != nil && d.Platform
	isPD := func(h string) bool { return slices.Contains(m.opt.PlatformDomains, h) }
	seen := map[string]bool{}
	add := func(n string, platform bool) {
		if seen[n] {
			return
		}
		seen[n] = true
		p.names = append(p.names, n)
		if platform {
			p.platform[n] = true
		}
	}
	for _, r := range doc.Routes {
		h := r.Host
		if routing.IsWildcard(h) {
			switch {
			case d == nil:
			case platformDNS && isPD(strings.TrimPrefix(h, "*.")):
				p.dns[h] = dnsName{owner: ChallengeCNAME(h)}
				add(h, true)
			case d.DelegationZone != "":
				p.dns[h] = dnsName{owner: ChallengeCNAME(h), target: DelegationTarget(d.DelegationZone, r.Application, h)}
				add(h, false)
			}
			continue
		}
		if _, under := fleet.PlatformOwner(h, m.opt.PlatformDomains); under {
			if m.opt.PlatformWildcard {
				continue // Traefik's resolver issues the platform wildcard
			}
			if _, parent, _ := strings.Cut(h, "."); platformDNS && isPD(parent) {
				w := "*." + parent
				p.covered[h] = true
				p.dns[w] = dnsName{owner: ChallengeCNAME(w)}
				add(w, true)
				continue
			}
			add(h, true)
			continue
		}
		if platformDNS && isPD(h) {
			p.dns[h] = dnsName{owner: ChallengeCNAME(h)}
		}
		add(h, false)
	}
	if doc.API != nil {
		for _, h := range doc.API.Hosts {
			p.api[h] = true
			if platformDNS && isPD(h) {
				p.dns[h] = dnsName{owner: ChallengeCNAME(h)}
			}
			add(h, false)
		}
	}
	slices.Sort(p.names)
	return p
}

// Sync sets the names from a published document.
func (m *Manager) Sync(doc *routing.Document) {
	pol := m.policy(doc)
	wanted := make(map[string]bool, len(pol.names))
	for _, n := range pol.names {
		wanted[n] = true
	}
	platform, api := pol.platform, pol.api
	m.mu.Lock()
	for n, d := range m.dns {
		if pol.dns[n] != d {
			if st := m.names[n]; st != nil {
				st.deleg = nil // another claim of the name: checked anew
			}
		}
	}
	if !sameKeys(m.covered, pol.covered) {
		m.bridgeDue = true
	}
	coveredSame := sameKeys(m.covered, pol.covered) && len(m.dns) == len(pol.dns)
	for n, d := range pol.dns {
		if m.dns[n] != d {
			coveredSame = false
		}
	}
	m.dns, m.covered = pol.dns, pol.covered
	now := time.Now()
	for n := range wanted {
		if _, ok := m.since[n]; !ok {
			m.since[n] = now
		}
	}
	for n := range m.since {
		if !wanted[n] {
			delete(m.since, n)
		}
	}
	same := len(wanted) == len(m.wanted) && coveredSame
	for n := range wanted {
		if !m.wanted[n] {
			same = false
			break
		}
	}
	m.wanted, m.platform, m.api = wanted, platform, api
	m.mu.Unlock()
	if !same {
		m.reconcile()
	}
}

// reconcile starts managing the admitted names, stops the departed ones, and refreshes
// the Set.
func (m *Manager) reconcile() {
	m.mu.Lock()
	if !m.started {
		m.mu.Unlock()
		return
	}
	now := time.Now()
	var start []string
	var gone []certmagic.SubjectIssuer
	for n, cancel := range m.managed {
		if !m.wanted[n] {
			cancel()
			delete(m.managed, n)
			delete(m.names, n)
			gone = append(gone, certmagic.SubjectIssuer{Subject: n})
		}
	}
	for n := range m.names {
		if !m.wanted[n] {
			delete(m.names, n)
		}
	}
	m.settling = false
	m.takeMgmtErrs(now)
	// Budgets: platform hosts and custom domains taken on in the last hour.
	m.admitted = slices.DeleteFunc(m.admitted, func(t time.Time) bool { return now.Sub(t) >= time.Hour })
	m.customAdmitted = slices.DeleteFunc(m.customAdmitted, func(t time.Time) bool { return now.Sub(t) >= time.Hour })
	wanted := make([]string, 0, len(m.wanted))
	for n := range m.wanted {
		wanted = append(wanted, n)
	}
	// Names never held off first, then by fewer hold-offs, then by name: names that keep
	// failing (a DNS pointing elsewhere) must not take the budget first each time their
	// hold-off ends, ahead of every other account's new names.
	slices.SortFunc(wanted, func(a, b string) int {
		return cmp.Or(cmp.Compare(m.holdsOf(a), m.holdsOf(b)), strings.Compare(a, b))
	})
	for _, n := range wanted {
		if _, ok := m.managed[n]; ok {
			continue
		}
		if now.Sub(m.since[n]) < m.settleOf(n) {
			m.settling = true // the poll loop comes back for it
			continue
		}
		st := m.names[n]
		if st == nil {
			st = &nameState{}
			m.names[n] = st
		}
		if st.mgmtFailed {
			if now.Before(st.nextAttempt) {
				continue
			}
			st.mgmtFailed = false
		}
		if now.Before(st.heldUntil) {
			continue // held off after failing; the poll loop loads it if another node issued it
		}
		if d := m.dns[n]; d.delegated() && st.cert == nil && (st.deleg == nil || !st.deleg.ok) {
			continue // no order without the delegation (checkDelegations looks again)
		}
		switch {
		case st.cert != nil || m.api[n]:
			// Held already, or the API apex: never paced.
		case m.platform[n]:
			if len(m.admitted) >= m.opt.PlatformBudget {
				continue // backlog; the poll loop loads it if another node issued it
			}
			m.admitted = append(m.admitted, now)
		default:
			if len(m.customAdmitted) >= m.opt.CustomBudget {
				continue // backlog, as above
			}
			m.customAdmitted = append(m.customAdmitted, now)
		}
		start = append(start, n)
	}
	for _, n := range start {
		ctx, cancel := context.WithCancel(context.Background())
		m.managed[n] = cancel
		m.names[n].runAttempts = 0
		// ManageAsync loads the certificate from the store, or obtains it under the
		// store lock (retrying with CertMagic's backoff until ctx is cancelled).
		if err := m.cfgFor(n).ManageAsync(ctx, []string{n}); err != nil {
			m.names[n].lastErr = err.Error()
		}
	}
	m.mu.Unlock()
	if len(gone) > 0 {
		m.cache.RemoveManaged(gone)
	}
	m.refresh()
}

// settleOf is how long name waits in the document before it is ordered: Settle for
// HTTP-01 (every node must answer its challenge), nothing for DNS-01 (the CA asks the
// DNS, not the nodes).
func (m *Manager) settleOf(name string) time.Duration {
	if _, ok := m.dns[name]; ok {
		return 0
	}
	return m.opt.Settle
}

// holdsOf is how many hold-offs in a row name has had (caller holds mu).
func (m *Manager) holdsOf(name string) int {
	if st := m.names[name]; st != nil {
		return st.holds
	}
	return 0
}

func (m *Manager) loop() {
	defer close(m.done)
	t := time.NewTicker(m.opt.Poll)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.mu.Lock()
			m.polls++
			lookup := m.polls%20 == 0
			settling := m.settling
			recheck := m.polls%delegationEvery == 0
			bridge := m.bridgeDue && !lookup
			m.bridgeDue = false
			m.mu.Unlock()
			if bridge {
				m.loadBridges()
			}
			if m.opt.DNS01 != nil && m.opt.DNS01.DelegationZone != "" && m.checkDelegations(recheck) {
				settling = true // a delegation appeared or went: reconcile now
			}
			switch {
			case lookup:
				m.loadBacklog()
				m.loadBridges()
				m.reconcile() // the hour's budget moves on
			case settling:
				m.reconcile()
			default:
				m.refresh()
			}
		}
	}
}

// backlogBatch is the most backlogged names loadBacklog looks up in one pass.
const backlogBatch = 50

// loadBacklog loads, for names this node does not manage yet, a certificate another
// node put in the store (one store read per such name, at most backlogBatch names per
// pass, every 20 polls).
func (m *Manager) loadBacklog() {
	m.mu.Lock()
	var missing []string
	for n := range m.wanted {
		if _, ok := m.managed[n]; !ok {
			missing = append(missing, n)
		}
	}
	// At most backlogBatch names per pass, in turn: a large backlog costs a bounded
	// number of store reads per pass, not one per name.
	slices.Sort(missing)
	if len(missing) > backlogBatch {
		start := m.backlogCursor % len(missing)
		missing = append(missing[start:], missing[:start]...)[:backlogBatch]
		m.backlogCursor = start + backlogBatch
	}
	m.mu.Unlock()
	for _, n := range missing {
		if _, err := m.cfgFor(n).CacheManagedCertificate(context.Background(), n); err == nil {
			m.mu.Lock()
			if m.wanted[n] {
				if _, ok := m.managed[n]; !ok {
					// CertMagic's maintenance renews it from now on.
					m.managed[n] = func() {}
				}
			}
			m.mu.Unlock()
		}
	}
}

// loadBridges loads from the store (never orders) the own certificates of covered
// hosts whose wildcard is not held yet, at most backlogBatch per pass: a fleet that
// turns DNS-01 on keeps serving the certificates HTTP-01 issued until the wildcard
// arrives.
func (m *Manager) loadBridges() {
	m.mu.Lock()
	var load []string
	for h := range m.covered {
		_, parent, _ := strings.Cut(h, ".")
		if w := m.names["*."+parent]; (w == nil || w.cert == nil) && m.bridge[h] == nil && len(load) < backlogBatch {
			load = append(load, h)
		}
	}
	m.mu.Unlock()
	for _, h := range load {
		m.cfg.CacheManagedCertificate(context.Background(), h) // absent: nothing to bridge
	}
	if len(load) > 0 {
		m.refresh()
	}
}

// refresh compares the held certificates with CertMagic's cache and publishes a new
// Set when anything the render reads moved.
func (m *Manager) refresh() {
	m.mu.Lock()
	now := time.Now()
	m.takeMgmtErrs(now)
	changed := false
	managedNames := make(map[string]bool, len(m.wanted))
	for n := range m.wanted {
		managedNames[n] = true
		st := m.names[n]
		if st == nil {
			st = &nameState{}
			m.names[n] = st
		}
		best := m.bestCert(n, now)
		switch {
		case best == nil && st.cert != nil:
			st.cert, changed = nil, true
		case best != nil && (st.cert == nil || st.cert.serial != serialOf(best)):
			hc, err := encode(best)
			if err != nil {
				st.lastErr = "encoding the certificate for delivery: " + err.Error()
				continue
			}
			st.cert, changed = hc, true
			st.renewErr = "" // another certificate: whatever failed to renew is replaced
		}
		if st.cert == nil {
			st.renewErr = ""
		}
	}
	var unbridge []certmagic.SubjectIssuer
	for h := range m.covered {
		_, parent, _ := strings.Cut(h, ".")
		if w := m.names["*."+parent]; w != nil && w.cert != nil {
			if _, ok := m.bridge[h]; ok {
				// The wildcard is held: the host's own certificate is no longer delivered
				// nor renewed.
				delete(m.bridge, h)
				unbridge = append(unbridge, certmagic.SubjectIssuer{Subject: h})
				changed = true
			}
			continue
		}
		best := m.bestCert(h, now)
		switch {
		case best == nil && m.bridge[h] != nil:
			delete(m.bridge, h)
			changed = true
		case best != nil && (m.bridge[h] == nil || m.bridge[h].serial != serialOf(best)):
			if hc, err := encode(best); err == nil {
				m.bridge[h], changed = hc, true
			}
		}
	}
	for h := range m.bridge {
		if !m.covered[h] {
			delete(m.bridge, h)
			changed = true
			if !m.wanted[h] {
				unbridge = append(unbridge, certmagic.SubjectIssuer{Subject: h})
			}
		}
	}
	if len(unbridge) > 0 {
		defer m.cache.RemoveManaged(unbridge) // after m.mu is released (deferred calls run last-in first-out)
	}
	rendered := make(map[string]bool, len(managedNames)+len(m.covered))
	for n := range managedNames {
		rendered[n] = true
	}
	for n := range m.covered {
		rendered[n] = true
	}
	if !changed && sameKeys(rendered, m.set.FleetCerts.Managed) {
		m.mu.Unlock()
		return
	}
	bridged := make([]string, 0, len(m.bridge))
	for h := range m.bridge {
		bridged = append(bridged, h)
	}
	slices.Sort(bridged)
	fc := &render.FleetCerts{HTTPEntryPoints: m.opt.HTTPEntryPoints, Managed: rendered}
	keep := map[string]bool{} // files of this set (file delivery)
	h := sha256.New()
	names := make([]string, 0, len(managedNames))
	for n := range managedNames {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		h.Write([]byte(n + "\x00"))
		if c := m.names[n].cert; c != nil {
			cert, key := c.certPEM, c.keyPEM
			if m.opt.CertDir != "" {
				var err error
				if cert, key, err = certFiles(m.opt.CertDir, n, c); err != nil {
					m.names[n].lastErr = "delivering the certificate: " + err.Error()
					m.log.Error("fleet certificate: writing its files", "name", n, "err", err)
					h.Write([]byte{2})
					continue
				}
				keep[cert], keep[key] = true, true
			}
			fc.Certificates = append(fc.Certificates, render.Certificate{Names: []string{n}, CertFile: cert, KeyFile: key})
			h.Write([]byte(c.serial))
		}
		h.Write([]byte{1})
	}
	covered := make([]string, 0, len(m.covered))
	for n := range m.covered {
		covered = append(covered, n)
	}
	slices.Sort(covered)
	for _, n := range covered {
		h.Write([]byte(n + "\x00\x03"))
	}
	for _, n := range bridged {
		c := m.bridge[n]
		cert, key := c.certPEM, c.keyPEM
		if m.opt.CertDir != "" {
			var err error
			if cert, key, err = certFiles(m.opt.CertDir, n, c); err != nil {
				m.log.Error("fleet certificate: writing its files", "name", n, "err", err)
				continue
			}
			keep[cert], keep[key] = true, true
		}
		fc.Certificates = append(fc.Certificates, render.Certificate{Names: []string{n}, CertFile: cert, KeyFile: key})
		h.Write([]byte(n + "\x00\x04" + c.serial))
	}
	fp := ""
	if len(names) > 0 || len(covered) > 0 {
		fp = hex.EncodeToString(h.Sum(nil)[:12])
	}
	if m.opt.CertDir != "" {
		// The previous set's files stay for a Traefik that fetched it a moment ago.
		for _, c := range m.set.FleetCerts.Certificates {
			keep[c.CertFile], keep[c.KeyFile] = true, true
		}
		pruneCertFiles(m.opt.CertDir, keep)
	}
	m.set = &Set{Fingerprint: fp, FleetCerts: fc}
	onChange := m.onChange
	m.mu.Unlock()
	if onChange != nil {
		onChange()
	}
}

// bestCert is the unexpired certificate in CertMagic's cache for exactly name with the
// latest NotAfter (a renewal and its predecessor can both be cached for a moment).
func (m *Manager) bestCert(name string, now time.Time) *certmagic.Certificate {
	var best *certmagic.Certificate
	for _, c := range m.cache.AllMatchingCertificates(name) {
		if c.Leaf == nil || !now.Before(c.Leaf.NotAfter) || !slices.Contains(c.Names, name) || len(c.Names) != 1 {
			continue
		}
		if best == nil || c.Leaf.NotAfter.After(best.Leaf.NotAfter) {
			c := c
			best = &c
		}
	}
	return best
}

func serialOf(c *certmagic.Certificate) string {
	return strings.ToLower(c.Leaf.SerialNumber.Text(16))
}

// encode turns a cached certificate into the PEM the render inlines: the chain as
// issued and the key as PKCS#8. Deterministic, so every node holding the same
// certificate renders the same bytes.
func encode(c *certmagic.Certificate) (*heldCert, error) {
	var chain bytes.Buffer
	for _, der := range c.Certificate.Certificate {
		pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return nil, err
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return &heldCert{serial: serialOf(c), notAfter: c.Leaf.NotAfter, certPEM: chain.String(), keyPEM: string(key)}, nil
}

func sameKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// Current is the Set the render reads now.
func (m *Manager) Current() *Set {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.set
}

// retryIntervals are the first steps of CertMagic's own obtain backoff (async.go,
// retryIntervals), to tell an operator when the next attempt is due; the last is
// repeated.
var retryIntervals = []time.Duration{time.Minute, 2 * time.Minute, 2 * time.Minute, 5 * time.Minute,
	10 * time.Minute, 10 * time.Minute, 10 * time.Minute, 20 * time.Minute}

// mgmtRetry is how long after a management failure (mgmtErrs) a name is managed again.
func (m *Manager) mgmtRetry() time.Duration { return 20 * m.opt.Poll }

// noteError records a CertMagic error entry that names a subject.
func (m *Manager) noteError(msg string, fields map[string]any) {
	name, _ := fields["subject"].(string)
	if name == "" {
		return
	}
	detail := msg
	if e, ok := fields["error"].(string); ok {
		detail += ": " + e
	}
	m.mgmtMu.Lock()
	if m.mgmtErrs == nil {
		m.mgmtErrs = map[string]string{}
	}
	m.mgmtErrs[name] = detail
	m.mgmtMu.Unlock()
}

// takeMgmtErrs applies the recorded management failures (m.mu held): the name is no
// longer managed, shows failed with the error, and is managed again at nextAttempt.
func (m *Manager) takeMgmtErrs(now time.Time) {
	m.mgmtMu.Lock()
	errs := m.mgmtErrs
	m.mgmtErrs = nil
	m.mgmtMu.Unlock()
	for name, detail := range errs {
		st := m.names[name]
		if st == nil || st.cert != nil {
			continue
		}
		if cancel, ok := m.managed[name]; ok {
			cancel()
			delete(m.managed, name)
		}
		st.mgmtFailed, st.lastErr, st.nextAttempt = true, detail, now.Add(m.mgmtRetry())
	}
}

// onEvent records CertMagic's issuance events per name.
func (m *Manager) onEvent(ctx context.Context, event string, data map[string]any) error {
	name, _ := data["identifier"].(string)
	if name == "" {
		return nil
	}
	if event == "cert_obtaining" {
		// A delegated name is ordered (or renewed) only with its CNAME in place.
		if err := m.gateDelegation(ctx, name); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.names[name]
	if st == nil {
		return nil
	}
	switch event {
	case "cert_obtaining":
		st.obtaining = true
		st.attempts++
		st.runAttempts++
		if st.runAttempts > 1 && st.cert == nil && !m.api[name] {
			// A retry is one more order on the shared account: it counts against the
			// budget (it is not refused: CertMagic retries on its own), so the names
			// taken on next wait for it.
			if m.platform[name] {
				m.admitted = append(m.admitted, time.Now())
			} else {
				m.customAdmitted = append(m.customAdmitted, time.Now())
			}
		}
	case "cert_failed":
		st.obtaining = false
		st.fails++
		if err, ok := data["error"].(error); ok {
			st.lastErr = err.Error()
		} else {
			st.lastErr = "failed"
		}
		if renewal, _ := data["renewal"].(bool); renewal && st.cert != nil {
			st.renewErr = st.lastErr
		}
		now := time.Now()
		st.nextAttempt = now.Add(retryIntervals[min(st.fails, len(retryIntervals))-1])
		if st.fails >= m.opt.FailLimit && st.cert == nil {
			// Held off: CertMagic's own backoff would order again within minutes (about
			// eight orders in the first hour), each one against the fleet's shared ACME
			// account. Cancelling the context ends CertMagic's retry loop.
			if cancel, ok := m.managed[name]; ok {
				cancel()
				delete(m.managed, name)
			}
			hold := m.opt.FailHold
			for i := 0; i < st.holds && hold < m.opt.FailHoldMax; i++ {
				hold *= 2
			}
			hold = min(hold, m.opt.FailHoldMax)
			st.holds++
			st.heldUntil = now.Add(hold)
			st.nextAttempt = st.heldUntil
		}
		m.log.Warn("fleet certificate: obtaining failed", "name", name, "attempt", st.attempts, "err", st.lastErr, "nextAttempt", st.nextAttempt)
	case "cert_obtained":
		st.obtaining = false
		st.obtainedHere = true
		st.lastErr, st.fails, st.nextAttempt = "", 0, time.Time{}
		st.heldUntil, st.holds = time.Time{}, 0
		st.renewErr = ""
		renewal, _ := data["renewal"].(bool)
		m.log.Info("fleet certificate obtained", "name", name, "renewal", renewal)
	}
	return nil
}

// NameStatus is Status for one name (false when the policy gives the fleet no such
// name): what a claim's owner is shown, e.g. the delegation CNAME of a custom wildcard.
func (m *Manager) NameStatus(name string) (NameStatus, bool) {
	for _, s := range m.Status() {
		if s.Name == name {
			return s, true
		}
	}
	return NameStatus{}, false
}

// Status lists every name the policy gives the fleet, sorted, with its state.
func (m *Manager) Status() []NameStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	out := make([]NameStatus, 0, len(m.wanted))
	for n := range m.wanted {
		st := m.names[n]
		if st == nil {
			st = &nameState{}
		}
		ns := NameStatus{Name: n, LastError: st.lastErr, Attempts: st.attempts, ObtainedHere: st.obtainedHere && st.cert != nil}
		_, managed := m.managed[n]
		d, isDNS := m.dns[n]
		if isDNS {
			ns.Challenge, ns.Phase = "dns-01", st.phase
		}
		if d.delegated() {
			ns.Delegation = &Delegation{CNAME: d.owner, Target: d.target}
			if st.deleg != nil {
				t := st.deleg.checked.UTC()
				ns.Delegation.InPlace, ns.Delegation.CheckedAt = st.deleg.ok, &t
			}
		}
		switch {
		case st.cert != nil && now.Before(st.cert.notAfter):
			ns.State = StateValid
		case d.delegated() && !managed && (st.deleg == nil || !st.deleg.ok):
			ns.State = StateNeedsDelegation
		case st.mgmtFailed, !managed && now.Before(st.heldUntil):
			ns.State = StateFailed
		case !managed && now.Sub(m.since[n]) < m.settleOf(n):
			ns.State = StatePending // settling: the other nodes are learning the name
		case !managed:
			ns.State = StateBacklog
		case st.lastErr != "" && !st.obtaining:
			ns.State = StateFailed
		default:
			ns.State = StatePending
		}
		if st.cert != nil {
			na := st.cert.notAfter.UTC()
			ns.NotAfter, ns.Serial = &na, st.cert.serial
		}
		if !st.nextAttempt.IsZero() && ns.State == StateFailed {
			t := st.nextAttempt.UTC()
			ns.NextAttempt = &t
		}
		out = append(out, ns)
	}
	slices.SortFunc(out, func(a, b NameStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Renewal is one certificate this node holds, unexpired, and whether its renewal is
// failing.
type Renewal struct {
	Name string
	// Failing: the last renewal of this certificate failed here (with Error), and no
	// renewal has replaced it since. CertMagic renews only inside the renewal window
	// (Options.RenewalWindow of the lifetime left), so a failing certificate is inside
	// it; Status still lists the name valid (it is, until NotAfter).
	Failing bool
	Error   string
}

// Renewals lists, sorted by name, the names holding an unexpired certificate, each
// with whether its renewal is failing (the scafo_certificate_renewal_failing gauge).
func (m *Manager) Renewals() []Renewal {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	out := []Renewal{}
	for n := range m.wanted {
		st := m.names[n]
		if st == nil || st.cert == nil || !now.Before(st.cert.notAfter) {
			continue
		}
		out = append(out, Renewal{Name: n, Failing: st.renewErr != "", Error: st.renewErr})
	}
	slices.SortFunc(out, func(a, b Renewal) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// HandleChallenge answers GET /.well-known/acme-challenge/<token> for a name the fleet
// issues, from memory when this process started the challenge, else from the store
// (any node answers any node's challenge). Anonymous and bounded: the token must be
// base64url, the Host a name this node knows the fleet issues (no store read for any
// other), and store reads are one per host at a time within a rate limit, waited for
// rather than refused, so a flood of junk tokens cannot crowd the CA out
// (challenge.go); everything else is 404. It reports whether it answered.
func (m *Manager) HandleChallenge(w http.ResponseWriter, r *http.Request) bool {
	token, ok := strings.CutPrefix(r.URL.Path, render.ACMEChallengePath)
	if !ok || token == "" || len(token) > 256 || !base64URL(token) || r.Method != http.MethodGet || m.issuer == nil {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	m.mu.Lock()
	known := m.wanted[host]
	m.mu.Unlock()
	if !known {
		return false
	}
	if _, mine := certmagic.GetACMEChallenge(host); mine {
		// Started by this process: CertMagic answers from memory, no store read.
		return m.issuer.HandleHTTPChallenge(w, r)
	}
	// From the store, one read per host at a time, bounded by the bucket (challenge.go).
	ctx, cancel := context.WithTimeout(r.Context(), challengeWait)
	defer cancel()
	return m.answerChallenge(w, r, host, m.lookupChallenge(ctx, host))
}

func base64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// tokenBucket is a small rate limiter (rate per second, burst), safe for concurrent use.
type tokenBucket struct {
	mu sync.Mutex
	b  bucket.Bucket
}

func newTokenBucket(rate, burst float64) *tokenBucket {
	return &tokenBucket{b: bucket.New(rate, burst)}
}

func (b *tokenBucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ok, _ := b.b.Take(now)
	return ok
}

// String is for logs: counts only.
func (s *Set) String() string {
	if s == nil || s.FleetCerts == nil {
		return "fleet certificates: none"
	}
	return fmt.Sprintf("fleet certificates: %d names, %d certificates", len(s.FleetCerts.Managed), len(s.FleetCerts.Certificates))
}
