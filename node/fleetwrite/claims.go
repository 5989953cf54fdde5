package fleetwrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/publicsuffix"

	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// CanonicalHost folds and validates a claim's host from a URL. A wildcard directly
// over a public suffix (*.co.uk, *.github.io, *.com) is refused: it would squat every
// registrable name below it, each of them someone else's.
func CanonicalHost(raw string) (string, error) {
	host := routing.FoldHost(raw)
	if err := routing.ValidateCustomHost("host", host); err != nil {
		return "", invalid("invalid host", "host", err)
	}
	if parent, ok := strings.CutPrefix(host, "*."); ok {
		if ps, _ := publicsuffix.PublicSuffix(parent); ps == parent {
			return "", invalid("invalid host", "host", fmt.Errorf("host %q: a wildcard over the public suffix %q would cover names registered by others", host, parent))
		}
	}
	return host, nil
}

// coverageConflict refuses host for account when it overlaps (is, covers, or is
// covered by) a name another account holds, or belongs to the platform (fleet.
// ClaimConflict: the one rule Derive also enforces). It lists the claim keys once and
// reads only the claims whose names overlap host; an unreadable one counts as held by
// someone else (its holder is unknown, so nobody may claim over it).
func (w *Writer) coverageConflict(ctx context.Context, host, account string) error {
	if err := fleet.PlatformConflict(host, w.cfg.PlatformDomains); err != nil {
		return invalid("invalid host", "host", err)
	}
	entries, err := w.st.List(ctx, fleet.PrefixDomains)
	if err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	var claims []fleet.Claim
	for _, e := range entries {
		h := strings.TrimSuffix(strings.TrimPrefix(e.Key, fleet.PrefixDomains), ".json")
		if !routing.Overlaps(host, h) {
			continue
		}
		obj, err := w.st.Get(ctx, e.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading claim %s: %w", h, err)
		}
		var c fleet.Claim
		if json.Unmarshal(obj.Value, &c) != nil || c.Host != h {
			c = fleet.Claim{Host: h} // unreadable: its holder is unknown
		}
		claims = append(claims, c)
	}
	holder, err := fleet.ClaimConflict(host, account, claims, w.cfg.PlatformDomains)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fleet.ErrPlatformName):
		return invalid("invalid host", "host", err)
	case holder == "":
		return &ErrConflict{What: "host overlaps a claim", Detail: err.Error()}
	default:
		return &ErrConflict{What: "host already claimed", Holder: holder, Detail: err.Error()}
	}
}

func (w *Writer) loadClaim(ctx context.Context, host string) (fleet.Claim, string, error) {
	c, etag, err := load[fleet.Claim](ctx, w.st, fleet.ClaimKey(host))
	if err != nil {
		return fleet.Claim{}, "", fmt.Errorf("reading claim %s: %w", host, err)
	}
	return c, etag, nil
}

// ClaimOf reads app's claim on host (ErrNotFound when another application holds it).
func (w *Writer) ClaimOf(ctx context.Context, app, host string) (fleet.Claim, string, error) {
	c, etag, err := w.loadClaim(ctx, host)
	if err != nil {
		return fleet.Claim{}, "", err
	}
	if c.App != app {
		return fleet.Claim{}, "", fmt.Errorf("%w: %s is not held by %s", ErrNotFound, host, app)
	}
	return c, etag, nil
}

// Claim makes app the holder of host (admin only; the caller checks). Create-only
// across applications: 409 naming the holder when another application holds it; an
// existing claim of app's own is returned as it is (created is false).
func (w *Writer) Claim(ctx context.Context, who Actor, app, host string) (c fleet.Claim, etag string, created bool, err error) {
	host, err = CanonicalHost(host)
	if err != nil {
		return fleet.Claim{}, "", false, err
	}
	if err := fleet.PlatformConflict(host, w.cfg.PlatformDomains); err != nil {
		return fleet.Claim{}, "", false, invalid("invalid host", "host", err)
	}
	a, _, err := w.App(ctx, app)
	if err != nil {
		return fleet.Claim{}, "", false, err
	}
	if a.Passthrough && routing.IsWildcard(host) {
		return fleet.Claim{}, "", false, errWildcardPassthrough(host, app)
	}
	// Two claims racing from different accounts (a wildcard and a name under it) can
	// both pass this check: the check after the write settles that, and Derive drops a
	// covering wildcard whatever is stored.
	if err := w.coverageConflict(ctx, host, a.Account); err != nil {
		return fleet.Claim{}, "", false, err
	}
	c = fleet.Claim{Host: host, Account: a.Account, App: app}
	body, _ := jsonx.Marshal(c)
	refund, err := w.chargeRoute(ctx, who, a.Account, "claim")
	if err != nil {
		return fleet.Claim{}, "", false, err
	}
	etag, err = w.st.Put(ctx, fleet.ClaimKey(host), body, store.Condition{IfNoneMatch: true})
	if err != nil {
		refund() // already held (ours or not), or not written
	}
	if errors.Is(err, store.ErrPreconditionFailed) {
		held, hetag, gerr := w.loadClaim(ctx, host)
		if gerr != nil {
			return fleet.Claim{}, "", false, gerr
		}
		if held.App == app {
			return held, hetag, false, w.settle(ctx) // already ours: idempotent
		}
		return fleet.Claim{}, "", false, &ErrConflict{What: "host already claimed", Holder: held.App,
			Detail: fmt.Sprintf("%s is held by application %s", host, held.App)}
	}
	if err != nil {
		return fleet.Claim{}, "", false, fmt.Errorf("claiming %s: %w", host, err)
	}
	// Check again now that the claim is stored: of two overlapping claims from different
	// accounts that raced past the first check, each now sees the other and withdraws,
	// so neither lies dormant until the other name is released.
	if cerr := w.coverageConflict(ctx, host, a.Account); cerr != nil {
		if derr := w.st.Delete(context.WithoutCancel(ctx), fleet.ClaimKey(host), etag); derr != nil {
			w.log.Error("withdrawing a claim that raced an overlapping one", "host", host, "err", derr)
		} else {
			refund()
		}
		return fleet.Claim{}, "", false, cerr
	}
	// And the application again: its delete (which refuses while it holds a claim, and
	// lists its claims first) may have landed between the read above and this write.
	// Stored with no application, the claim would hold its host for scafo-unowned until
	// the admin released it; it is withdrawn instead, and the claim answers as for an
	// application that does not exist (fleetsim: a claim answered 201 after its
	// application's delete answered 200).
	if now, _, aerr := w.App(ctx, app); aerr != nil || now.ID != a.ID {
		// ErrNotFound: the delete withdrew it first (withdrawRacedClaims).
		if derr := w.st.Delete(context.WithoutCancel(ctx), fleet.ClaimKey(host), etag); derr != nil && !errors.Is(derr, store.ErrNotFound) {
			w.log.Error("withdrawing a claim whose application was deleted meanwhile", "host", host, "app", app, "err", derr)
			return fleet.Claim{}, "", false, fmt.Errorf("claiming %s: its application %s changed meanwhile and withdrawing the claim failed: %w", host, app, derr)
		}
		refund()
		if aerr == nil {
			aerr = fmt.Errorf("%w: application %s was deleted and created again meanwhile", ErrNotFound, app)
		}
		return fleet.Claim{}, "", false, aerr
	}
	if err := w.committed(ctx, who, AuditRecord{Action: "domain.claim", Account: a.Account, App: app, Host: host}, fleet.ClaimKey(host)); err != nil {
		return fleet.Claim{}, "", false, err
	}
	return c, etag, true, nil
}

// Release drops app's claim on host (admin only; the caller checks).
func (w *Writer) Release(ctx context.Context, who Actor, app, host, ifMatch string) error {
	c, etag, err := w.loadClaim(ctx, host)
	if errors.Is(err, ErrNotFound) {
		if serr := w.settle(ctx); serr != nil {
			return serr // a retry of a release whose announcement failed: announce it
		}
	}
	if err != nil {
		return err
	}
	if c.App != app {
		return &ErrConflict{What: "held by another application", Holder: c.App, Detail: fmt.Sprintf("%s is held by application %s", host, c.App)}
	}
	if ifMatch != "" && !sameETag(etag, ifMatch) {
		return fmt.Errorf("%w: If-Match does not match the current claim", ErrPrecondition)
	}
	refund, err := w.chargeRoute(ctx, who, c.Account, "claim")
	if err != nil {
		return err
	}
	if err := w.st.Delete(ctx, fleet.ClaimKey(host), etag); err != nil {
		refund()
		return fmt.Errorf("releasing %s: %w", host, err)
	}
	return w.committed(ctx, who, AuditRecord{Action: "domain.release", Account: c.Account, App: app, Host: host, Prefixes: len(c.Paths)}, fleet.ClaimKey(host))
}

// claimsOf lists the hosts app holds, and the claims it read (key → the etag read).
func (w *Writer) claimsOf(ctx context.Context, app string) ([]string, map[string]string, error) {
	entries, err := w.st.List(ctx, fleet.PrefixDomains)
	if err != nil {
		return nil, nil, err
	}
	listed := make(map[string]string, len(entries))
	var out []string
	for _, e := range entries {
		obj, err := w.st.Get(ctx, e.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		listed[e.Key] = obj.ETag // the version read
		var c fleet.Claim
		if json.Unmarshal(obj.Value, &c) == nil && c.App == app {
			out = append(out, c.Host)
		}
	}
	return out, listed, nil
}
