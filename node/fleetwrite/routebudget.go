package fleetwrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// RouteBudget is the fleet-wide budget of routing changes of one account (issue 25
// item 5): a token bucket of Burst changes refilled PerMinute a minute, kept in the
// store (prefixRouteBudgets) so that every node spends from the same bucket. Every
// write that moves the routing document (a ready instance's port or readiness, a path
// map, an application or a claim) spends one change of the application's account
// before it is written; a write that changes nothing routed spends nothing, and the
// admin spends nothing. Without it one tenant token at writes.rate (per token, per
// node) could make every Traefik of the fleet reload several times a second.
//
// Whether a write of this node's instances is a routing change is decided by the
// instance registry under its lock, with the write (Registry.set, releaseCharged): a
// write read as free that another write made a routing change meanwhile is charged
// before it is written, never let through on a stale read.
//
// A zero Burst disables the budget.
type RouteBudget struct {
	Burst     int
	PerMinute float64
}

// prefixRouteBudgets is where the buckets live: budgets/routing/<account>.json, one
// small object per account, read and written only by a routing change (never per
// tick).
const prefixRouteBudgets = "budgets/routing/"

// RouteBudgetKey is the store key of account's bucket.
func RouteBudgetKey(account string) string { return prefixRouteBudgets + account + ".json" }

// routeBucket is the stored bucket: Tokens left at At.
type routeBucket struct {
	Tokens float64   `json:"tokens"`
	At     time.Time `json:"at"`
}

// routeBudgetAttempts bounds the compare-and-swap retries of one charge (each lost
// race means another routing change of the account was charged meanwhile).
const routeBudgetAttempts = 8

// maxRouteClockSkew is the most a bucket's time may be ahead of this node's clock and
// still be believed.
const maxRouteClockSkew = time.Minute

// ErrRouteBudget is an account past its budget of routing changes (429): nothing was
// written.
type ErrRouteBudget struct {
	Account string
	// Change is the kind of change refused: instance, paths, app or claim.
	Change     string
	RetryAfter time.Duration
	Budget     RouteBudget
}

func (e *ErrRouteBudget) Error() string {
	return fmt.Sprintf("account %s has spent its fleet-wide budget of routing changes (writes.routeBurst %d, refilled writes.routePerMinute %g a minute); nothing was written; retry after %ds",
		e.Account, e.Budget.Burst, e.Budget.PerMinute, RetrySeconds(e.RetryAfter))
}

// RetrySeconds is d as a Retry-After: whole seconds, rounded up, at least 1.
func RetrySeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// chargeRoute spends one routing change of account for who, fleet-wide. It returns a
// refund to call when the change then writes nothing (an error, or a no-op after all);
// the refund is best effort. The admin is never charged. A store that cannot be read
// or written charges nothing (the change is let through and logged): while the store
// is unreachable no node publishes anything, so there are no reloads to bound, and a
// node's own instances must keep working.
func (w *Writer) chargeRoute(ctx context.Context, who Actor, account, change string) (refund func(), err error) {
	nothing := func() {}
	if who.Admin || w.cfg.RouteBudget.Burst < 1 || account == "" {
		return nothing, nil
	}
	retry, err := w.spendRoute(ctx, account, -1)
	if errors.Is(err, errRouteContended) {
		// Many changes of the account at once, on several nodes: refused like an
		// empty bucket (letting it through would make contention a way around it).
		retry, err = time.Second, nil
	}
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled)):
		// The caller left (or its deadline passed) while the charge was being made:
		// that is not an outage the node observed, and letting it through would let a
		// tenant past its budget flip at will by half-closing each request one store
		// round trip after sending it. Nothing is written (TestACancelledChargeRefusesTheChange).
		return nil, fmt.Errorf("charging routing change budget of account %q: %w", account, errors.Join(err, context.Cause(ctx)))
	case err != nil:
		w.log.Warn("routing change budget unavailable; change let through", "account", account, "change", change, "err", err)
		return nothing, nil
	case retry > 0:
		w.metrics.refused(change)
		if w.cfg.OnRouteRefused != nil {
			w.cfg.OnRouteRefused(change)
		}
		return nil, &ErrRouteBudget{Account: account, Change: change, RetryAfter: retry, Budget: w.cfg.RouteBudget}
	}
	return func() {
		if _, err := w.spendRoute(context.WithoutCancel(ctx), account, +1); err != nil {
			w.log.Warn("refunding a routing change that wrote nothing", "account", account, "err", err)
		}
	}, nil
}

// spendRoute adds delta (-1 to spend, +1 to refund) to account's bucket with a
// compare-and-swap on the stored object. A spend that finds less than one change left
// writes nothing and returns how long until one is. A missing bucket is full; so is a
// corrupt one (it is overwritten, conditionally on its etag): a hand edit or a bad
// restore must never lock an account out.
func (w *Writer) spendRoute(ctx context.Context, account string, delta float64) (time.Duration, error) {
	b := w.cfg.RouteBudget
	burst, rate := float64(b.Burst), b.PerMinute/60 // rate: a second
	key := RouteBudgetKey(account)
	for range routeBudgetAttempts {
		now := w.now().UTC()
		cur := routeBucket{Tokens: burst, At: now}
		cond := store.Condition{IfNoneMatch: true}
		obj, err := w.st.Get(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return 0, fmt.Errorf("reading %s: %w", key, err)
		default:
			cond = store.Condition{IfMatch: obj.ETag}
			var stored routeBucket
			if json.Unmarshal(obj.Value, &stored) == nil && !stored.At.IsZero() {
				cur = stored
			} else {
				w.log.Warn("corrupt routing change budget: treated as full and rewritten", "key", key)
			}
		}
		// Refill since At. Another node's clock may be ahead: time never runs back, so
		// its At stands and nothing refills until this clock passes it; but an At
		// further ahead than any clock skew (a hand edit, a node's clock years off)
		// would lock the account out until then, so it is taken as now.
		redated := cur.At.After(now.Add(maxRouteClockSkew))
		if redated {
			cur.At = now
		}
		if el := now.Sub(cur.At); el > 0 {
			cur.Tokens += el.Seconds() * rate
			cur.At = now
		}
		cur.Tokens = min(max(cur.Tokens, 0), burst)
		if delta < 0 && cur.Tokens < 1 {
			if redated { // store the new date, or it never refills
				body, _ := jsonx.Marshal(cur)
				w.st.Put(ctx, key, body, cond)
			}
			if rate <= 0 {
				return time.Hour, nil
			}
			return time.Duration((1 - cur.Tokens) / rate * float64(time.Second)), nil
		}
		cur.Tokens = min(cur.Tokens+delta, burst)
		body, _ := jsonx.Marshal(cur)
		_, err = w.st.Put(ctx, key, body, cond)
		if errors.Is(err, store.ErrPreconditionFailed) {
			continue // another change of the account was charged meanwhile: again
		}
		if err != nil {
			return 0, fmt.Errorf("writing %s: %w", key, err)
		}
		return 0, nil
	}
	return 0, errRouteContended
}

var errRouteContended = errors.New("routing change budget: too many conflicting writes in a row")

// routed is the route an instance contributes: its port when ready, else none (only
// ready instances are routed, render/fleet.Derive).
func routed(i fleet.Instance, had bool) int {
	if !had || !i.Ready {
		return 0
	}
	return i.Port
}
