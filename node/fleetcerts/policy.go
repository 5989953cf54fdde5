package fleetcerts

import (
	"slices"
	"strings"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// Names returns the names the policy gives the fleet, from doc: every non-wildcard
// route host and API host, less platform hosts when platformWildcard, and never the host
// of a passthrough route (its application holds its own certificate; docs/design.md
// §10). isPlatform tells the paced ones.
func Names(doc *routing.Document, platformDomains []string, platformWildcard bool) (names []string, isPlatform map[string]bool) {
	isPlatform = map[string]bool{}
	seen := map[string]bool{}
	add := func(h string, platform bool) {
		if seen[h] || routing.IsWildcard(h) {
			return
		}
		seen[h] = true
		if platform {
			if platformWildcard {
				return
			}
			isPlatform[h] = true
		}
		names = append(names, h)
	}
	if doc == nil {
		return nil, isPlatform
	}
	for _, r := range doc.Routes {
		if r.Passthrough {
			continue
		}
		_, under := fleet.PlatformOwner(r.Host, platformDomains)
		add(r.Host, under)
	}
	if doc.API != nil {
		for _, h := range doc.API.Hosts {
			add(h, false)
		}
	}
	slices.Sort(names)
	return names, isPlatform
}

// namePolicy is what Sync derives from a document: the names the fleet issues (sorted),
// which are paced platform hosts, API hosts, and issued by DNS-01, and the platform
// hosts a platform wildcard covers.
type namePolicy struct {
	names    []string
	platform map[string]bool
	api      map[string]bool
	dns      map[string]dnsName
	covered  map[string]bool
}

// policy is Names with DNS-01 (dns01.go): with DNS01.Platform, a platform host one
// label under a platform domain is covered by that domain's wildcard (ordered once, on
// the platform budget) and the platform apex is issued by DNS-01; with a delegation
// zone, a custom wildcard is issued by delegation (on the custom budget). Without
// DNS01 it is exactly Names.
func (m *Manager) policy(doc *routing.Document) namePolicy {
	p := namePolicy{platform: map[string]bool{}, api: map[string]bool{}, dns: map[string]dnsName{}, covered: map[string]bool{}}
	if doc == nil {
		return p
	}
	d := m.opt.DNS01
	platformDNS := d != nil && d.Platform
	isPD := func(h string) bool { return slices.Contains(m.opt.PlatformDomains, h) }
	seen := map[string]bool{}
	add := func(n string, platform bool) {
		if seen[n] {
			return
		}
		seen[n] = true
		p.names = append(p.names, n)
		if platform {
			p.platform[n] = true
		}
	}
	for _, r := range doc.Routes {
		h := r.Host
		if r.Passthrough {
			continue // the application's own certificate; a platform wildcard ordered for it alone would be waste
		}
		if routing.IsWildcard(h) {
			switch {
			case d == nil:
			case platformDNS && isPD(strings.TrimPrefix(h, "*.")):
				p.dns[h] = dnsName{owner: ChallengeCNAME(h)}
				add(h, true)
			case d.DelegationZone != "":
				p.dns[h] = dnsName{owner: ChallengeCNAME(h), target: DelegationTarget(d.DelegationZone, r.Application, h)}
				add(h, false)
			}
			continue
		}
		if _, under := fleet.PlatformOwner(h, m.opt.PlatformDomains); under {
			if m.opt.PlatformWildcard {
				continue // Traefik's resolver issues the platform wildcard
			}
			if _, parent, _ := strings.Cut(h, "."); platformDNS && isPD(parent) {
				w := "*." + parent
				p.covered[h] = true
				p.dns[w] = dnsName{owner: ChallengeCNAME(w)}
				add(w, true)
				continue
			}
			add(h, true)
			continue
		}
		if platformDNS && isPD(h) {
			p.dns[h] = dnsName{owner: ChallengeCNAME(h)}
		}
		add(h, false)
	}
	if doc.API != nil {
		for _, h := range doc.API.Hosts {
			p.api[h] = true
			if platformDNS && isPD(h) {
				p.dns[h] = dnsName{owner: ChallengeCNAME(h)}
			}
			add(h, false)
		}
	}
	slices.Sort(p.names)
	return p
}

// Sync sets the names from a published document.
func (m *Manager) Sync(doc *routing.Document) {
	pol := m.policy(doc)
	wanted := make(map[string]bool, len(pol.names))
	for _, n := range pol.names {
		wanted[n] = true
	}
	platform, api := pol.platform, pol.api
	m.mu.Lock()
	for n, d := range m.dns {
		if pol.dns[n] != d {
			if st := m.names[n]; st != nil {
				st.deleg = nil // another claim of the name: checked anew
			}
		}
	}
	if !sameKeys(m.covered, pol.covered) {
		m.bridgeDue = true
	}
	coveredSame := sameKeys(m.covered, pol.covered) && len(m.dns) == len(pol.dns)
	for n, d := range pol.dns {
		if m.dns[n] != d {
			coveredSame = false
		}
	}
	m.dns, m.covered = pol.dns, pol.covered
	now := m.now()
	for n := range wanted {
		if _, ok := m.since[n]; !ok {
			m.since[n] = now
		}
	}
	for n := range m.since {
		if !wanted[n] {
			delete(m.since, n)
		}
	}
	same := len(wanted) == len(m.wanted) && coveredSame
	for n := range wanted {
		if !m.wanted[n] {
			same = false
			break
		}
	}
	m.wanted, m.platform, m.api = wanted, platform, api
	m.mu.Unlock()
	if !same {
		m.reconcile()
	}
}
