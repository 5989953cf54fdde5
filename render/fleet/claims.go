package fleet

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

// The two ways a claim can be refused. Errors from PlatformConflict and ClaimConflict
// match one of them with errors.Is; the message says which names collide, for a human.
var (
	// ErrPlatformName: the name belongs to the platform and no account may claim it (the
	// API answers 400).
	ErrPlatformName = errors.New("name belongs to the platform")
	// ErrHeldByAnotherAccount: the name is, covers, or is covered by a name another
	// account holds (the API answers 409 naming the holder).
	ErrHeldByAnotherAccount = errors.New("name held by another account")
)

// PlatformConflict returns nil when host (a canonical host or one-label wildcard, as
// ValidateCustomHost accepts) may be claimed as a custom domain as far as the platform
// domains are concerned, or an error matching ErrPlatformName saying why not:
//
//   - a host strictly below a platform domain ("shop.apps.example.com",
//     "a.b.apps.example.com"): the platform's names are "<application>.<domain>",
//     rendered from application names;
//   - a wildcard of, or under, a platform domain ("*.apps.example.com",
//     "*.shop.apps.example.com"): platform domains never route by wildcard;
//   - a wildcard covering a platform domain itself ("*.example.com" covers
//     "apps.example.com", the API apex).
//
// The bare apex itself may be claimed (exactly, never through a wildcard): an
// application that claims it takes it from the node API. This is the one rule both the
// API (refusing a claim) and Derive (skipping one found in the store) apply.
func PlatformConflict(host string, platformDomains []string) error {
	if _, why := platformConflict(host, platformDomains); why != "" {
		return fmt.Errorf("%w: %s", ErrPlatformName, why)
	}
	return nil
}

// platformConflict returns the platform domain host conflicts with and why, or "", "".
// Domains are tried in order; the first conflict is reported.
func platformConflict(host string, platformDomains []string) (domain, why string) {
	for _, d := range platformDomains {
		if routing.Covers(host, d) {
			return d, fmt.Sprintf("%s would cover %s, a platform domain's apex (the node API, or the application that claims it exactly); a custom wildcard never covers a platform name", host, d)
		}
		if _, ok := PlatformOwner(host, []string{d}); !ok {
			continue
		}
		switch below := strings.TrimSuffix(host, "."+d); {
		case below == "*":
			return d, fmt.Sprintf("%s is a wildcard of the platform domain %s: platform domains never route by wildcard", host, d)
		case !strings.Contains(below, "."):
			return d, fmt.Sprintf("%s is a platform host: names under %s are <application>.%s, rendered from application names, and are never claimed", host, d, d)
		default:
			return d, fmt.Sprintf("%s is under the platform domain %s, whose names belong to the platform and are never claimed", host, d)
		}
	}
	return "", ""
}

// ClaimConflict decides whether account may claim host (canonical, validated), given
// every claim in the store and the platform domains. It returns nil when the claim
// breaks no exclusivity rule (docs/design.md §3, "Claims are exclusive across accounts by
// coverage"); otherwise holder and an error:
//
//   - errors.Is(err, ErrPlatformName): PlatformConflict refuses host; holder is the
//     platform domain (a 400).
//   - errors.Is(err, ErrHeldByAnotherAccount): a claim of another account is host itself,
//     a name host covers (host is "*.x.y", the claim "a.x.y"), or a wildcard covering
//     host (host is "a.x.y", the claim "*.x.y"); holder is that claim's application (a
//     409 naming it). When several conflict, the one with the smallest host is named,
//     so the answer does not depend on the order of claims.
//
// Claims of the same account never conflict here, whatever application holds them: a
// customer may put a wildcard over its own names. That two applications never hold one
// name is the store's create-only write's job, not this function's. Two different
// wildcards never conflict ("*.x.y" and "*.a.x.y" cover disjoint names).
//
// A claim whose Account is "" conflicts with every account: a caller that found a claim
// object it could not decode passes Claim{Host: host} for it, so nobody can claim a name
// that overlaps a name whose holder is unknown (holder is then "").
//
// Derive applies the same rule to what is already in the store (the wildcard loses).
func ClaimConflict(host, account string, claims []Claim, platformDomains []string) (holder string, err error) {
	if d, why := platformConflict(host, platformDomains); why != "" {
		return d, fmt.Errorf("%w: %s", ErrPlatformName, why)
	}
	var hit *Claim
	for i := range claims {
		c := &claims[i]
		if c.Account == account && account != "" {
			continue
		}
		if !routing.Overlaps(host, c.Host) {
			continue
		}
		if hit == nil || c.Host < hit.Host || (c.Host == hit.Host && c.App < hit.App) {
			hit = c
		}
	}
	if hit == nil {
		return "", nil
	}
	who := "application " + strconv.Quote(hit.App) + " of another account"
	if hit.App == "" || hit.Account == "" {
		who = "a claim whose holder is unknown (its object could not be read)"
	}
	var why string
	switch {
	case hit.Host == host:
		why = fmt.Sprintf("%s is held by %s", host, who)
	case routing.Covers(host, hit.Host):
		why = fmt.Sprintf("%s would cover %s, held by %s", host, hit.Host, who)
	default:
		why = fmt.Sprintf("%s is covered by the wildcard %s, held by %s", host, hit.Host, who)
	}
	return hit.App, fmt.Errorf("%w: %s", ErrHeldByAnotherAccount, why)
}
