package ingress

import "github.com/scafo/ingress/node/api"

// The applied probe of an HTTP-provider Traefik (docs/design.md §11): a Traefik that
// declares one of its entry points (api.HeaderAppliedProbe) is served a body that makes
// it call the node back (api.PathIngressApplied) once it serves that body
// (render.WithAppliedProbe). The book keeps, per local ingress, the last bodies served
// with the probe and the one its callback confirmed; such an ingress's report holds the
// confirmed one, so ?wait=applied counts it only once Traefik serves the write.

// probeHistory bounds the probe bodies remembered per ingress: a callback for a body
// served before the last one (Traefik skipped nothing: its 2 s throttle may apply an
// older body a poll later) still counts, in serving order.
const probeHistory = 8

// probeMark is one body served with the probe: seq orders them (per ingress).
type probeMark struct {
	seq  uint64
	mark Mark
}

// probeState is one ingress's probe bodies served and the last one confirmed.
type probeState struct {
	seq     uint64
	marks   []probeMark // the last probeHistory, oldest first
	applied probeMark   // seq 0: none confirmed
}

// served records a body served with the probe: the same revision as the last one only
// moves its serial (the same bytes, known at a later serial).
func (p *probeState) served(m Mark) {
	if n := len(p.marks); n > 0 && p.marks[n-1].mark.Revision == m.Revision && p.marks[n-1].mark.Epoch == m.Epoch {
		last := &p.marks[n-1]
		if m.Serial > last.mark.Serial {
			last.mark.Serial = m.Serial
			if p.applied.seq == last.seq {
				p.applied.mark.Serial = m.Serial
			}
		}
		return
	}
	p.seq++
	p.marks = append(p.marks, probeMark{seq: p.seq, mark: m})
	if len(p.marks) > probeHistory {
		p.marks = p.marks[len(p.marks)-probeHistory:]
	}
}

// held is what the ingress holds by its callbacks (zero before any).
func (p *probeState) held() (uint64, string, string) {
	if p.applied.seq == 0 {
		return 0, "", ""
	}
	return p.applied.mark.Serial, p.applied.mark.Epoch, p.applied.mark.Revision
}

// AppliedResult is what a callback did.
type AppliedResult int

const (
	// AppliedRecorded: the ingress now holds the revision.
	AppliedRecorded AppliedResult = iota
	// AppliedAlready: it held it, or a body served after it, already (a repeated or
	// replayed callback).
	AppliedAlready
	// AppliedUnknown: this node did not serve that revision with the probe to that
	// ingress lately (it polls another node, or the revision is too old).
	AppliedUnknown
)

// Applied records a callback (its MAC verified by the caller): ingress serves revision.
// Only a revision this node served it with the probe counts, and only forward in the
// order they were served: a replayed callback of an older body never moves it back.
func (b *Book) Applied(name, revision string) AppliedResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	li, ok := b.local[name]
	if !ok {
		return AppliedUnknown
	}
	p := &li.probe
	for i := len(p.marks) - 1; i >= 0; i-- {
		m := p.marks[i]
		if m.mark.Revision != revision {
			continue
		}
		if m.seq <= p.applied.seq {
			return AppliedAlready
		}
		p.applied = m
		if li.rep.Kind == api.KindHTTP && li.rep.Probe {
			li.rep.Serial, li.rep.Epoch, li.rep.Revision = p.held()
			b.notifyLocked()
		}
		return AppliedRecorded
	}
	return AppliedUnknown
}
