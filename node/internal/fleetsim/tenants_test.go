package fleetsim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// Tenants: each application writes its instances and its path maps with a token of its
// own incarnation (issued by the admin), and sometimes tries another's instance or an
// earlier incarnation's token. The rules, by the model: an application token acts for
// its application's incarnation alone; claims are exclusive across accounts by
// coverage (claimOn); a path map's targets stay within its account (checkPaths); no
// route reaches an instance another application holds (checkPoll).

// wildPair: the wildcard and the name under it that claims pick together.
var wildPair = map[string]string{"*.wild.example.org": "x.wild.example.org", "x.wild.example.org": "*.wild.example.org"}

// sure: the model knows app exists, and its account.
func (s *sim) sure(app string) bool {
	_, ok := s.m.apps[app]
	return ok && !s.m.unsureApps[app]
}

// covers and overlaps are routing.Covers and routing.Overlaps, written again: a
// one-label wildcard covers the names one label below it; two names overlap when equal
// or one covers the other.
func covers(w, h string) bool {
	rest, ok := strings.CutPrefix(w, "*")
	label, found := strings.CutSuffix(h, rest)
	return ok && found && label != "" && label != "*" && !strings.Contains(label, ".")
}

func overlaps(a, b string) bool { return a == b || covers(a, b) || covers(b, a) }

// dropToken: app's incarnation ended (deleted or re-created); its token is old.
func (s *sim) dropToken(app string) {
	if t := s.m.tokens[app]; t != "" {
		s.m.oldTokens[app] = append(s.m.oldTokens[app], t)
		delete(s.m.tokens, app)
	}
}

// tenantToken is app's token (issued through n when it has none; the admin's while it
// cannot be), after, sometimes, a try of it on another application's instance and of an
// earlier incarnation's token on app's: both refused.
func (s *sim) tenantToken(n *simNode, app string) string {
	if s.m.tokens[app] == "" && s.sure(app) {
		rec := s.do(n, http.MethodPost, api.PathTokens, adminToken, map[string]any{"account": s.m.account[app], "app": app, "roles": []string{"instance", "publish"}}, nil)
		var tok struct {
			Token string `json:"token"`
		}
		if ok2xx(rec.Code) && json.Unmarshal(rec.Body.Bytes(), &tok) == nil {
			s.m.tokens[app] = tok.Token
		}
		s.logf("token of %s (account %s) issued via %s: %d", app, s.m.account[app], n.name, rec.Code)
	}
	tok := s.m.tokens[app]
	if tok == "" {
		return adminToken
	}
	if s.rng.IntN(4) == 0 {
		other := appName(s.rng.IntN(apps))
		try, who := tok, "the token of "+app
		if old := s.m.oldTokens[app]; other == app && len(old) > 0 {
			try, who = pick(s.rng, old), "a token of an earlier incarnation of "+app
		}
		if try != tok || other != app {
			rec := s.do(n, http.MethodPost, api.PathNodeInstances+"/"+other, try, nil, nil)
			s.logf("%s allocates an instance of %s via %s: %d", who, other, n.name, rec.Code)
			if ok2xx(rec.Code) {
				s.fail("%s (account %s) allocated an instance of %s (account %s): %d %s", who, s.m.account[app], other, s.m.account[other], rec.Code, rec.Body.String())
			}
		}
	}
	return tok
}

// pathsWrite is a tenant's path map on a host its application claims, to a platform
// host or a claim of its account's or another's (a write may accept a target the
// document cannot route yet: the rule is the document's, checkPaths).
func (s *sim) pathsWrite() {
	up := s.up()
	if len(up) == 0 {
		return
	}
	n := pick(s.rng, up)
	var hosts []string // the claimed names (one of them is the map's host)
	for _, h := range claimHosts {
		if _, ok := s.m.claims[h]; ok && !routing.IsWildcard(h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return
	}
	host := pick(s.rng, hosts)
	app := s.m.claims[host]
	tok := s.tenantToken(n, app)
	if tok == adminToken {
		return
	}
	target := appName(s.rng.IntN(apps)) + "." + platform
	if s.rng.IntN(2) == 0 {
		target = pick(s.rng, claimHosts[:2]) // a claim, of its account's or another's
	}
	paths := map[string]string{}
	if s.rng.IntN(4) > 0 {
		// Mostly p0: a path whose target alone changes (the revision must move:
		// checkRevision).
		paths[fmt.Sprintf("p%d", s.rng.IntN(3)/2)] = target
	}
	rec := s.do(n, http.MethodPut, api.PathApps+"/"+app+"/domains/"+host+"/paths", tok, map[string]any{"paths": paths}, nil)
	s.logf("paths of %s (%s) %v via %s: %d", host, app, paths, n.name, rec.Code)
}

// checkPaths: in a settled document, every path target of r is a route of the same
// document whose application is of r's account.
func (s *sim) checkPaths(d routing.Document, r routing.Route) {
	for _, p := range slices.Sorted(maps.Keys(r.Paths)) {
		t := r.Paths[p]
		i := slices.IndexFunc(d.Routes, func(o routing.Route) bool { return o.Host == t })
		if i < 0 {
			s.fail("settled: %s maps /%s to %s, no route of the document", r.Host, p, t)
			return
		}
		if a, b := s.m.account[r.Application], s.m.account[d.Routes[i].Application]; a != b {
			s.fail("settled: %s (%s, account %s) maps /%s to %s (%s, account %s)", r.Host, r.Application, a, p, t, d.Routes[i].Application, b)
		}
	}
}

// rawClaim writes, around the write path (a race it lost, an older node, a hand), a claim
// of x.wild.example.org for an application of another account than the one holding
// *.wild.example.org: the wildcard is then not routed, and the name keeps its own route.
func (s *sim) rawClaim() {
	w, ok := s.m.claims["*.wild.example.org"]
	if s.wiping() || s.restored || !ok || !s.sure(w) || s.m.unsureClaims["*.wild.example.org"] || s.m.unsureClaims["x.wild.example.org"] {
		return
	}
	if _, held := s.m.claims["x.wild.example.org"]; held {
		return
	}
	for i := range apps {
		a := appName(i)
		if !s.sure(a) || s.m.account[a] == s.m.account[w] {
			continue
		}
		ctx, key := context.Background(), fleet.ClaimKey("x.wild.example.org")
		b, _ := json.Marshal(fleet.Claim{Host: "x.wild.example.org", Account: s.m.account[a], App: a})
		if _, err := s.st.Put(ctx, key, b, store.Condition{IfNoneMatch: true}); err != nil {
			s.t.Fatal(err)
		}
		if _, err := store.BumpSerial(ctx, s.st, key); err != nil {
			s.t.Fatal(err)
		}
		s.logf("x.wild.example.org claimed for %s (account %s) around the write path, under %s's wildcard", a, s.m.account[a], w)
		s.m.claims["x.wild.example.org"] = a
		delete(s.m.required, "*.wild.example.org")
		s.require("x.wild.example.org", a)
		return
	}
}

// coveredByAnother: wildcard host covers a name of the document held by another account
// than app's, or by no nameable application (a wildcard never covers another
// account's name; docs/design.md §3).
func (m *model) coveredByAnother(host, app string) bool {
	for h, a := range m.claims {
		if _, live := m.apps[a]; covers(host, h) && (!live || m.account[a] != m.account[app]) {
			return true
		}
	}
	return false
}
