package publish

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/scafo/ingress/node/api"
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

// GetApplied is GetGroupsFrom for the Traefik format with probe's objects added (probe
// nil: GetGroupsFrom). The body is a function of the selection's body and (ingress, revision,
// mac, entry point, node) alone, cached like any other under its own output, so one
// ingress's probe body is rendered once per revision and a made-up ingress name is
// one more output, admitted by how often it is polled (bodyCache). probed says whether
// the body carries the probe.
func (p *Publisher) GetApplied(s *Snapshot, source, prefer, format string, groups []string, probe *Probe) (r *Rendered, probed bool, err error) {
	base, err := p.GetGroupsFrom(s, source, prefer, format, groups)
	if err != nil || probe == nil || format != api.FormatTraefik {
		return base, false, err
	}
	mac, ok := probe.MAC(probe.Ingress, base.revision)
	if !ok {
		return base, false, nil
	}
	ap := render.AppliedProbe{Ingress: probe.Ingress, Revision: base.revision, MAC: mac, EntryPoint: probe.EntryPoint, Node: probe.Node}
	k := renderKey{revision: base.revision, prefer: prefer, format: format, groups: strings.Join(groups, ","),
		// The base body's identity (its certificates included) and every input of the probe's objects.
		probe: strings.Join([]string{base.etag, ap.Ingress, ap.MAC, ap.EntryPoint, ap.Node}, "\x00")}
	p.count(source, outputOf(k))
	if r, ok := p.cache.Get(k); ok {
		return r, true, nil
	}
	p.mu.Lock()
	if c, ok := p.inflight[k]; ok {
		p.mu.Unlock()
		<-c.done
		return c.r, c.err == nil, c.err
	}
	c := &renderCall{done: make(chan struct{})}
	p.inflight[k] = c
	p.mu.Unlock()
	c.r, c.err = p.renderApplied(base, ap, p.cache.Admits(k))
	if c.err == nil {
		p.cache.Add(k, c.r, s.seq)
	}
	p.mu.Lock()
	delete(p.inflight, k)
	p.mu.Unlock()
	close(c.done)
	if c.err != nil {
		return nil, false, c.err
	}
	return c.r, true, nil
}

// renderApplied is base with the probe's objects, gzipped, hashed (and spilled).
func (p *Publisher) renderApplied(base *Rendered, ap render.AppliedProbe, spill bool) (*Rendered, error) {
	p.renders.Add(1)
	body, err := render.WithAppliedProbe(base.body, ap)
	if err != nil {
		return nil, fmt.Errorf("adding the applied probe: %w", err)
	}
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
	zw.Write(body)
	zw.Close()
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:16])
	r := &Rendered{body: body, gz: zb.Bytes(), etag: `"` + h + `"`, etagGzip: `"` + h + `-gzip"`, revision: base.revision}
	if spill {
		r.file, r.gzFile = p.spill(r.body), p.spill(r.gz)
	}
	return r, nil
}
