package scafo

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(new(Permission))
}

// The default issuance budget: 100 approvals of certificate-less names per hour, which
// is Let's Encrypt's "new orders per account" limit (300 per 3 hours) spread evenly.
// The ACME account is this Caddy's own (it stays on its disk), so the budget is per
// Caddy, like the CA's limit.
const (
	DefaultIssuanceBudget         = 100
	DefaultIssuanceBudgetInterval = time.Hour
)

// Permission (tls.permission.scafo) lets on-demand TLS obtain or load a certificate
// only for a name some current routing document names exactly, as a route host or an
// API host. It answers from the document the scafo app holds: no request to a node per
// handshake. Exactly means exactly: a name only a wildcard route covers is refused,
// and so is any non-canonical spelling (upper case, a trailing dot, a port, an IP
// literal, a wildcard). With no document yet (no node answered, no state file), every
// name is refused.
//
// The issuance budget: CertMagic asks this module before it loads a certificate from
// storage or orders one, and an approved name with no certificate in the storage is
// an order at the CA. A document may claim hundreds of names whose DNS points
// elsewhere; every handshake for one would be an order (and a failed validation).
// So at most Budget approvals of names that hold no certificate in the storage are
// given per BudgetInterval (a sliding window); a further one is refused with
// ErrPermissionDenied and logged with the reason. A name that holds a valid
// certificate in the storage (any issuer's) is never held back nor counted when
// CertMagic loads it at a handshake; a renewal is counted like a name with no
// certificate (see CertificateAllowed). What the storage holds is remembered for a
// minute (heldCerts): no storage request per handshake.
//
// Each application has a share of the budget: at most PerApp of those approvals in
// the window go to the names of one application (the Application of the document's
// routes that name it exactly; the API hosts are one bucket of their own, APIBucket).
// The names of one application whose orders keep failing, however many, so spend its
// share and never the whole budget: every other application's new names still get
// theirs.
type Permission struct {
	// Budget is how many approvals of certificate-less names one BudgetInterval
	// allows (default 100; -1: no budget).
	Budget int `json:"budget,omitempty"`
	// BudgetInterval is the budget's window (default 1h).
	BudgetInterval caddy.Duration `json:"budget_interval,omitempty"`
	// PerApp is how many of those approvals the names of one application may have in
	// one BudgetInterval (default max(budget/10, 1); -1: no share, only the budget).
	// At most the budget.
	PerApp int `json:"per_app,omitempty"`

	app     *App
	storage certmagic.Storage
	logger  *zap.Logger
	now     func() time.Time

	mu    sync.Mutex
	spent []time.Time // approvals of certificate-less names in the window, oldest first
	// byApp are the same approvals by application (APIBucket for the API hosts),
	// oldest first; an application with none in the window has no entry.
	byApp map[string][]time.Time
	// tried is when each certificate-less name was last approved and how many times in
	// a row, for the names approved within their retry delay and an interval past it
	// (see CertificateAllowed): at most as many as two intervals of approvals.
	tried map[string]triedName
	// certs answers "does the name hold a certificate, until when" from memory.
	certs heldCerts
}

// triedName is a certificate-less name's last approval and how many approvals in a row
// it has had without a certificate landing.
type triedName struct {
	at time.Time
	n  int
	// notAfter is the expiry of the certificate the storage held at that approval
	// (zero: none); another one there means a certificate landed since.
	notAfter time.Time
	// followUp: until then, the next call is approved without counting (an expired
	// certificate's load and renewal, expiredFollowUp).
	followUp time.Time
}

// retryAfter is how soon a name approved n times in a row with no certificate landing
// is approved again: nameRetry after the first, doubling after each (10, 20, 40 min),
// never longer than the budget's interval. With a fixed delay two names whose orders
// fail (12 approvals an hour) kept an application's share (10) spent for as long as an
// anonymous client handshaked them, and its new name was never approved
// (TestTwoFailingNamesCannotLockAnApplicationsNewNameOut); doubling, a failing name
// is worth 3 approvals in its first hour and 1 an hour after.
func retryAfter(n int, iv time.Duration) time.Duration {
	d := min(nameRetry, iv)
	for i := 1; i < n && d < iv; i++ {
		if d > iv/2 { // never past iv: no overflow whatever the interval
			d = iv
		} else {
			d *= 2
		}
	}
	return d
}

// nameRetry is how soon at most a name approved with no certificate in the storage is
// approved again while it still holds none (its order failed, or is in flight:
// CertMagic's on-demand order holds its handshake up to 3 minutes, retrying). Without
// it every handshake after a failed order was an approval: an anonymous client
// handshaking again and again for one document name whose DNS points elsewhere spent
// the whole budget, and every other name with no certificate was refused for the
// interval. A name is so worth at most interval/nameRetry approvals (6 an hour at the
// defaults). Never longer than the budget's interval.
const nameRetry = 10 * time.Minute

// CaddyModule returns the Caddy module information.
func (*Permission) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.permission.scafo", New: func() caddy.Module { return new(Permission) }}
}

// Provision finds the scafo app and the storage.
func (p *Permission) Provision(ctx caddy.Context) error {
	if err := p.validate(); err != nil {
		return err
	}
	a, err := scafoApp(ctx)
	if err != nil {
		return err
	}
	p.app = a
	p.storage = ctx.Storage()
	p.logger = ctx.Logger()
	return nil
}

func (p *Permission) validate() error {
	if p.Budget < -1 {
		return fmt.Errorf("tls.permission.scafo: budget %d: want a count of approvals, or -1 for none", p.Budget)
	}
	if p.BudgetInterval < 0 {
		return fmt.Errorf("tls.permission.scafo: budget_interval %s: want a positive duration", time.Duration(p.BudgetInterval))
	}
	if p.PerApp < -1 {
		return fmt.Errorf("tls.permission.scafo: per_app %d: want a count of approvals, or -1 for no share", p.PerApp)
	}
	if p.Budget == -1 && p.PerApp != 0 {
		return fmt.Errorf("tls.permission.scafo: per_app %d with the budget off: a share of no budget means nothing (remove per_app, or set a budget)", p.PerApp)
	}
	if n, _, _ := p.budget(); p.PerApp > 0 && p.PerApp > n {
		return fmt.Errorf("tls.permission.scafo: per_app %d is more than the budget %d: one application's share is at most the whole budget", p.PerApp, n)
	}
	return nil
}

// budget is the budget (-1: none), its window, and one application's share (-1:
// none).
func (p *Permission) budget() (int, time.Duration, int) {
	n, iv, share := p.Budget, time.Duration(p.BudgetInterval), p.PerApp
	if n == 0 {
		n = DefaultIssuanceBudget
	}
	if iv == 0 {
		iv = DefaultIssuanceBudgetInterval
	}
	if share == 0 {
		share = DefaultShare(n)
	}
	return n, iv, share
}

// DefaultShare is one application's share of a budget of n approvals when per_app is
// not set: a tenth of it, at least one (10 an hour of the default 100). One
// application's failing names then spend a tenth of the budget, and the whole of it
// takes ten applications with names whose orders fail; ten new names of one
// application an hour is more than a tenant adds at once (a name refused now is
// approved at a later handshake, once the window slides).
func DefaultShare(n int) int { return max(n/10, 1) }

// CertificateAllowed implements caddytls.OnDemandPermission.
//
// CertMagic (v0.25) asks it in three places, all for on-demand names only (its
// maintenance loop skips them): (1) at a handshake for a name it has no certificate for
// in memory, before loading one from the storage or ordering one (the ClientHelloInfo
// is in ctx, certmagic.ClientHelloInfoCtxKey); (2) before renewing a certificate it
// holds that is due (its renewal window, or ARI), in the background with a context of
// its own, no ClientHelloInfo; (3) before renewing an expired one, in the handshake.
// A loaded certificate that is due is renewed at once (2 or 3), and a refused renewal
// drops it from CertMagic's memory, so the next handshake asks (1) again.
//
// So: a name holding a certificate that has not expired is approved free at a
// handshake (1: a load, which orders nothing; were it refused, a certificate still
// valid would not be served). Every other approval can be an order and is counted
// (retry delay, share, budget): a name with no certificate, a renewal (no
// ClientHelloInfo), a name whose certificate has expired. An expired one is asked
// twice in one handshake (to load, then to renew), so its approval also covers the one
// call that follows it within expiredFollowUp. A renewal that lands (the stored
// certificate's expiry changes) forgets the name's retry delay. Guarded by
// TestARenewalThatDoesNotLandGetsTheRetryDelayAndTheShare.
func (p *Permission) CertificateAllowed(ctx context.Context, name string) error {
	app, ok := p.app.poller.Table().ApplicationOf(name)
	if !ok {
		return fmt.Errorf("%q: %w: the routing document does not name it exactly", name, caddytls.ErrPermissionDenied)
	}
	n, iv, share := p.budget()
	if n < 0 {
		return nil
	}
	now := time.Now
	if p.now != nil {
		now = p.now
	}
	t := now()
	cert := p.certs.lookup(ctx, p.storage, name, t)
	hello, _ := ctx.Value(certmagic.ClientHelloInfoCtxKey).(*tls.ClientHelloInfo)
	inHandshake := hello != nil
	expired := cert.held && !t.Before(cert.notAfter)
	if cert.held && inHandshake && !expired {
		return nil
	}
	if cert.err != nil {
		// The storage (the node) cannot say whether name holds a certificate. Refused,
		// not counted: CertMagic loads from that same storage, so it could load nothing
		// for name now either, and an approval would be an order no budget counts
		// whenever the node answers the lock but not this (a node refusing some of this
		// address's requests, issue 39). A Caddy restarted during a node outage still
		// loads what it held: the storage's cache answers the certificate's Load while no
		// node can be reached (heldCerts). Guarded by
		// TestTheStorageThatCannotSayRefusesAndCountsNothing.
		reason := "the storage cannot say whether the name holds a certificate: " + cert.err.Error()
		if p.logger != nil {
			p.logger.Warn("on-demand certificate refused", zap.String("server_name", name), zap.String("application", app), zap.String("reason", reason))
		}
		return fmt.Errorf("%q: %w: %s", name, caddytls.ErrPermissionDenied, reason)
	}
	what := "no certificate in the storage"
	switch {
	case expired:
		what = "an expired certificate in the storage"
	case cert.held:
		what = "a renewal"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.spent) > 0 && !p.spent[0].After(t.Add(-iv)) {
		p.spent = p.spent[1:]
	}
	for a, ts := range p.byApp { // as many as p.spent in all: at most the budget
		for len(ts) > 0 && !ts[0].After(t.Add(-iv)) {
			ts = ts[1:]
		}
		if len(ts) == 0 {
			delete(p.byApp, a)
		} else {
			p.byApp[a] = ts
		}
	}
	for k, tn := range p.tried { // forgotten an interval after its next approval was due
		if !tn.at.Add(retryAfter(tn.n, iv) + iv).After(t) {
			delete(p.tried, k)
		}
	}
	tn, ok := p.tried[name]
	if ok && cert.held && !cert.notAfter.Equal(tn.notAfter) {
		// A certificate landed since the last approval (first one or renewal): the
		// name starts over.
		delete(p.tried, name)
		tn, ok = triedName{}, false
	}
	if ok && tn.followUp.After(t) {
		tn.followUp = time.Time{} // once
		p.tried[name] = tn
		return nil
	}
	if at := tn.at; ok && at.Add(retryAfter(tn.n, iv)).After(t) {
		next := at.Add(retryAfter(tn.n, iv)).Sub(t)
		reason := fmt.Sprintf("approved %s ago and still %s (its order failed or is in flight); the next approval for this name in %s",
			t.Sub(at).Round(time.Second), stillWhat(cert, expired), next.Round(time.Second))
		if p.logger != nil {
			p.logger.Warn("on-demand certificate refused", zap.String("server_name", name), zap.String("application", app), zap.String("reason", reason))
		}
		return fmt.Errorf("%q: %w: %s", name, caddytls.ErrPermissionDenied, reason)
	}
	if mine := p.byApp[app]; share >= 0 && len(mine) >= share {
		next := mine[0].Add(iv).Sub(t)
		reason := fmt.Sprintf("%s's share of the issuance budget is spent: %d approvals of its names with no certificate in the storage in the last %s (its share is %d of %d); the next one in %s (renewals count)",
			bucketName(app), len(mine), iv, share, n, next.Round(time.Second))
		if p.logger != nil {
			p.logger.Warn("on-demand certificate refused", zap.String("server_name", name), zap.String("application", app), zap.String("reason", reason),
				zap.String("asked_for", what), zap.Int("per_app", share), zap.Int("budget", n), zap.Duration("interval", iv))
		}
		return fmt.Errorf("%q: %w: %s", name, caddytls.ErrPermissionDenied, reason)
	}
	if len(p.spent) >= n {
		next := p.spent[0].Add(iv).Sub(t)
		reason := fmt.Sprintf("the issuance budget is spent: %d approvals of names with no certificate in the storage in the last %s; the next one in %s (renewals count)",
			len(p.spent), iv, next.Round(time.Second))
		if p.logger != nil {
			fields := []zap.Field{zap.String("server_name", name), zap.String("application", app), zap.String("reason", reason),
				zap.String("asked_for", what), zap.Int("budget", n), zap.Duration("interval", iv)}
			p.logger.Warn("on-demand certificate refused", fields...)
		}
		return fmt.Errorf("%q: %w: %s", name, caddytls.ErrPermissionDenied, reason)
	}
	p.spent = append(p.spent, t)
	if p.byApp == nil {
		p.byApp = map[string][]time.Time{}
	}
	p.byApp[app] = append(p.byApp[app], t)
	if p.tried == nil {
		p.tried = map[string]triedName{}
	}
	next := triedName{at: t, n: tn.n + 1, notAfter: cert.notAfter}
	if expired {
		next.followUp = t.Add(expiredFollowUp)
	}
	p.tried[name] = next
	// An order may land now: the next call reads the storage again (one read per
	// approval), so a certificate obtained is not taken for none for heldFor.
	p.certs.forget(name)
	return nil
}

// expiredFollowUp is how long an approval for a name whose certificate has expired
// also covers the next call for it: CertMagic loads an expired certificate (one call)
// and renews it at once in the same handshake (a second call); without it the load
// took the approval and the renewal was refused, so an expired certificate was never
// renewed.
const expiredFollowUp = time.Minute

// stillWhat says what a name in its retry delay still holds.
func stillWhat(c heldCert, expired bool) string {
	switch {
	case expired:
		return "its certificate in the storage is expired"
	case c.held:
		return "no renewed certificate in the storage"
	}
	return "no certificate in the storage"
}

// bucketName is how a refusal names a share.
func bucketName(app string) string {
	if app == APIBucket {
		return "the API hosts"
	}
	return fmt.Sprintf("application %q", app)
}

// UnmarshalCaddyfile reads
//
//	permission scafo {
//		budget <approvals> [<interval>]   # or: budget off
//		per_app <approvals>               # or: per_app off
//	}
func (p *Permission) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "budget":
			args := d.RemainingArgs()
			if len(args) == 1 && args[0] == "off" {
				p.Budget = -1
				continue
			}
			if len(args) < 1 || len(args) > 2 {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return d.Errf("budget %q: want a positive count of approvals, or off", args[0])
			}
			p.Budget = n
			if len(args) == 2 {
				iv, err := caddy.ParseDuration(args[1])
				if err != nil || iv <= 0 {
					return d.Errf("budget interval %q: want a positive duration", args[1])
				}
				p.BudgetInterval = caddy.Duration(iv)
			}
		case "per_app":
			args := d.RemainingArgs()
			if len(args) != 1 {
				return d.ArgErr()
			}
			if args[0] == "off" {
				p.PerApp = -1
				continue
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return d.Errf("per_app %q: want a positive count of approvals (one application's share of the budget), or off", args[0])
			}
			p.PerApp = n
		default:
			return d.Errf("unknown option %q", d.Val())
		}
	}
	if err := p.validate(); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

var (
	_ caddytls.OnDemandPermission = (*Permission)(nil)
	_ caddy.Provisioner           = (*Permission)(nil)
	_ caddyfile.Unmarshaler       = (*Permission)(nil)
)
