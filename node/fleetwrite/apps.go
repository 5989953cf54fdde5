package fleetwrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// ValidateAppName checks an application name from a URL.
func ValidateAppName(app string) error {
	if err := routing.ValidateLabel("app", app); err != nil {
		return invalid("invalid app", "app", err)
	}
	if app == routing.UnownedApplication {
		return invalid("invalid app", "app", fmt.Errorf("app %q: reserved for hosts whose holder is unknown", app))
	}
	return nil
}

// App reads one application.
func (w *Writer) App(ctx context.Context, name string) (fleet.App, string, error) {
	if err := ValidateAppName(name); err != nil {
		return fleet.App{}, "", err
	}
	a, etag, err := load[fleet.App](ctx, w.st, fleet.AppKey(name))
	if err != nil {
		return fleet.App{}, "", fmt.Errorf("reading application %s: %w", name, err)
	}
	return a, etag, nil
}

// Apps lists every readable application, sorted by name.
//
// One LIST, and a GET only of the applications whose etag moved since this writer last
// read them (appsSeen): listing a fleet of N unchanged applications costs one store
// request, not N+1 (the read-only token's /v1/apps is budgeted in requests: hostile
// review 4, F5). An object that does not decode is remembered by its etag too, and left
// out as before.
func (w *Writer) Apps(ctx context.Context) ([]fleet.App, error) {
	entries, err := w.st.List(ctx, fleet.PrefixApps)
	if err != nil {
		return nil, fmt.Errorf("listing applications: %w", err)
	}
	w.appsMu.Lock()
	seen := w.appsSeen
	w.appsMu.Unlock()
	next := make(map[string]seenApp, len(entries))
	apps := []fleet.App{}
	for _, e := range entries {
		sa, ok := seen[e.Key]
		if !ok || sa.etag != e.ETag {
			a, etag, err := load[fleet.App](ctx, w.st, e.Key)
			var corrupt *ErrCorrupt
			switch {
			case err == nil:
				sa = seenApp{etag: etag, app: a, ok: true}
			case errors.As(err, &corrupt):
				sa = seenApp{etag: corrupt.ETag}
			default:
				continue // gone since the LIST, or unreadable: read again next time
			}
		}
		next[e.Key] = sa
		if sa.ok {
			apps = append(apps, sa.app) // shares its slices with appsSeen: callers only read
		}
	}
	w.appsMu.Lock()
	w.appsSeen = next
	w.appsMu.Unlock()
	return apps, nil
}

// seenApp is an application object as Apps last read it (ok false: it did not decode).
type seenApp struct {
	etag string
	app  fleet.App
	ok   bool
}

func validateApp(a *fleet.App) error {
	if err := routing.ValidateLabel("account", a.Account); err != nil {
		return invalid("invalid application", "account", err)
	}
	seen := map[string]bool{}
	for i, n := range a.Placement {
		field := fmt.Sprintf("placement[%d]", i)
		if err := routing.ValidateLabel(field, n); err != nil {
			return invalid("invalid application", field, err)
		}
		if seen[n] {
			return invalid("invalid application", field, fmt.Errorf("%s %q: listed twice", field, n))
		}
		seen[n] = true
	}
	if a.Health != nil {
		if err := routing.ValidateHealthPath("health.path", a.Health.Path); err != nil {
			return invalid("invalid application", "health.path", err)
		}
	}
	if a.Ingress != nil {
		// Named exactly: an empty group is not a silent "default" (omit ingress for
		// that), and a name no ingress can send in ?group= would strand the hosts.
		if err := routing.ValidateGroup("ingress.group", a.Ingress.Group); err != nil {
			return invalid("invalid application", "ingress.group", err)
		}
	}
	return validatePassthrough(a)
}

// PutApp creates or replaces application name with a (admin only; the caller
// checks). An identical PUT writes nothing and bumps nothing. An application never
// changes accounts (delete and recreate it). ifMatch, when set, must be the current
// etag.
func (w *Writer) PutApp(ctx context.Context, who Actor, name string, a fleet.App, ifMatch string) (fleet.App, string, bool, error) {
	if err := ValidateAppName(name); err != nil {
		return fleet.App{}, "", false, err
	}
	if a.Name == "" {
		a.Name = name
	}
	if a.Name != name {
		return fleet.App{}, "", false, invalid("invalid name", "name", fmt.Errorf("name %q does not match the URL's %q", a.Name, name))
	}
	if a.Placement == nil {
		a.Placement = []string{}
	}
	if err := validateApp(&a); err != nil {
		return fleet.App{}, "", false, err
	}
	if err := w.validateMiddlewares(&a); err != nil {
		return fleet.App{}, "", false, err
	}
	key := fleet.AppKey(name)
	cur, err := w.st.Get(ctx, key)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fleet.App{}, "", false, fmt.Errorf("reading application %s: %w", name, err)
	}
	if ifMatch != "" && (!exists || !sameETag(cur.ETag, ifMatch)) {
		return fleet.App{}, "", false, fmt.Errorf("%w: If-Match does not match the current application", ErrPrecondition)
	}
	if exists {
		var old fleet.App
		if err := json.Unmarshal(cur.Value, &old); err != nil {
			// Its account and incarnation are unknown: replacing it must be deliberate.
			if ifMatch == "" {
				return fleet.App{}, "", false, &ErrConflict{What: "current application unreadable",
					Detail: fmt.Sprintf("the stored %s cannot be decoded (%v); PUT with If-Match its etag to replace it (a new incarnation), or DELETE it", name, err)}
			}
			old = fleet.App{Account: a.Account, ID: newID()}
		}
		if old.Account != a.Account {
			return fleet.App{}, "", false, &ErrConflict{What: "account change refused", Holder: old.Account,
				Detail: fmt.Sprintf("application %s belongs to account %q; delete and recreate it to move accounts", name, old.Account)}
		}
		if a.ID != "" && a.ID != old.ID {
			return fleet.App{}, "", false, invalid("invalid application", "id", fmt.Errorf("id %q: the node mints an application's id; it cannot be changed", a.ID))
		}
		a.ID = old.ID // an incarnation keeps its id
	} else {
		if a.ID != "" {
			return fleet.App{}, "", false, invalid("invalid application", "id", fmt.Errorf("id %q: the node mints an application's id at creation", a.ID))
		}
		a.ID = newID()
	}
	body, _ := jsonx.Marshal(a)
	if exists && string(cur.Value) == string(body) {
		return a, cur.ETag, false, w.settle(ctx) // no-op: no write, no serial bump
	}
	if a.Passthrough {
		if err := w.passthroughClaimConflict(ctx, &a); err != nil {
			return fleet.App{}, "", false, err
		}
	}
	// Routes follow an application's hosts (admin-only today, and the admin spends no
	// routing changes: the charge is for any other writer).
	refund, err := w.chargeRoute(ctx, who, a.Account, "app")
	if err != nil {
		return fleet.App{}, "", false, err
	}
	etag, err := w.st.Put(ctx, key, body, store.Condition{IfNoneMatch: !exists, IfMatch: cur.ETag})
	if err != nil {
		refund()
		return fleet.App{}, "", false, fmt.Errorf("writing application %s: %w", name, err)
	}
	if err := w.committed(ctx, who, AuditRecord{Action: "app.put", Account: a.Account, App: name}, key); err != nil {
		return fleet.App{}, "", false, err
	}
	return a, etag, !exists, nil
}

// DeleteApp removes application name; it must hold no claims.
func (w *Writer) DeleteApp(ctx context.Context, who Actor, name, ifMatch string) error {
	a, etag, err := w.App(ctx, name)
	if errors.Is(err, ErrNotFound) {
		if serr := w.settle(ctx); serr != nil {
			return serr // a retry of a delete whose announcement failed: announce it
		}
	}
	// A corrupt application object can still be deleted (only by the admin: the
	// route is admin-only), conditionally on the bytes that are there; its account is
	// unknown to the audit record.
	var corrupt *ErrCorrupt
	if errors.As(err, &corrupt) {
		a, etag, err = fleet.App{}, corrupt.ETag, nil
	}
	if err != nil {
		return err
	}
	if ifMatch != "" && !sameETag(etag, ifMatch) {
		return fmt.Errorf("%w: If-Match does not match the current application", ErrPrecondition)
	}
	claims, listed, err := w.claimsOf(ctx, name)
	if err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	if len(claims) > 0 {
		return &ErrConflict{What: "application holds domains", Holder: name, Detail: fmt.Sprintf("release %s first", strings.Join(claims, ", "))}
	}
	if w.afterClaimsListed != nil {
		w.afterClaimsListed()
	}
	refund, err := w.chargeRoute(ctx, who, a.Account, "app")
	if err != nil {
		return err
	}
	if err := w.st.Delete(ctx, fleet.AppKey(name), etag); err != nil {
		refund()
		return fmt.Errorf("deleting application %s: %w", name, err)
	}
	keys := []string{fleet.AppKey(name)}
	for _, c := range w.withdrawRacedClaims(ctx, name, listed) {
		w.appendAudit(ctx, who, AuditRecord{Action: "domain.withdraw", Account: c.Account, App: name, Host: c.Host, Prefixes: len(c.Paths)})
		keys = append(keys, fleet.ClaimKey(c.Host))
	}
	// This node's instance goes at once; every other node's on its next sweep.
	if err := w.inst.Release(name); err == nil {
		w.instancesChanged()
	}
	return w.committed(ctx, who, AuditRecord{Action: "app.delete", Account: a.Account, App: name}, keys...)
}

// withdrawRacedClaims deletes the claims of application name written after its delete
// listed none (listed: that listing, key → etag). A claim that read the application
// before the delete, was written after the listing, and re-read the application before
// the delete landed was answered 201 (Claim's own re-read withdraws it only when the
// delete came first): stored, it would hold its host for scafo-unowned until the admin
// released it. The delete comes first in the end, as though it had released the claim.
//
// Only what is new or changed since the listing is read (the listing held no claim of
// name). Claims name an application, not its incarnation, so nothing is withdrawn while
// an application of that name exists again, and a claim withdrawn as one is re-created
// is put back (the new incarnation may have been told "already yours"). A delete that
// loses to a concurrent change of the claim (a path map's publish) reads it again and
// retries, a few times. A failure is logged: the claim then stays until released, as
// before this check. It returns the claims withdrawn, which the delete audits
// (domain.withdraw) and announces with itself.
func (w *Writer) withdrawRacedClaims(ctx context.Context, name string, listed map[string]string) []fleet.Claim {
	ctx = context.WithoutCancel(ctx)
	entries, err := w.st.List(ctx, fleet.PrefixDomains)
	if err != nil {
		w.log.Error("listing the claims of a deleted application", "app", name, "err", err)
		return nil
	}
	var out []fleet.Claim
	for _, e := range entries {
		if etag, ok := listed[e.Key]; ok && etag == e.ETag {
			continue
		}
		if c, ok := w.withdrawRacedClaim(ctx, name, e.Key); ok {
			out = append(out, c)
		}
	}
	return out
}

// withdrawRacedClaim withdraws the claim at key if it is application name's and no
// application of that name exists (withdrawRacedClaims).
func (w *Writer) withdrawRacedClaim(ctx context.Context, name, key string) (fleet.Claim, bool) {
	const attempts = 4
	for range attempts {
		obj, err := w.st.Get(ctx, key)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				w.log.Error("reading a claim of a deleted application", "key", key, "app", name, "err", err)
			}
			return fleet.Claim{}, false
		}
		var c fleet.Claim
		if json.Unmarshal(obj.Value, &c) != nil || c.App != name {
			return fleet.Claim{}, false
		}
		if _, _, err := w.App(ctx, name); !errors.Is(err, ErrNotFound) {
			return fleet.Claim{}, false // created again (or unreadable): the claim may be the new one's
		}
		err = w.st.Delete(ctx, key, obj.ETag)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fleet.Claim{}, false // the claim withdrew itself
		case errors.Is(err, store.ErrPreconditionFailed):
			continue // changed meanwhile: read it again
		case err != nil:
			w.log.Error("withdrawing a claim of a deleted application", "key", key, "app", name, "err", err)
			return fleet.Claim{}, false
		}
		if _, _, err := w.App(ctx, name); !errors.Is(err, ErrNotFound) {
			// Created again while the claim went: it may have been told "already yours".
			if _, perr := w.st.Put(ctx, key, obj.Value, store.Condition{IfNoneMatch: true}); perr != nil {
				w.log.Error("putting back a claim withdrawn as its application was created again", "key", key, "app", name, "err", perr)
				return c, true
			}
			w.log.Warn("kept a claim written while its application was deleted: an application of that name exists again", "key", key, "app", name)
			return fleet.Claim{}, false
		}
		w.log.Warn("withdrew a claim written while its application was deleted", "host", c.Host, "app", name)
		return c, true
	}
	w.log.Error("withdrawing a claim of a deleted application: it kept changing", "key", key, "app", name)
	return fleet.Claim{}, false
}

// sameETag reports whether a client's If-Match value matches the current etag of an
// object that exists, as RFC 9110 §13.1.1 has it: "*" matches any current
// representation; otherwise the value is a list of entity tags compared strongly, so a
// weak tag (W/"…") never matches. A bare tag without quotes is taken as quoted.
func sameETag(storeETag, ifMatch string) bool {
	cur := strings.Trim(storeETag, `"`)
	for _, t := range strings.Split(ifMatch, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "*":
			return true
		case strings.HasPrefix(t, "W/"):
			// a weak tag never matches
		case cur != "" && strings.Trim(t, `"`) == cur:
			return true
		}
	}
	return false
}

// AppWarnings are what an application's write should tell its writer though nothing is
// wrong with it: an ingress group that no platform domain is in (--platform.groups maps
// none to it, and it is not the group of the unmapped ones) gets no platform host, only
// its custom domains route (the derivation lists it in /v1/status skipped, too).
// Nothing is said of groups when the fleet has no platform domain at all. An
// application with middlewares is told that only Traefik ingresses apply them: a Caddy
// ingress answers 503 for its hosts (docs/design.md §14).
func (w *Writer) AppWarnings(a fleet.App) []string {
	var warn []string
	if len(a.Middlewares) > 0 {
		warn = append(warn, fmt.Sprintf("middlewares are applied by Traefik ingresses only: a Caddy ingress answers 503 for the hosts of application %s and the prefixes that select them (serve it through an ingress group only Traefik ingresses poll)", a.Name))
	}
	if g := w.groupWarning(a); g != "" {
		warn = append(warn, g)
	}
	return warn
}

// groupWarning is AppWarnings' sentence about a's ingress group, "" when none is due.
func (w *Writer) groupWarning(a fleet.App) string {
	if len(w.cfg.PlatformDomains) == 0 {
		return ""
	}
	group := a.GroupOf()
	for _, d := range w.cfg.PlatformDomains {
		g, ok := w.cfg.DomainGroups[routing.FoldHost(d)]
		if !ok || g == "" {
			g = routing.DefaultGroup
		}
		if g == group {
			return ""
		}
	}
	return fmt.Sprintf("ingress group %q has no platform domain (--platform.groups maps none to it): application %s gets no platform host; its custom domains still route", group, a.Name)
}
