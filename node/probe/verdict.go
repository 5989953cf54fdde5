package probe

import (
	"sort"
	"strconv"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/fleet"
)

// refusal is why inst is down without a probe ("" when it is probed).
func (p *Prober) refusal(app string, inst fleet.Instance, shared map[int]bool) string {
	switch {
	case inst.Port == p.apiPort:
		return "port " + strconv.Itoa(inst.Port) + " is this node's API port"
	case shared[inst.Port]:
		return "port " + strconv.Itoa(inst.Port) + " is held by more than one application"
	}
	return ""
}

func sharedPorts(insts map[string]fleet.Instance) map[int]bool {
	seen := make(map[int]int, len(insts))
	for _, i := range insts {
		seen[i.Port]++
	}
	shared := map[int]bool{}
	for port, n := range seen {
		if n > 1 {
			shared[port] = true
		}
	}
	return shared
}

// verdictLocked is the probe's verdict on app's instance inst (caller holds mu): up
// until probes say otherwise. A new port (or incarnation) is taken here when the
// record's publication sees it before a round does (stateLocked).
func (p *Prober) verdictLocked(app string, inst fleet.Instance, shared map[int]bool) bool {
	if p.refusal(app, inst, shared) != "" {
		return false
	}
	if st := p.stateLocked(app, inst, p.now()); st != nil {
		return st.up
	}
	return true // not probed yet: the declaration is trusted
}

// Publish is the instances map for this node's record: each instance's readiness is
// its declared readiness AND the probe's verdict.
func (p *Prober) Publish(insts map[string]fleet.Instance) map[string]fleet.Instance {
	if p == nil {
		return insts
	}
	shared := sharedPorts(insts)
	p.mu.Lock()
	defer p.mu.Unlock()
	for app, inst := range insts {
		if inst.Ready && !p.verdictLocked(app, inst, shared) {
			inst.Ready = false
			insts[app] = inst
		}
	}
	return insts
}

// Ready is the readiness /v1/health/instances/{app} answers for app's instance inst
// (declared ready): the prober's last verdict, without dialling anything. An anonymous
// caller hammering it costs a map lookup.
func (p *Prober) Ready(app string, inst fleet.Instance) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if why := p.refusal(app, inst, p.shared); why != "" {
		return false, why
	}
	if p.verdictLocked(app, inst, p.shared) {
		return true, ""
	}
	why := "probe failed"
	if st := p.states[app]; st != nil && st.heldLocked(p.now()) {
		why = "held down after flapping"
	} else if st != nil && st.lastErr != "" {
		why += ": " + st.lastErr
	}
	return false, why
}

// Status lists insts (this node's instances) with their probe state, sorted by app.
func (p *Prober) Status(insts map[string]fleet.Instance) []api.Instance {
	published := p.Publish(cloneInstances(insts))
	out := make([]api.Instance, 0, len(insts))
	var shared map[int]bool
	if p != nil {
		shared = sharedPorts(insts)
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	for app, inst := range insts {
		is := api.Instance{App: app, Port: inst.Port, Declared: inst.Ready, Ready: published[app].Ready}
		if p != nil {
			ps := &api.Probe{Kind: "tcp", Up: true, Refused: p.refusal(app, inst, shared)}
			if st := p.states[app]; st != nil && st.target.port == inst.Port && st.target.appID == inst.AppID {
				ps.Kind, ps.Path, ps.Up, ps.Probes = st.target.kind(), st.target.path, st.up, st.probes
				ps.ConsecutiveFailures, ps.LastError, ps.Since = st.fails, st.lastErr, st.since.UTC()
				now := p.now()
				for _, r := range st.recoveries {
					if now.Sub(r) < time.Duration(p.cfg.FlapWindow) {
						ps.Recoveries++
					}
				}
				ps.HoldDownMs = float64(st.penalty.Milliseconds())
				if st.heldLocked(now) {
					t := st.heldUntil.UTC()
					ps.HeldDownUntil = &t
				}
				if !st.last.IsZero() {
					t := st.last.UTC()
					ps.LastProbe = &t
					ps.LastDurationMs = float64(st.lastDur.Microseconds()) / 1000
				}
			}
			if ps.Refused != "" {
				ps.Up = false
			}
			is.Probe = ps
		}
		out = append(out, is)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].App < out[j].App })
	return out
}

func cloneInstances(m map[string]fleet.Instance) map[string]fleet.Instance {
	out := make(map[string]fleet.Instance, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
