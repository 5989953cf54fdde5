package fleet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

func (dv *deriver) indexClaims(claims []Claim, unreadable []string) {
	counts := countNames(claims, func(c *Claim) string { return c.Host })
	for _, h := range unreadable {
		counts[h]++
	}
	unowned := map[string]bool{}
	// noHolder records a claimed name whose holder cannot be named: an exact host is
	// held by nobody (a 503 route), a wildcard is left out.
	noHolder := func(host, why string) {
		if routing.IsWildcard(host) {
			dv.skip(ClaimKey(host), "%s; wildcard not routed", why)
			return
		}
		dv.skip(ClaimKey(host), "%s; the host is held by no application and answers 503 (fail closed) until the store is fixed", why)
		unowned[host] = true
	}
	dv.claims = make([]*Claim, 0, len(claims))
	for i := range claims {
		c := &claims[i]
		key := ClaimKey(c.Host)
		if err := routing.ValidateCustomHost("host", c.Host); err != nil {
			dv.skip(key, "%v; claim ignored", err)
			continue
		}
		if err := PlatformConflict(c.Host, dv.domains); err != nil {
			dv.skip(key, "%v; claim ignored", err)
			continue
		}
		if n := counts[c.Host]; n > 1 {
			noHolder(c.Host, fmt.Sprintf("%d claim objects name host %q", n, c.Host))
			continue
		}
		ai := dv.appByName(c.App)
		if ai == nil {
			noHolder(c.Host, fmt.Sprintf("application %q not found (or skipped)", c.App))
			continue
		}
		if c.Account != ai.app.Account {
			noHolder(c.Host, fmt.Sprintf("claim account %q is not the account of application %q", c.Account, c.App))
			continue
		}
		dv.claims = append(dv.claims, c)
	}
	for _, h := range unreadable {
		key := ClaimKey(h)
		if err := routing.ValidateCustomHost("host", h); err != nil {
			dv.skip(key, "claim object could not be decoded, and its key names no valid host (%v); ignored", err)
			continue
		}
		if err := PlatformConflict(h, dv.domains); err != nil {
			dv.skip(key, "claim object could not be decoded; %v; ignored", err)
			continue
		}
		if n := counts[h]; n > 1 {
			noHolder(h, fmt.Sprintf("%d claim objects name host %q", n, h))
			continue
		}
		noHolder(h, "claim object could not be decoded")
	}
	for h := range unowned {
		dv.unowned = append(dv.unowned, h)
	}
	slices.Sort(dv.unowned)
}

// coverFree returns the wildcard claims that cover no held name of another account (or
// of no nameable holder) and reports the others: the wildcard loses. Every exact name
// is held by now; a covered name is exactly one label below the wildcard
// (routing.Covers), so one pass over the held names (each with the index of its
// holder) finds every conflict.
func (dv *deriver) coverFree(wildcards []*Claim, held []hostAt, holders []holder) []*Claim {
	if len(wildcards) == 0 {
		return nil
	}
	byParent := make(map[string]*Claim, len(wildcards))
	for _, c := range wildcards {
		byParent[c.Host[len("*."):]] = c
	}
	type conflict struct {
		first string // the smallest covered host of another account
		n     int
	}
	conflicts := map[*Claim]*conflict{}
	for _, o := range held {
		host, h := o.host, &holders[o.i]
		_, parent, ok := strings.Cut(host, ".")
		if !ok {
			continue
		}
		c := byParent[parent]
		if c == nil || !routing.Covers(c.Host, host) || (h.account == c.Account && h.app != routing.UnownedApplication) {
			continue
		}
		cf := conflicts[c]
		if cf == nil {
			cf = &conflict{first: host}
			conflicts[c] = cf
		}
		cf.n++
		if host < cf.first {
			cf.first = host
		}
	}
	out := wildcards[:0:0]
	for _, c := range wildcards {
		cf := conflicts[c]
		if cf == nil {
			out = append(out, c)
			continue
		}
		h := dv.holderOf(cf.first)
		who := fmt.Sprintf("application %q of another account", h.app)
		if h.app == routing.UnownedApplication {
			who = "no application (its claim has no holder that can be named)"
		}
		more := ""
		if cf.n > 1 {
			more = fmt.Sprintf(" (and %d more such names)", cf.n-1)
		}
		dv.skip(ClaimKey(c.Host), "covers %q, held by %s%s; a wildcard never covers another account's name: wildcard not routed, the covered names keep their own routes", cf.first, who, more)
	}
	return out
}
