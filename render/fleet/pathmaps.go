package fleet

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

// pathFailure groups the entries of one host's map that failed for one reason.
type pathFailure struct {
	reason   string
	count    int
	examples []string
}

const maxPathExamples = 5

func (dv *deriver) buildPaths() {
	for i := range dv.routes {
		r := &dv.routes[i]
		h := dv.routeHolders[i]
		if h.claim == nil || len(h.claim.Paths) == 0 {
			continue
		}
		if h.ai != nil && h.ai.passthrough {
			dv.skip(ClaimKey(r.Host)+"#paths", "a passthrough application's host has no path map (a path is invisible at layer 4); %d prefixes ignored", len(h.claim.Paths))
			continue
		}
		r.Paths = dv.pathMap(r.Host, h)
	}
}

func (dv *deriver) pathMap(host string, h *holder) map[string]string {
	src := h.claim.Paths
	object := ClaimKey(host) + "#paths"

	// The cap is decided on the map as published: keep the first MaxPaths keys in
	// sorted order. Sorting is only needed when the cap bites.
	capped, last := false, ""
	if len(src) > routing.MaxPaths {
		keys := make([]string, 0, len(src))
		for k := range src {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dropped := keys[routing.MaxPaths:]
		dv.skip(object, "%d prefixes exceed the cap of %d per host; dropped the last %d in sorted key order (%q … %q)",
			len(keys), routing.MaxPaths, len(dropped), dropped[0], dropped[len(dropped)-1])
		capped, last = true, keys[routing.MaxPaths-1]
	}

	type failed struct{ key, target, reason string }
	var failures []failed
	out := make(map[string]string, min(len(src), routing.MaxPaths))
	for k, target := range src {
		if capped && k > last {
			continue
		}
		if reason := dv.pathEntryProblem(host, h, k, target); reason != "" {
			failures = append(failures, failed{k, target, reason})
			continue
		}
		out[k] = target
	}

	// Report once per host and reason, with the first few keys in sorted order.
	if len(failures) > 0 {
		slices.SortFunc(failures, func(a, b failed) int { return strings.Compare(a.key, b.key) })
		var groups []*pathFailure
		byReason := map[string]*pathFailure{}
		for _, f := range failures {
			g := byReason[f.reason]
			if g == nil {
				g = &pathFailure{reason: f.reason}
				byReason[f.reason] = g
				groups = append(groups, g)
			}
			g.count++
			if len(g.examples) < maxPathExamples {
				g.examples = append(g.examples, strconv.Quote(f.key)+" → "+strconv.Quote(f.target))
			}
		}
		for _, g := range groups {
			more := ""
			if g.count > len(g.examples) {
				more = fmt.Sprintf(", and %d more", g.count-len(g.examples))
			}
			dv.skip(object, "%d entries ignored: %s: %s%s", g.count, g.reason, strings.Join(g.examples, ", "), more)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// pathEntryProblem returns why one path-map entry of host (held by h) cannot be
// published, or "" when it can.
func (dv *deriver) pathEntryProblem(host string, h *holder, prefix, target string) string {
	if routing.ValidatePrefix("prefix", prefix) != nil {
		return "invalid prefix (must match [a-z0-9][a-z0-9._~-]*, at most 63 bytes)"
	}
	t, seen := dv.targets[target]
	if !seen {
		// Maps of thousands of prefixes name a few targets: each is resolved once.
		if dv.targets == nil {
			dv.targets = map[string]*holder{}
		}
		t = dv.holderOf(target)
		dv.targets[target] = t
	}
	// Held names are validated already; only a miss (or a wildcard) needs the full check.
	if t == nil || routing.IsWildcard(target) {
		if routing.ValidateHost("target", target) != nil {
			return "target is not a canonical host name"
		}
	}
	switch {
	case target == host:
		return "target is this host itself"
	case t == nil:
		return "target is not a host of any application"
	case t.app == routing.UnownedApplication:
		return "target is a claimed host without a holder (its claim object is unreadable or inconsistent)"
	case t.account != h.account:
		return "target belongs to another account"
	case t.ai != nil && t.ai.passthrough:
		return "target's application terminates TLS itself (passthrough): a path is invisible at layer 4"
	case !t.routed:
		return "target's application has no ready instance"
	}
	return ""
}
