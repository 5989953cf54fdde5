package fleetcerts

import (
	"slices"
	"strings"

	"github.com/scafo/ingress/node/api"
)

// NameStatus is Status for one name (false when the policy gives the fleet no such
// name): what a claim's owner is shown, e.g. the delegation CNAME of a custom wildcard.
func (m *Manager) NameStatus(name string) (api.CertName, bool) {
	for _, s := range m.Status() {
		if s.Name == name {
			return s, true
		}
	}
	return api.CertName{}, false
}

// Status lists every name the policy gives the fleet, sorted, with its state: the
// certificates section of /v1/status (no key material).
func (m *Manager) Status() []api.CertName {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	out := make([]api.CertName, 0, len(m.wanted))
	for n := range m.wanted {
		st := m.names[n]
		if st == nil {
			st = &nameState{}
		}
		ns := api.CertName{Name: n, LastError: st.lastErr, Attempts: st.attempts, ObtainedHere: st.obtainedHere && st.cert != nil}
		_, managed := m.managed[n]
		d, isDNS := m.dns[n]
		if isDNS {
			ns.Challenge, ns.Phase = "dns-01", st.phase
		}
		if d.delegated() {
			ns.Delegation = &api.CertDelegation{CNAME: d.owner, Target: d.target}
			if st.deleg != nil {
				t := st.deleg.checked.UTC()
				ns.Delegation.InPlace, ns.Delegation.CheckedAt = st.deleg.ok, &t
			}
		}
		switch {
		case st.cert != nil && now.Before(st.cert.notAfter):
			ns.State = StateValid
		case d.delegated() && !managed && (st.deleg == nil || !st.deleg.ok):
			ns.State = StateNeedsDelegation
		case st.mgmtFailed, !managed && now.Before(st.heldUntil):
			ns.State = StateFailed
		case !managed && now.Sub(m.since[n]) < m.settleOf(n):
			ns.State = StatePending // settling: the other nodes are learning the name
		case !managed:
			ns.State = StateBacklog
		case st.lastErr != "" && !st.obtaining:
			ns.State = StateFailed
		default:
			ns.State = StatePending
		}
		if st.cert != nil {
			na := st.cert.notAfter.UTC()
			ns.NotAfter, ns.Serial = &na, st.cert.serial
		}
		if !st.nextAttempt.IsZero() && ns.State == StateFailed {
			t := st.nextAttempt.UTC()
			ns.NextAttempt = &t
		}
		out = append(out, ns)
	}
	slices.SortFunc(out, func(a, b api.CertName) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Renewal is one certificate this node holds, unexpired, and whether its renewal is
// failing.
type Renewal struct {
	Name string
	// Failing: the last renewal of this certificate failed here (with Error), and no
	// renewal has replaced it since. CertMagic renews only inside the renewal window
	// (Options.RenewalWindow of the lifetime left), so a failing certificate is inside
	// it; Status still lists the name valid (it is, until NotAfter).
	Failing bool
	Error   string
}

// Renewals lists, sorted by name, the names holding an unexpired certificate, each
// with whether its renewal is failing (the scafo_certificate_renewal_failing gauge).
func (m *Manager) Renewals() []Renewal {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	out := []Renewal{}
	for n := range m.wanted {
		st := m.names[n]
		if st == nil || st.cert == nil || !now.Before(st.cert.notAfter) {
			continue
		}
		out = append(out, Renewal{Name: n, Failing: st.renewErr != "", Error: st.renewErr})
	}
	slices.SortFunc(out, func(a, b Renewal) int { return strings.Compare(a.Name, b.Name) })
	return out
}
