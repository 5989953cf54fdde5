package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/node/rfc2136/bindtest"
)

// Fleet certificates by DNS-01 (docs/certificates-dns01.md, issue 27) with every part
// real: scafo-node processes, Traefik on the shipped configuration, BIND 9 (named) on
// loopback taking TSIG-signed RFC 2136 updates, and Pebble whose VA asks that BIND.

// dns01Env is a DNS-01 fleet: BIND, Pebble on it, three nodes, one Traefik per node.
type dns01Env struct {
	bind  *bindtest.Server
	peb   *pebbletest.Pebble
	fleet *fleet
	trs   []*traefik
}

// dns01FleetZone is the zone the fleet's key edits (the platform domain's).
const dns01FleetZone = "example.com"

// startDNS01Fleet starts a BIND serving example.com (the fleet's zone, its TSIG key on
// the nodes, read from a 0600 file) and customer.test (a customer's zone), a Pebble
// (pcfg, DNSServer set here) validating against it, three nodes with
// --acme.dns01.platform (plus extra flags) and one Traefik per node on ips, and deploys
// the application shop on every node.
func startDNS01Fleet(t *testing.T, ips []string, pcfg pebbletest.Config, extra ...string) *dns01Env {
	t.Helper()
	requireBinaries(t)
	b := bindtest.Start(t, bindtest.Config{Zones: []string{dns01FleetZone, "customer.test"}, Resolver: true})
	pcfg.DNSServer = b.Addr
	p := pebbletest.Start(t, pcfg)
	secretFile := filepath.Join(t.TempDir(), "tsig.secret")
	if err := os.WriteFile(secretFile, []byte(b.Key.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	web, websecure := commonFreePort(t, ips...), commonFreePort(t, ips...)
	f := startFleet(t, len(ips), nodeOptions{args: append([]string{
		"--platform.domains=" + acmePlatform,
		"--traefik.entryPoints=websecure",
		"--acme.enabled", "--acme.caServer=" + p.Directory, "--acme.caRoots=" + p.CARootsFile,
		"--acme.email=ops@example.com",
		"--acme.dns01.platform",
		"--acme.dns01.resolvers=" + b.Addr,
		"--acme.dns01.propagationTimeout=30s",
		"--acme.dns01.rfc2136.server=" + b.Addr,
		"--acme.dns01.rfc2136.zones=" + dns01FleetZone,
		"--acme.dns01.rfc2136.keyName=" + b.Key.Name,
		"--acme.dns01.rfc2136.tsigSecretFile=" + secretFile,
	}, extra...)})
	trs := make([]*traefik, len(ips))
	for i, n := range f.nodes {
		trs[i] = startACMETraefik(t, "traefik-"+n.name, ips[i], web, websecure, n)
	}
	f.deploy(t, "shop", "acme", f.nodes, "/healthz")
	return &dns01Env{bind: b, peb: p, fleet: f, trs: trs}
}

// TestDNS01WildcardIssuedOnceForTheFleetAndServedByEveryTraefik: three nodes on one
// store, three Traefiks (one per node, prefer=self) on 127.0.0.61-63, a BIND serving
// example.com (the fleet's zone, TSIG key on the nodes, read from a 0600 file) and
// customer.test (a customer's zone), Pebble validating against that BIND.
//
//  1. *.apps.example.com and the apex apps.example.com are issued once for the fleet by
//     DNS-01: Pebble counts two orders and two certificates, one node obtained each, all
//     three hold the same serials; the platform host shop.apps.example.com is no name of
//     its own. Every Traefik serves the wildcard's serial for anything.apps.example.com
//     (and shop.apps.example.com) over a TLS handshake verified against Pebble's root.
//     BIND logged the TXT written at _acme-challenge.apps.example.com, and a TSIG-signed
//     AXFR of example.com finds no TXT left.
//  2. A custom wildcard claim *.shop.customer.test without its delegation CNAME: every
//     node lists it needs-delegation with the exact CNAME and target, and after a
//     re-check of the delegation (20 polls) Pebble still has no order for it. The
//     customer creates the CNAME (a signed update to customer.test): one order, one
//     certificate, every Traefik serves it for anything.shop.customer.test, the TXT
//     (written at the target in acme.example.com) is gone again.
//
// The TSIG secret is in no node's output, status or rendered configuration.
func TestDNS01WildcardIssuedOnceForTheFleetAndServedByEveryTraefik(t *testing.T) {
	start := time.Now()
	const (
		fleetZone  = dns01FleetZone
		delegZone  = "acme." + fleetZone
		wild       = "*." + acmePlatform
		customWild = "*.shop.customer.test"
	)
	e := startDNS01Fleet(t, []string{"127.0.0.61", "127.0.0.62", "127.0.0.63"}, pebbletest.Config{}, "--acme.dns01.delegationZone="+delegZone)
	b, p, f, trs := e.bind, e.peb, e.fleet, e.trs
	up := time.Now()

	// 1. The platform wildcard and the apex, once for the fleet.
	names := []string{wild, acmePlatform}
	waitAllValid(t, f, names, 120*time.Second)
	valid := time.Now()
	logIssuance(t, f)
	serial := map[string]string{}
	for _, nm := range names {
		obtained := 0
		for i, n := range f.nodes {
			c := n.certs(t)[nm]
			if c.Challenge != "dns-01" {
				t.Fatalf("%s on %s: challenge %q, want dns-01", nm, n.name, c.Challenge)
			}
			if i == 0 {
				serial[nm] = c.Serial
			} else if c.Serial != serial[nm] {
				t.Fatalf("%s: %s holds serial %s, %s holds %s", nm, n.name, c.Serial, f.nodes[0].name, serial[nm])
			}
			if c.ObtainedHere {
				obtained++
			}
		}
		if obtained != 1 {
			t.Fatalf("%s: obtained by %d nodes, want 1", nm, obtained)
		}
	}
	for _, n := range f.nodes {
		if _, own := n.certs(t)["shop."+acmePlatform]; own {
			t.Fatalf("%s lists shop.%s as a name of its own: the wildcard covers it", n.name, acmePlatform)
		}
	}
	issued, orders := p.Issued(), p.Orders()
	if len(issued) != len(names) || orders != len(names) {
		t.Fatalf("Pebble: %d orders, %d certificates %v, want %d of each", orders, len(issued), issued, len(names))
	}
	roots := p.IssuerRoot(t)
	served := func(host, want string) {
		t.Helper()
		for _, tr := range trs {
			waitFor(t, tr.name+" serves the fleet certificate for "+host, 30*time.Second, func() error {
				s, err := handshake(tr.secureAddr(), host, roots)
				if err == nil && s != want {
					err = fmt.Errorf("serial %s, the fleet holds %s", s, want)
				}
				return err
			})
		}
	}
	served("anything."+acmePlatform, serial[wild])
	served("shop."+acmePlatform, serial[wild])
	served(acmePlatform, serial[acmePlatform])
	servedAll := time.Now()

	// The TXT record was written in the fleet's zone, and removed after validation.
	if !strings.Contains(b.Log(), "adding an RR at '_acme-challenge."+acmePlatform+"' TXT") {
		t.Fatalf("BIND did not log the TXT at _acme-challenge.%s:\n%s", acmePlatform, b.Log())
	}
	waitFor(t, "no TXT left in "+fleetZone, 30*time.Second, func() error {
		if txt := b.ZoneTXT(t, fleetZone); len(txt) != 0 {
			return fmt.Errorf("TXT in the zone: %q", txt)
		}
		return nil
	})
	t.Logf("platform: deployed → wildcard and apex valid on 3 nodes %s; → served by 3 Traefiks %s; Pebble %d orders, %d certificates",
		ms(valid.Sub(up)), ms(servedAll.Sub(valid)), orders, len(issued))

	// 2. A custom wildcard: nothing is ordered until its delegation is in place.
	f.nodes[0].claim(t, "shop", customWild)
	target := fleetcerts.DelegationTarget(delegZone, "shop", customWild)
	var firstCheck time.Time
	for _, n := range f.nodes {
		waitFor(t, n.name+" reports the missing delegation", 30*time.Second, func() error {
			c, ok := n.certs(t)[customWild]
			if !ok || c.State != fleetcerts.StateNeedsDelegation || c.Delegation == nil || c.Delegation.CheckedAt == nil {
				return fmt.Errorf("%+v", c)
			}
			if c.Delegation.CNAME != "_acme-challenge.shop.customer.test" || c.Delegation.Target != target || c.Delegation.InPlace {
				return fmt.Errorf("delegation %+v, want _acme-challenge.shop.customer.test → %s, not in place", *c.Delegation, target)
			}
			if !strings.Contains(c.LastError, "no CNAME at _acme-challenge.shop.customer.test") || !strings.Contains(c.LastError, target) {
				return fmt.Errorf("lastError %q does not say what to create", c.LastError)
			}
			if n == f.nodes[0] {
				firstCheck = *c.Delegation.CheckedAt
			}
			return nil
		})
	}
	t.Logf("without the delegation: %s", f.nodes[0].certs(t)[customWild].LastError)
	// The node looks the CNAME up again every 20 polls (20 s): after one re-check,
	// still no order.
	waitFor(t, f.nodes[0].name+" re-checks the delegation", 60*time.Second, func() error {
		c := f.nodes[0].certs(t)[customWild]
		if c.Delegation == nil || c.Delegation.CheckedAt == nil || !c.Delegation.CheckedAt.After(firstCheck) {
			return fmt.Errorf("last checked %v", firstCheck)
		}
		if c.State != fleetcerts.StateNeedsDelegation {
			return fmt.Errorf("state %s", c.State)
		}
		return nil
	})
	if o := p.Orders(); o != orders {
		t.Fatalf("Pebble has %d orders, %d before the claim: an order was placed without the delegation", o, orders)
	}
	for _, n := range f.nodes {
		if c := n.certs(t)[customWild]; c.Attempts != 0 {
			t.Fatalf("%s attempted %s without its delegation: %+v", n.name, customWild, c)
		}
	}

	// The customer creates the CNAME.
	b.Update(t, "customer.test", []string{"_acme-challenge.shop.customer.test. 60 IN CNAME " + target + "."}, nil)
	cnamed := time.Now()
	waitAllValid(t, f, []string{customWild}, 120*time.Second)
	customValid := time.Now()
	customSerial := f.nodes[0].certs(t)[customWild].Serial
	obtained := 0
	for _, n := range f.nodes {
		c := n.certs(t)[customWild]
		if c.Serial != customSerial || c.Delegation == nil || !c.Delegation.InPlace || c.LastError != "" {
			t.Fatalf("%s: %+v (delegation %+v), want serial %s, delegation in place", n.name, c, c.Delegation, customSerial)
		}
		if c.ObtainedHere {
			obtained++
		}
	}
	if obtained != 1 {
		t.Fatalf("%s: obtained by %d nodes, want 1", customWild, obtained)
	}
	if o, i := p.Orders(), len(p.Issued()); o != orders+1 || i != len(issued)+1 {
		t.Fatalf("Pebble: %d orders, %d certificates; want %d and %d (one more of each)", o, i, orders+1, len(issued)+1)
	}
	served("anything.shop.customer.test", customSerial)
	if !strings.Contains(b.Log(), "adding an RR at '"+target+"' TXT") {
		t.Fatalf("BIND did not log the TXT at the delegated target %s", target)
	}
	waitFor(t, "no TXT left in "+fleetZone+" after the custom wildcard", 30*time.Second, func() error {
		if txt := b.ZoneTXT(t, fleetZone); len(txt) != 0 {
			return fmt.Errorf("TXT in the zone: %q", txt)
		}
		return nil
	})
	t.Logf("custom wildcard: CNAME created → valid on 3 nodes %s; Pebble %d orders, %d certificates in all",
		ms(customValid.Sub(cnamed)), p.Orders(), len(p.Issued()))

	// The TSIG secret is nowhere the nodes show or log.
	for _, n := range f.nodes {
		_, status := n.do(t, http.MethodGet, "/v1/status", nil, testAdminToken)
		hay := map[string]string{
			"output":   n.proc.Output(),
			"status":   string(status),
			"rendered": string(n.ingress(t, "", "identity").body),
		}
		for where, s := range hay {
			if strings.Contains(s, b.Key.Secret) {
				t.Fatalf("%s's %s carries the TSIG secret", n.name, where)
			}
		}
	}
	t.Logf("total %s", ms(time.Since(start)))
	results.add("DNS-01: wildcards issued once for the fleet (BIND, Pebble)",
		fmt.Sprintf("- deploy → *.%s and its apex valid on 3 nodes: %s; → served by 3 Traefiks: %s; Pebble: %d orders, %d certificates", acmePlatform, ms(valid.Sub(up)), ms(servedAll.Sub(valid)), orders, len(issued)),
		fmt.Sprintf("- custom wildcard: delegation CNAME created → valid on 3 nodes: %s (the node looks it up again every 20 polls); Pebble then %d orders, %d certificates", ms(customValid.Sub(cnamed)), p.Orders(), len(p.Issued())),
	)
}

// TestDNS01WildcardRenewsOnceAndEveryTraefikSwitchesWithoutAFailedHandshake: the fleet
// of the test above (three nodes, three Traefiks on 127.0.0.64-66, BIND, Pebble on it)
// with Pebble issuing 45-second certificates, so CertMagic renews the wildcard and the
// apex by DNS-01 within seconds to 30 s. Handshakes for anything.apps.example.com run
// against every Traefik every 100 ms from the first wildcard served everywhere until a
// renewed one is: no handshake fails, the switch goes from one wildcard Pebble issued to
// the next one it issued for *.apps.example.com (Pebble's certificates read back by
// serial: nothing issued for the name in between, so the renewal was ordered once for
// the fleet), the wildcard renewals the nodes logged match Pebble's wildcard count, and
// no TXT is left in the zone.
func TestDNS01WildcardRenewsOnceAndEveryTraefikSwitchesWithoutAFailedHandshake(t *testing.T) {
	const wild = "*." + acmePlatform
	e := startDNS01Fleet(t, []string{"127.0.0.64", "127.0.0.65", "127.0.0.66"},
		pebbletest.Config{Validity: 45 * time.Second}, "--acme.renewCheckInterval=1s")
	p, f, trs := e.peb, e.fleet, e.trs
	host := "anything." + acmePlatform
	roots := p.IssuerRoot(t)

	r := watchCertSwitch(t, f, trs, wild, host, roots, 90*time.Second, 90*time.Second)
	first, second, took := r.first, r.second, r.took
	if len(r.fails) > 0 {
		t.Fatalf("%d of %d handshakes failed during the switch, first: %s", len(r.fails), r.total, r.fails[0])
	}

	norm := func(s string) string { return strings.TrimLeft(strings.ToLower(s), "0") }
	// A consistent reading: Pebble's wildcard certificates, then the renewals the nodes
	// logged, one fewer (a 45-second certificate keeps renewing: one may be between
	// Pebble's log and the node's).
	var serials, wildSerials []string
	waitFor(t, "the nodes' wildcard renewals to match Pebble's wildcard certificates", 30*time.Second, func() error {
		issued := p.IssuedNames(t)
		serials, wildSerials = nil, nil
		for _, c := range issued {
			serials = append(serials, c.Serial)
			if len(c.Names) == 1 && c.Names[0] == wild {
				wildSerials = append(wildSerials, norm(c.Serial))
			}
		}
		renewals := 0
		for _, n := range f.nodes {
			renewals += countLines(n.proc.Output(), "fleet certificate obtained", "name="+wild, "renewal=true")
		}
		if renewals != len(wildSerials)-1 {
			return fmt.Errorf("%d wildcard renewals logged across the nodes, Pebble issued %d wildcard certificates", renewals, len(wildSerials))
		}
		return nil
	})
	at := func(s string) int {
		for i, w := range wildSerials {
			if w == norm(s) {
				return i
			}
		}
		return -1
	}
	// A 45-second certificate can renew again before every Traefik showed the first
	// renewal (CI, 2026-12-07: the switch went from the 1st issued to the 3rd on a loaded
	// machine), so the switch need not be consecutive: it goes from an issued wildcard to
	// a later one. The count above balances renewals logged against certificates issued;
	// that one renewal is made once for the fleet (two managers on one store, one order)
	// is fleetcerts' TestPlatformWildcardRenewsOnceByDNS01AndEveryManagerRolls, on a
	// clock the test moves (issue 49), as for
	// TestFleetCertificatesRenewOnceAndEveryTraefikSwitchesWithoutAFailedHandshake.
	if i, j := at(first), at(second); i < 0 || j <= i {
		t.Fatalf("Pebble issued %v for %s; the switch went %s (#%d) → %s (#%d): want an issued wildcard to a later one", wildSerials, wild, first, i, second, j)
	}
	waitFor(t, "no TXT left in "+dns01FleetZone, 30*time.Second, func() error {
		if txt := e.bind.ZoneTXT(t, dns01FleetZone); len(txt) != 0 {
			return fmt.Errorf("TXT in the zone: %q", txt)
		}
		return nil
	})
	t.Logf("renewed %s → %s, on 3 nodes and 3 Traefiks %s after the first was everywhere; %d handshakes, none failed, per serial %v; Pebble: %d certificates (%d for %s), %d orders",
		first, second, ms(took), r.total, r.served, len(serials), len(wildSerials), wild, p.Orders())
	results.add("DNS-01: wildcards issued once for the fleet (BIND, Pebble)",
		fmt.Sprintf("- renewal of a 45 s wildcard: everywhere %s after the first was; %d handshakes on 3 Traefiks, none failed", ms(took), r.total))
}
