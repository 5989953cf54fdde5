package scafo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
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
// ErrPermissionDenied and logged with the reason. A name that holds a certificate in
// the storage (any issuer's: loading or renewing it) is never held back, and is
// not counted.
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
}

// triedName is a certificate-less name's last approval and how many approvals in a row
// it has had without a certificate landing.
type triedName struct {
	at time.Time
	n  int
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
func (p *Permission) CertificateAllowed(ctx context.Context, name string) error {
	app, ok := p.app.poller.Table().ApplicationOf(name)
	if !ok {
		return fmt.Errorf("%q: %w: the routing document does not name it exactly", name, caddytls.ErrPermissionDenied)
	}
	n, iv, share := p.budget()
	if n < 0 {
		return nil
	}
	held, err := p.holdsCertificate(ctx, name)
	if held {
		return nil
	}
	if err != nil {
		// The storage (the node) cannot say whether name holds a certificate. Refusing
		// or counting would hold back the names that do (a Caddy restarted during a
		// node outage loads them all through here, from cache_dir), and an approval
		// now orders nothing: CertMagic orders only under the storage's lock, which is
		// the node's too. Approved, not counted.
		if p.logger != nil {
			p.logger.Warn("on-demand certificate approved unbudgeted: the storage cannot say whether the name holds a certificate",
				zap.String("server_name", name), zap.Error(err))
		}
		return nil
	}
	now := time.Now
	if p.now != nil {
		now = p.now
	}
	t := now()
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
	if at := tn.at; ok && at.Add(retryAfter(tn.n, iv)).After(t) {
		next := at.Add(retryAfter(tn.n, iv)).Sub(t)
		reason := fmt.Sprintf("approved %s ago and still no certificate in the storage (its order failed or is in flight); the next approval for this name in %s",
			t.Sub(at).Round(time.Second), next.Round(time.Second))
		if p.logger != nil {
			p.logger.Warn("on-demand certificate refused", zap.String("server_name", name), zap.String("application", app), zap.String("reason", reason))
		}
		return fmt.Errorf("%q: %w: %s", name, caddytls.ErrPermissionDenied, reason)
	}
	if mine := p.byApp[app]; share >= 0 && len(mine) >= share {
		next := mine[0].Add(iv).Sub(t)
		reason := fmt.Sprintf("%s's share of the issuance budget is spent: %d approvals of its names with no certificate in the storage in the last %s (its share is %d of %d); the next one in %s",
			bucketName(app), len(mine), iv, share, n, next.Round(time.Second))
		if p.logger != nil {
			p.logger.Warn("on-demand certificate refused", zap.String("server_name", name), zap.String("application", app), zap.String("reason", reason),
				zap.Int("per_app", share), zap.Int("budget", n), zap.Duration("interval", iv))
		}
		return fmt.Errorf("%q: %w: %s", name, caddytls.ErrPermissionDenied, reason)
	}
	if len(p.spent) >= n {
		next := p.spent[0].Add(iv).Sub(t)
		reason := fmt.Sprintf("the issuance budget is spent: %d approvals of names with no certificate in the storage in the last %s; the next one in %s",
			len(p.spent), iv, next.Round(time.Second))
		if p.logger != nil {
			fields := []zap.Field{zap.String("server_name", name), zap.String("application", app), zap.String("reason", reason), zap.Int("budget", n), zap.Duration("interval", iv)}
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
	p.tried[name] = triedName{at: t, n: tn.n + 1}
	return nil
}

// bucketName is how a refusal names a share.
func bucketName(app string) string {
	if app == APIBucket {
		return "the API hosts"
	}
	return fmt.Sprintf("application %q", app)
}

// holdsCertificate is whether the storage holds a certificate for name from any
// issuer (certificates/<issuer>/<name>/<name>.crt, CertMagic's layout). A name is
// already canonical here (the document named it exactly). An error reading the storage
// is returned (the caller approves without counting).
func (p *Permission) holdsCertificate(ctx context.Context, name string) (bool, error) {
	if p.storage == nil {
		return false, nil
	}
	issuers, err := p.storage.List(ctx, "certificates", false)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, dir := range issuers {
		if p.storage.Exists(ctx, path.Join(dir, name, name+".crt")) {
			return true, nil
		}
	}
	return false, nil
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
