package fleetwrite

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// ValidatePaths checks every entry of a path map in sorted key order, names the first
// offender, and returns the map with its targets folded.
func ValidatePaths(m map[string]string) (map[string]string, error) {
	if len(m) > routing.MaxPaths {
		return nil, invalid("invalid paths", "paths", fmt.Errorf("paths: %d entries, at most %d per host", len(m), routing.MaxPaths))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(m))
	for _, k := range keys {
		field := "paths[" + strconv.Quote(k) + "]"
		if err := routing.ValidatePrefix(field, k); err != nil {
			return nil, invalid("invalid paths", field, err)
		}
		t := routing.FoldHost(m[k])
		if err := routing.ValidateHost(field+" target", t); err != nil {
			return nil, invalid("invalid paths", field, err)
		}
		out[k] = t
	}
	return out, nil
}

// claimForPaths loads app and host's claim and checks that who may publish for app
// and that app holds host.
func (w *Writer) claimForPaths(ctx context.Context, who Actor, app, host string) (fleet.Claim, string, error) {
	a, err := w.authorizedApp(ctx, who, app, fleet.RolePublish, fleet.RoleInstance)
	if err != nil {
		return fleet.Claim{}, "", err
	}
	c, etag, err := w.loadClaim(ctx, host)
	if errors.Is(err, ErrNotFound) {
		return fleet.Claim{}, "", fmt.Errorf("%w: %s is not held by application %s", ErrNotFound, host, app)
	}
	if err != nil {
		return fleet.Claim{}, "", err
	}
	// One answer for "held by someone else" and "not claimed": whether a name is another
	// tenant's is not this caller's business. A claim whose account is not the
	// application's (a claim that raced the application's deletion, inherited by a
	// recreated application in another account) is not the application's either.
	if c.App != app || c.Account != a.Account {
		return fleet.Claim{}, "", fmt.Errorf("%w: %s is not held by application %s", ErrNotFound, host, app)
	}
	return c, etag, nil
}

// Paths reads the path map of host as published by app (the admin, or app's token).
func (w *Writer) Paths(ctx context.Context, who Actor, app, host string) (fleet.Claim, string, error) {
	return w.claimForPaths(ctx, who, app, host)
}

// PublishPaths replaces host's path map wholesale with paths (empty clears). It is the
// only writer of a claim's paths. With ifMatch it is a compare-and-swap (ErrPrecondition
// when the claim moved); without, a concurrent write to the claim is retried on the new
// version. A republish of the same map writes, audits and bumps nothing.
func (w *Writer) PublishPaths(ctx context.Context, who Actor, app, host string, paths map[string]string, ifMatch string) (fleet.Claim, string, error) {
	paths, err := ValidatePaths(paths)
	if err != nil {
		return fleet.Claim{}, "", err
	}
	c, etag, err := w.claimForPaths(ctx, who, app, host)
	if err != nil {
		return fleet.Claim{}, "", err
	}
	if err := w.passthroughPaths(ctx, app, c.Account, paths); err != nil {
		return fleet.Claim{}, "", err
	}
	// A path map that changes spends one of the account's routing changes, once
	// whatever the retries below; refunded when nothing is written after all.
	var refund func()
	charged := false
	defer func() {
		if charged && refund != nil {
			refund()
		}
	}()
	for attempt := 0; ; attempt++ {
		if ifMatch != "" && !sameETag(etag, ifMatch) {
			return fleet.Claim{}, "", fmt.Errorf("%w: If-Match does not match the current path map of %s", ErrPrecondition, host)
		}
		next := c
		next.Paths = paths
		if len(paths) == 0 {
			next.Paths = nil
		}
		newBody, _ := jsonx.Marshal(next)
		oldBody, _ := jsonx.Marshal(c)
		if string(newBody) == string(oldBody) {
			return next, etag, w.settle(ctx) // no-op republish: no write, no audit, no serial
		}
		if !charged {
			if refund, err = w.chargeRoute(ctx, who, c.Account, "paths"); err != nil {
				return fleet.Claim{}, "", err
			}
			charged = true
		}
		newETag, err := w.st.Put(ctx, fleet.ClaimKey(host), newBody, store.Condition{IfMatch: etag})
		if errors.Is(err, store.ErrPreconditionFailed) && ifMatch == "" && attempt < 20 {
			// Someone else wrote the claim between our read and write; without a client
			// If-Match, re-read and apply the wholesale replace again, after every check
			// again (the claim, or the application, may have changed hands meanwhile).
			if c, etag, err = w.claimForPaths(ctx, who, app, host); err != nil {
				return fleet.Claim{}, "", err
			}
			continue
		}
		if err != nil {
			return fleet.Claim{}, "", fmt.Errorf("publishing paths of %s: %w", host, err)
		}
		charged = false // written: spent
		if err := w.committed(ctx, who, AuditRecord{Action: "paths.put", Account: c.Account, App: app, Host: host, Prefixes: len(paths)}, fleet.ClaimKey(host)); err != nil {
			return fleet.Claim{}, "", err
		}
		return next, newETag, nil
	}
}
