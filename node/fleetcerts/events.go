package fleetcerts

import (
	"context"
	"time"
)

// retryIntervals are the first steps of CertMagic's own obtain backoff (async.go,
// retryIntervals), to tell an operator when the next attempt is due; the last is
// repeated.
var retryIntervals = []time.Duration{time.Minute, 2 * time.Minute, 2 * time.Minute, 5 * time.Minute,
	10 * time.Minute, 10 * time.Minute, 10 * time.Minute, 20 * time.Minute}

// mgmtRetry is how long after a management failure (mgmtErrs) a name is managed again.
func (m *Manager) mgmtRetry() time.Duration { return 20 * m.opt.Poll }

// noteError records a CertMagic error entry that names a subject.
func (m *Manager) noteError(msg string, fields map[string]any) {
	name, _ := fields["subject"].(string)
	if name == "" {
		return
	}
	detail := msg
	if e, ok := fields["error"].(string); ok {
		detail += ": " + e
	}
	m.mgmtMu.Lock()
	if m.mgmtErrs == nil {
		m.mgmtErrs = map[string]string{}
	}
	m.mgmtErrs[name] = detail
	m.mgmtMu.Unlock()
}

// takeMgmtErrs applies the recorded management failures (m.mu held): the name is no
// longer managed, shows failed with the error, and is managed again at nextAttempt.
func (m *Manager) takeMgmtErrs(now time.Time) {
	m.mgmtMu.Lock()
	errs := m.mgmtErrs
	m.mgmtErrs = nil
	m.mgmtMu.Unlock()
	for name, detail := range errs {
		st := m.names[name]
		if st == nil || st.cert != nil {
			continue
		}
		if cancel, ok := m.managed[name]; ok {
			cancel()
			delete(m.managed, name)
		}
		st.mgmtFailed, st.lastErr, st.nextAttempt = true, detail, now.Add(m.mgmtRetry())
	}
}

// onEvent records CertMagic's issuance events per name.
func (m *Manager) onEvent(ctx context.Context, event string, data map[string]any) error {
	name, _ := data["identifier"].(string)
	if name == "" {
		return nil
	}
	if event == "cert_obtaining" {
		// A delegated name is ordered (or renewed) only with its CNAME in place.
		if err := m.gateDelegation(ctx, name); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.names[name]
	if st == nil {
		return nil
	}
	switch event {
	case "cert_obtaining":
		st.obtaining = true
		st.attempts++
		st.runAttempts++
		if st.runAttempts > 1 && st.cert == nil && !m.api[name] {
			// A retry is one more order on the shared account: it counts against the
			// budget (it is not refused: CertMagic retries on its own), so the names
			// taken on next wait for it.
			if m.platform[name] {
				m.admitted = append(m.admitted, m.now())
			} else {
				m.customAdmitted = append(m.customAdmitted, m.now())
			}
		}
	case "cert_failed":
		st.obtaining = false
		st.fails++
		if err, ok := data["error"].(error); ok {
			st.lastErr = err.Error()
		} else {
			st.lastErr = "failed"
		}
		if renewal, _ := data["renewal"].(bool); renewal && st.cert != nil {
			st.renewErr = st.lastErr
		}
		now := m.now()
		st.nextAttempt = now.Add(retryIntervals[min(st.fails, len(retryIntervals))-1])
		if st.fails >= m.opt.FailLimit && st.cert == nil {
			// Held off: CertMagic's own backoff would order again within minutes (about
			// eight orders in the first hour), each one against the fleet's shared ACME
			// account. Cancelling the context ends CertMagic's retry loop.
			if cancel, ok := m.managed[name]; ok {
				cancel()
				delete(m.managed, name)
			}
			hold := m.opt.FailHold
			for i := 0; i < st.holds && hold < m.opt.FailHoldMax; i++ {
				hold *= 2
			}
			hold = min(hold, m.opt.FailHoldMax)
			st.holds++
			st.heldUntil = now.Add(hold)
			st.nextAttempt = st.heldUntil
		}
		m.log.Warn("fleet certificate: obtaining failed", "name", name, "attempt", st.attempts, "err", st.lastErr, "nextAttempt", st.nextAttempt)
	case "cert_obtained":
		st.obtaining = false
		st.obtainedHere = true
		st.lastErr, st.fails, st.nextAttempt = "", 0, time.Time{}
		st.heldUntil, st.holds = time.Time{}, 0
		st.renewErr = ""
		renewal, _ := data["renewal"].(bool)
		m.log.Info("fleet certificate obtained", "name", name, "renewal", renewal)
	}
	return nil
}
