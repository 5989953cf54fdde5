package fleetwrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// The rules of an application that terminates TLS itself (fleet.App.Passthrough,
// docs/design.md §2): an ingress routes its hosts at layer 4 by their exact TLS server
// name, so
//
//   - its hosts are exact names: a wildcard claim is refused (Claim);
//   - a path is invisible at layer 4: none of its claims has a path map, and no path
//     map targets one of its hosts (PublishPaths, and PutApp turning it on);
//   - it speaks TLS, not HTTP, to the ingress: no HTTP health path (the node probes it
//     by TCP connect), and proxyProtocol is absent or 2, only with passthrough.
//
// Each refusal is a 400 naming the field. Every check stays inside the account: only
// the application's own account's claims, path maps and targets count. Another
// account's path map never routes into a's hosts (fleet.Derive: a path target stays
// within its claim's account, "target belongs to another account"), so it cannot block
// turning passthrough on; and a target that is another account's host is accepted like
// a name that routes nothing, and gets the same warning (docs/security.md), never a
// 400 naming that account's application (TestPassthroughChecksStayInsideTheAccount).
// Two writes that race (a path map published while passthrough is turned on) can both
// pass; derivation drops what breaks a rule whatever the store holds (fleet.Derive), so
// the race costs a reported skip, never a route.

// validatePassthrough checks the passthrough fields of a on their own.
func validatePassthrough(a *fleet.App) error {
	if a.ProxyProtocol != 0 {
		if !a.Passthrough {
			return invalid("invalid application", "proxyProtocol", fmt.Errorf("proxyProtocol %d: only for an application with passthrough (the PROXY header goes before its TLS handshake)", a.ProxyProtocol))
		}
		if a.ProxyProtocol != routing.ProxyProtocolV2 {
			return invalid("invalid application", "proxyProtocol", fmt.Errorf("proxyProtocol %d: must be absent or 2 (PROXY protocol v2)", a.ProxyProtocol))
		}
	}
	if a.Passthrough && a.Health != nil {
		return invalid("invalid application", "health.path", errors.New("health.path: a passthrough application speaks TLS, not HTTP, to the ingress; omit health (the node probes it by TCP connect)"))
	}
	return nil
}

// errWildcardPassthrough refuses a wildcard claim of passthrough application app.
func errWildcardPassthrough(host, app string) error {
	return invalid("invalid host", "host", fmt.Errorf("host %q: application %s terminates TLS itself (passthrough), and a TLS server name selects it by its exact name; claim each name", host, app))
}

// passthroughClaimConflict is the first of a's claims, or of the path maps of its
// account's claims, that application a (about to be stored with Passthrough) would
// break: a wildcard claim of a, a path map on a claim of a, or a prefix of a claim of
// a's account targeting a host of a. A claim of another account is none of these: it
// is not a's (fleet.Derive routes a claim only for its application's account), and its
// path map never targets a's hosts. It reads every claim (an admin write of a
// passthrough application; DeleteApp does as much).
func (w *Writer) passthroughClaimConflict(ctx context.Context, a *fleet.App) error {
	entries, err := w.st.List(ctx, fleet.PrefixDomains)
	if err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	var claims []fleet.Claim
	own := map[string]bool{}
	for _, pd := range w.cfg.PlatformDomains {
		own[a.Name+"."+routing.FoldHost(pd)] = true
	}
	for _, e := range entries {
		obj, err := w.st.Get(ctx, e.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading claim %s: %w", e.Key, err)
		}
		var c fleet.Claim
		if json.Unmarshal(obj.Value, &c) != nil {
			continue // unreadable: held by nobody that can be named; it routes nothing of a's
		}
		if c.Account != a.Account {
			continue // another account's: neither a's claim nor a path into a's hosts
		}
		if c.App == a.Name {
			if routing.IsWildcard(c.Host) {
				return invalid("invalid application", "passthrough", fmt.Errorf("passthrough: application %s holds the wildcard %s; release it first (passthrough hosts are exact names)", a.Name, c.Host))
			}
			if len(c.Paths) > 0 {
				return invalid("invalid application", "passthrough", fmt.Errorf("passthrough: %s of application %s has a path map of %d prefixes; clear it first (a path is invisible at layer 4)", c.Host, a.Name, len(c.Paths)))
			}
			own[c.Host] = true
		}
		claims = append(claims, c)
	}
	for _, c := range claims {
		for _, k := range slices.Sorted(maps.Keys(c.Paths)) {
			if own[c.Paths[k]] {
				return invalid("invalid application", "passthrough", fmt.Errorf("passthrough: the path map of %s sends %q to %s, a host of application %s; a path is invisible at layer 4", c.Host, k, c.Paths[k], a.Name))
			}
		}
	}
	return nil
}

// passthroughPaths refuses a non-empty path map on a host of a passthrough application,
// and any prefix whose target is a host of one of account's applications (a platform
// host or a claim). A target held in another account passes, as a name that routes
// nothing does: derivation drops it ("target belongs to another account") and the
// publisher's warning reads the same for both. It reads each distinct target's holder
// once.
func (w *Writer) passthroughPaths(ctx context.Context, app, account string, paths map[string]string) error {
	if len(paths) == 0 {
		return nil
	}
	a, _, err := w.App(ctx, app)
	if err != nil {
		return err
	}
	if a.Passthrough {
		return invalid("invalid paths", "paths", fmt.Errorf("paths: application %s terminates TLS itself (passthrough); a path is invisible at layer 4", app))
	}
	checked := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(paths)) {
		t := paths[k]
		if checked[t] {
			continue
		}
		checked[t] = true
		holder, holderAccount, err := w.holderApp(ctx, t)
		if err != nil {
			return err
		}
		if holder == "" || holderAccount != "" && holderAccount != account {
			continue // no holder, or another account's claim: derivation drops the entry
		}
		h, _, err := w.App(ctx, holder)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		var corrupt *ErrCorrupt
		if errors.As(err, &corrupt) {
			continue
		}
		if err != nil {
			return err
		}
		if h.Account != account {
			continue // another account's host (or a claim inconsistent with its application): routes nothing here
		}
		if h.Passthrough {
			field := "paths[" + strconv.Quote(k) + "]"
			return invalid("invalid paths", field, fmt.Errorf("%s: target %s is a host of application %s, which terminates TLS itself (passthrough); a path is invisible at layer 4", field, t, holder))
		}
	}
	return nil
}

// holderApp names the application holding exact host and, for a claim, the claim's
// account: the claim's application, or the application of a platform host
// "<app>.<platform domain>" (account "": the application's own); "" when neither.
func (w *Writer) holderApp(ctx context.Context, host string) (app, account string, err error) {
	c, _, err := w.loadClaim(ctx, host)
	switch {
	case err == nil:
		return c.App, c.Account, nil
	case !errors.Is(err, ErrNotFound):
		var corrupt *ErrCorrupt
		if errors.As(err, &corrupt) {
			return "", "", nil
		}
		return "", "", err
	}
	name, parent, ok := strings.Cut(host, ".")
	if !ok {
		return "", "", nil
	}
	for _, pd := range w.cfg.PlatformDomains {
		if routing.FoldHost(pd) == parent {
			return name, "", nil
		}
	}
	return "", "", nil
}
