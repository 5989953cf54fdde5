package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Scenario 16: claims are exclusive across accounts by coverage, and a host that exists
// in the fleet fails closed (docs/design.md §3). Account bank holds www.bank.example; account
// evil is hostile. Whatever evil does through the API, and whatever sits in the store
// (a covering wildcard written around the API, bank's own claim object corrupted), a
// request for one of bank's names never reaches evil's upstream: it is bank's, or 503
// from bank's own router, or (for a name nobody holds) Traefik's 404.
func TestHostileTenantNeverGetsAnotherAccountsTraffic(t *testing.T) {
	const (
		platform     = "apps.platform.test"
		bankWWW      = "www.bank.example"
		bankOther    = "other.bank.example" // held by nobody
		bankPlatform = "bank." + platform
		evilWild     = "*.bank.example"
	)
	f := startFleet(t, 1, nodeOptions{args: []string{"--platform.domains=" + platform}})
	n1 := f.nodes[0]
	bank := f.deploy(t, "bank", "bank", []*node{n1}, "/healthz")
	evil := f.deploy(t, "evil", "evil", []*node{n1}, "/healthz")
	bankEcho, evilEcho := bank.on(n1), evil.on(n1)

	n1.claim(t, "bank", bankWWW)

	// The write path refuses evil's claims on bank's names (409) and over the platform
	// (400): node/fleetwrite's TestClaimsAreExclusiveAcrossAccountsByCoverage and
	// TestClaimRefusesPlatformNames; both on the wire: node's TestTheNodesSettingsReachItsWrites.
	// Here, what the store holds despite the API never routes bank's names to evil.
	// evil's own wildcard is fine.
	n1.claim(t, "evil", "*.evil.example")

	tr := startTraefik(t, "traefik", traefikOptions{node: n1})
	tr.waitServedBy(t, bankWWW, "/", "bank@n1", routeTimeout)
	tr.waitServedBy(t, "x.evil.example", "/", "evil@n1", routeTimeout)
	tr.expectServedBy(t, bankPlatform, "/", "bank@n1")
	tr.expectTraefik404(t, bankOther, "/")

	// From here on, steady loops watch bank's names through every change that follows:
	// every answer is recorded, and not one may come from evil.
	loops := map[string]*requestLoop{}
	for _, h := range []string{bankWWW, bankOther, bankPlatform} {
		loops[h] = startLoop(t, tr, h, "/", 20*time.Millisecond)
	}

	// 1. bank's instance dies and is reported not ready: bank's hosts keep their own
	// routers, pointing at no server (503).
	bankEcho.stop()
	n1.setInstance(t, "bank", bankEcho.port, false)
	// Until the readiness change reaches Traefik, the dead port answers 502; then the
	// answer must be 503 (asserted below, so that a missing router shows as a 404 there).
	for _, h := range []string{bankWWW, bankPlatform} {
		waitFor(t, h+" no longer sent to bank's dead port", routeTimeout, func() error {
			r, err := tr.get(h, "/")
			if err != nil {
				return err
			}
			if r.status == http.StatusBadGateway || r.echo != nil {
				return fmt.Errorf("%d from %s", r.status, r.from())
			}
			return nil
		})
	}
	for _, p := range []string{"/", "/login", "/account/statement?id=1"} {
		tr.expectFailClosed(t, bankWWW, p)
		tr.expectFailClosed(t, bankPlatform, p)
	}
	tr.expectTraefik404(t, bankOther, "/")
	tr.expectServedBy(t, "x.evil.example", "/", "evil@n1")

	// 2. evil's covering wildcard is written straight into the store, around the API,
	// and announced by a serial bump without names (what any out-of-band writer that
	// bumps at all does: every node then reads the whole store). A write through the API
	// follows once the node reports it skipped (a pass read it): once Traefik routes that
	// write, it has a configuration derived with the wildcard in the store. What the document
	// holds is render/fleet's (TestWildcardNeverCoversAnotherAccountsName,
	// TestHostsThatExistAlwaysHaveTheirOwnRoute).
	writeStoreObject(t, f, "domains/"+evilWild+".json", fmt.Sprintf(`{"host":%q,"account":"evil","app":"evil"}`, evilWild))
	bumpSerialUnnamed(t, f)
	n1.waitSkipped(t, "domains/"+evilWild+".json", "covers", bankWWW)
	n1.claim(t, "evil", "api.evil.example")
	tr.waitServedBy(t, "api.evil.example", "/", "evil@n1", routeTimeout)
	tr.requireNoWildcardRouter(t, "bank.example")
	tr.expectFailClosed(t, bankWWW, "/")
	tr.expectFailClosed(t, bankPlatform, "/")
	for _, h := range []string{bankOther, "a.bank.example", "www2.bank.example"} {
		tr.expectTraefik404(t, h, "/")
	}

	// 3. bank comes back: its own upstream again, the injected wildcard still nowhere.
	bankEcho.start(t)
	n1.setInstance(t, "bank", bankEcho.port, true)
	tr.waitServedBy(t, bankWWW, "/", "bank@n1", routeTimeout)
	tr.expectServedBy(t, bankPlatform, "/", "bank@n1")
	tr.expectTraefik404(t, bankOther, "/")

	// 4. bank's claim object is corrupted in the store. Its holder cannot be named any
	// more, so the name is held by nobody: 503, and the wildcard that covers it stays
	// dropped (the document: render/fleet's TestClaimedHostsWithoutAHolderFailClosed).
	writeStoreObject(t, f, "domains/"+bankWWW+".json", `{"host":"www.bank.example","account":`)
	bumpSerialUnnamed(t, f)
	n1.waitSkipped(t, "domains/"+bankWWW+".json", "could not be decoded")
	n1.waitSkipped(t, "domains/"+evilWild+".json", "covers", bankWWW)
	n1.claim(t, "evil", "api2.evil.example")
	tr.waitServedBy(t, "api2.evil.example", "/", "evil@n1", routeTimeout)
	tr.waitStatus(t, bankWWW, "/", http.StatusServiceUnavailable, routeTimeout)
	for _, p := range []string{"/", "/login"} {
		tr.expectFailClosed(t, bankWWW, p)
	}
	tr.expectServedBy(t, bankPlatform, "/", "bank@n1") // bank's platform host is untouched
	tr.expectTraefik404(t, bankOther, "/")
	tr.requireNoWildcardRouter(t, "bank.example")

	// What the loops saw, from the first answer to the last.
	for _, h := range sortedKeys(loops) {
		l := loops[h]
		l.stop()
		counts := map[string]int{}
		for _, s := range l.since(time.Time{}) {
			counts[s.from]++
		}
		t.Logf("%s through Traefik during the scenario: %v", h, counts)
		for from, n := range counts {
			bad := from == "evil@n1"
			switch h {
			case bankWWW, bankPlatform:
				// a host that exists never falls through: never Traefik's 404
				bad = bad || from == "traefik:404"
			case bankOther:
				bad = bad || from != "traefik:404" && !strings.HasPrefix(from, "error: ")
			}
			if bad {
				t.Errorf("%s: %d answers from %s", h, n, from)
			}
		}
	}
	// And evil's upstream itself: it never saw one of bank's names.
	for _, r := range evilEcho.requests() {
		host := strings.ToLower(r.Host)
		if host == bankPlatform || strings.HasSuffix(host, ".bank.example") || host == "bank.example" {
			t.Errorf("evil's upstream received a request for %s%s", r.Host, r.RawPath)
		}
	}
	tr.requireProviderClean(t, "http")
}

// waitStatus polls host+path through tr until Traefik answers status without an
// upstream.
func (tr *traefik) waitStatus(t *testing.T, host, path string, status int, timeout time.Duration) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s%s on %s answering %d", host, path, tr.name, status), timeout, func() error {
		r, err := tr.get(host, path)
		if err != nil {
			return err
		}
		if r.status != status || r.echo != nil {
			return fmt.Errorf("%d from %s", r.status, r.from())
		}
		return nil
	})
}

// expectFailClosed asserts that host+path gets 503 from Traefik itself: the host's own
// router, pointing at no server. Not a 404 (no router), not an upstream.
func (tr *traefik) expectFailClosed(t *testing.T, host, path string) {
	t.Helper()
	r, err := tr.get(host, path)
	if err != nil {
		t.Errorf("GET %s%s: %v", host, path, err)
		return
	}
	if r.status != http.StatusServiceUnavailable || r.echo != nil {
		t.Errorf("GET %s%s: %d from %s (body %.200q), want 503 from the host's own router", host, path, r.status, r.from(), r.body)
	}
}

// wildcardRouters returns the rules of our provider's routers that match the custom
// wildcard one label below parent (a HostRegexp over it, whatever else the rule has).
func (tr *traefik) wildcardRouters(t *testing.T, parent string) []string {
	t.Helper()
	rd, err := tr.rawData()
	if err != nil {
		t.Fatalf("%s: reading the API: %v", tr.name, err)
	}
	routers, _ := rd.fromProvider("http")
	match := "HostRegexp(`^[a-z0-9-]+\\." + regexp.QuoteMeta(parent) + "\\.?$`)"
	var rules []string
	for _, name := range sortedKeys(routers) {
		if rule := routers[name].Rule; strings.Contains(rule, match) {
			rules = append(rules, name+": "+rule)
		}
	}
	return rules
}

// requireNoWildcardRouter asserts that Traefik has no router for *.parent, while it
// does have evil's own *.evil.example (so the match itself is sound).
func (tr *traefik) requireNoWildcardRouter(t *testing.T, parent string) {
	t.Helper()
	if rules := tr.wildcardRouters(t, parent); len(rules) > 0 {
		t.Errorf("%s: routers covering *.%s: %q", tr.name, parent, rules)
	}
	if rules := tr.wildcardRouters(t, "evil.example"); len(rules) == 0 {
		t.Errorf("%s: no router for *.evil.example: the wildcard matcher of this test is wrong", tr.name)
	}
}
