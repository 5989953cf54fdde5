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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/miekg/dns"

	"github.com/scafo/ingress/render"
)

// States of a name.
const (
	StatePending = "pending" // being obtained, or waiting for another node's result
	StateValid   = "valid"   // a certificate that has not expired is held
	StateFailed  = "failed"  // the last attempt failed; CertMagic retries (NextAttempt)
	StateBacklog = "backlog" // a platform host or custom domain waiting for its budget
)

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
	set            *render.CertSet
	polls          int
	settling       bool // a wanted name waits for Settle
	// backlogCursor is where the next loadBacklog pass starts in the sorted backlog.
	backlogCursor int

	// mgmtErrs are CertMagic's errors that no event reports (a certificate in the store
	// that cannot be loaded fails "initiating certificate management" and is then
	// never retried by CertMagic), by name; only noteError and takeMgmtErrs touch it,
	// under mgmtMu alone (CertMagic may log while m.mu is held).
	mgmtMu   sync.Mutex
	mgmtErrs map[string]string

	// now is the manager's clock (time.Now): the budgets, settling, hold-offs, retry
	// times and expiries it decides on read it. Tests replace it before Start.
	now func() time.Time
	// lookupTimeout bounds one delegation lookup (5s; the pass's context gets twice
	// that). Tests shorten it.
	lookupTimeout time.Duration

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
		set:     &render.CertSet{FleetCerts: &render.FleetCerts{HTTPEntryPoints: opt.HTTPEntryPoints, Managed: map[string]bool{}}},
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		now:     time.Now,

		lookupTimeout: 5 * time.Second,
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

func (m *Manager) loop() {
	defer close(m.done)
	t := time.NewTicker(m.opt.Poll)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.poll()
		}
	}
}

// poll is one tick of the loop (every Options.Poll): the bridges and delegations due
// are looked up, every 20 polls the backlog is loaded and the names reconciled (the
// hour's budget moves on), a settling name is reconciled, and otherwise the Set is
// refreshed. Tests call it to step the loop.
func (m *Manager) poll() {
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
