package fleetcerts

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"
)

// reconcile starts managing the admitted names, stops the departed ones, and refreshes
// the Set.
func (m *Manager) reconcile() {
	m.mu.Lock()
	if !m.started {
		m.mu.Unlock()
		return
	}
	now := m.now()
	var start []string
	var gone []certmagic.SubjectIssuer
	for n, cancel := range m.managed {
		if !m.wanted[n] {
			cancel()
			delete(m.managed, n)
			delete(m.names, n)
			gone = append(gone, certmagic.SubjectIssuer{Subject: n})
		}
	}
	for n := range m.names {
		if !m.wanted[n] {
			delete(m.names, n)
		}
	}
	m.settling = false
	m.takeMgmtErrs(now)
	// Budgets: platform hosts and custom domains taken on in the last hour.
	m.admitted = slices.DeleteFunc(m.admitted, func(t time.Time) bool { return now.Sub(t) >= time.Hour })
	m.customAdmitted = slices.DeleteFunc(m.customAdmitted, func(t time.Time) bool { return now.Sub(t) >= time.Hour })
	wanted := make([]string, 0, len(m.wanted))
	for n := range m.wanted {
		wanted = append(wanted, n)
	}
	// Names never held off first, then by fewer hold-offs, then by name: names that keep
	// failing (a DNS pointing elsewhere) must not take the budget first each time their
	// hold-off ends, ahead of every other account's new names.
	slices.SortFunc(wanted, func(a, b string) int {
		return cmp.Or(cmp.Compare(m.holdsOf(a), m.holdsOf(b)), strings.Compare(a, b))
	})
	for _, n := range wanted {
		if _, ok := m.managed[n]; ok {
			continue
		}
		if now.Sub(m.since[n]) < m.settleOf(n) {
			m.settling = true // the poll loop comes back for it
			continue
		}
		st := m.names[n]
		if st == nil {
			st = &nameState{}
			m.names[n] = st
		}
		if st.mgmtFailed {
			if now.Before(st.nextAttempt) {
				continue
			}
			st.mgmtFailed = false
		}
		if now.Before(st.heldUntil) {
			continue // held off after failing; the poll loop loads it if another node issued it
		}
		if d := m.dns[n]; d.delegated() && st.cert == nil && (st.deleg == nil || !st.deleg.ok) {
			continue // no order without the delegation (checkDelegations looks again)
		}
		switch {
		case st.cert != nil || m.api[n]:
			// Held already, or the API apex: never paced.
		case m.platform[n]:
			if len(m.admitted) >= m.opt.PlatformBudget {
				continue // backlog; the poll loop loads it if another node issued it
			}
			m.admitted = append(m.admitted, now)
		default:
			if len(m.customAdmitted) >= m.opt.CustomBudget {
				continue // backlog, as above
			}
			m.customAdmitted = append(m.customAdmitted, now)
		}
		start = append(start, n)
	}
	for _, n := range start {
		ctx, cancel := context.WithCancel(context.Background())
		m.managed[n] = cancel
		m.names[n].runAttempts = 0
		// ManageAsync loads the certificate from the store, or obtains it under the
		// store lock (retrying with CertMagic's backoff until ctx is cancelled).
		if err := m.cfgFor(n).ManageAsync(ctx, []string{n}); err != nil {
			m.names[n].lastErr = err.Error()
		}
	}
	m.mu.Unlock()
	if len(gone) > 0 {
		m.cache.RemoveManaged(gone)
	}
	m.refresh()
}

// settleOf is how long name waits in the document before it is ordered: Settle for
// HTTP-01 (every node must answer its challenge), nothing for DNS-01 (the CA asks the
// DNS, not the nodes).
func (m *Manager) settleOf(name string) time.Duration {
	if _, ok := m.dns[name]; ok {
		return 0
	}
	return m.opt.Settle
}

// holdsOf is how many hold-offs in a row name has had (caller holds mu).
func (m *Manager) holdsOf(name string) int {
	if st := m.names[name]; st != nil {
		return st.holds
	}
	return 0
}

// backlogBatch is the most backlogged names loadBacklog looks up in one pass.
const backlogBatch = 50

// loadBacklog loads, for names this node does not manage yet, a certificate another
// node put in the store (one store read per such name, at most backlogBatch names per
// pass, every 20 polls).
func (m *Manager) loadBacklog() {
	m.mu.Lock()
	var missing []string
	for n := range m.wanted {
		if _, ok := m.managed[n]; !ok {
			missing = append(missing, n)
		}
	}
	// At most backlogBatch names per pass, in turn: a large backlog costs a bounded
	// number of store reads per pass, not one per name.
	slices.Sort(missing)
	if len(missing) > backlogBatch {
		start := m.backlogCursor % len(missing)
		missing = append(missing[start:], missing[:start]...)[:backlogBatch]
		m.backlogCursor = start + backlogBatch
	}
	m.mu.Unlock()
	for _, n := range missing {
		if _, err := m.cfgFor(n).CacheManagedCertificate(context.Background(), n); err == nil {
			m.mu.Lock()
			if m.wanted[n] {
				if _, ok := m.managed[n]; !ok {
					// CertMagic's maintenance renews it from now on.
					m.managed[n] = func() {}
				}
			}
			m.mu.Unlock()
		}
	}
}

// loadBridges loads from the store (never orders) the own certificates of covered
// hosts whose wildcard is not held yet, at most backlogBatch per pass: a fleet that
// turns DNS-01 on keeps serving the certificates HTTP-01 issued until the wildcard
// arrives.
func (m *Manager) loadBridges() {
	m.mu.Lock()
	var load []string
	for h := range m.covered {
		_, parent, _ := strings.Cut(h, ".")
		if w := m.names["*."+parent]; (w == nil || w.cert == nil) && m.bridge[h] == nil && len(load) < backlogBatch {
			load = append(load, h)
		}
	}
	m.mu.Unlock()
	for _, h := range load {
		m.cfg.CacheManagedCertificate(context.Background(), h) // absent: nothing to bridge
	}
	if len(load) > 0 {
		m.refresh()
	}
}
