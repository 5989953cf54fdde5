package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/scafo/ingress/render"
)

// Probe is an HTTP-provider Traefik's applied probe (render.WithAppliedProbe): its
// ingress name, its entry point's base URL, and the node's base URL as that Traefik
// reaches it; MAC signs the callback of a revision (ok false: no key, the body is
// served without the probe).
type Probe struct {
	Ingress, EntryPoint, Node string
	MAC                       func(ingress, revision string) (mac string, ok bool)
}

// applied is base with req.Probe's objects added (Body). The body is a function of
// the selection's body and (ingress, revision, mac, entry point, node) alone, cached
// under its own output, so one ingress's probe body is rendered once per revision and
// kept while that ingress is tracked (bodyCache). Without a MAC key base is served.
func (p *Publisher) applied(s *Snapshot, base *Rendered, req Request) (*Rendered, error) {
	probe := req.Probe
	mac, ok := probe.MAC(probe.Ingress, base.revision)
	if !ok {
		return base, nil
	}
	ap := render.AppliedProbe{Ingress: probe.Ingress, Revision: base.revision, MAC: mac, EntryPoint: probe.EntryPoint, Node: probe.Node}
	k := probeKey(req)
	k.revision, k.base = base.revision, base.etag+"\x00"+ap.MAC // the base body's identity (its certificates included)
	return p.once(s, k, func(spill bool) (*Rendered, error) { return p.renderApplied(base, ap, spill) })
}

// probeKey is the render key of req's probe body without what a revision changes:
// its output.
func probeKey(req Request) renderKey {
	pr := req.Probe
	return renderKey{prefer: req.Prefer, format: req.Format, groups: strings.Join(req.Groups, ","),
		probe: strings.Join([]string{pr.Ingress, pr.EntryPoint, pr.Node}, "\x00")}
}

// renderApplied is base with the probe's objects, hashed (and spilled; gzipped when
// first asked: lazyGzip).
func (p *Publisher) renderApplied(base *Rendered, ap render.AppliedProbe, spill bool) (*Rendered, error) {
	p.renders.Add(1)
	body, err := render.WithAppliedProbe(base.body, ap)
	if err != nil {
		return nil, fmt.Errorf("adding the applied probe: %w", err)
	}
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:16])
	r := &Rendered{body: body, etag: `"` + h + `"`, etagGzip: `"` + h + `-gzip"`, revision: base.revision, probed: true}
	if spill {
		r.file, r.spillGz = p.spill(r.body), p.spill
	}
	return r, nil
}
