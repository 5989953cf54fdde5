package fleetcerts

import (
	"slices"
	"strings"
	"time"
)

// NameStatus is the operator's view of one name. No key material.
type NameStatus struct {
	Name        string     `json:"name"`
	State       string     `json:"state"`
	NotAfter    *time.Time `json:"notAfter,omitempty"`
	Serial      string     `json:"serial,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	// Attempts counts this node's obtain attempts (0: another node issued it, or none
	// was needed).
	Attempts int `json:"attempts,omitempty"`
	// ObtainedHere: this node obtained the certificate it holds.
	ObtainedHere bool `json:"obtainedHere,omitempty"`
	// Challenge is "dns-01" for a name issued by DNS-01 ("" for HTTP-01), and Phase
	// where its challenge stands while one is in progress (the TXT record written,
	// waiting for it to propagate, with the bound).
	Challenge string `json:"challenge,omitempty"`
	Phase     string `json:"phase,omitempty"`
	// Delegation is a custom wildcard's delegation: the CNAME its customer creates and
	// whether it is in place.
	Delegation *Delegation `json:"delegation,omitempty"`
}

// NameStatus is Status for one name (false when the policy gives the fleet no such
// name): what a claim's owner is shown, e.g. the delegation CNAME of a custom wildcard.
func (m *Manager) NameStatus(name string) (NameStatus, bool) {
	for _, s := range m.Status() {
		if s.Name == name {
			return s, true
		}
	}
	return NameStatus{}, false
}

// Status lists every name the policy gives the fleet, sorted, with its state.
func (m *Manager) Status() []NameStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	out := make([]NameStatus, 0, len(m.wanted))
	for n := range m.wanted {
		st := m.names[n]
		if st == nil {
			st = &nameState{}
		}
		ns := NameStatus{Name: n, LastError: st.lastErr, Attempts: st.attempts, ObtainedHere: st.obtainedHere && st.cert != nil}
		_, managed := m.managed[n]
		d, isDNS := m.dns[n]
		if isDNS {
			ns.Challenge, ns.Phase = "dns-01", st.phase
		}
		if d.delegated() {
			ns.Delegation = &Delegation{CNAME: d.owner, Target: d.target}
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
	slices.SortFunc(out, func(a, b NameStatus) int { return strings.Compare(a.Name, b.Name) })
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
	now := time.Now()
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
