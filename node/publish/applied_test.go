package publish

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
)

func testProbe(ingress string) *Probe {
	return &Probe{Ingress: ingress, EntryPoint: "http://127.0.0.1:80", Node: "http://127.0.0.1:7400",
		MAC: func(ingress, revision string) (string, bool) { return strings.Repeat("ab", 16), true }}
}

// TestProbeBodiesAreCachedPerIngressAndBounded: a probe body is the plain body plus the
// probe's objects, rendered once per (revision, ingress, probe) and served from the
// cache after; a flood of made-up ingress names (one output each, not tracked: the
// ingress book refuses names past ingresses.maxTracked) never pushes out the body of a
// tracked ingress, and the cache stays bounded.
func TestProbeBodiesAreCachedPerIngressAndBounded(t *testing.T) {
	_, _, _, doc := thrashFleet(10)
	p := newPublisher(render.Options{}, "")
	p.Publish(doc, time.Now())
	s := p.cur.Load()
	// edge-a is tracked (the ingress book recorded its report); a made-up name past
	// ingresses.maxTracked is not, and its poll is served untracked.
	get := func(pr *Probe) (*Rendered, bool) {
		t.Helper()
		req := Request{Format: api.FormatTraefik, Probe: pr}
		if pr != nil && !strings.HasPrefix(pr.Ingress, "made-up-") {
			req.Ingress = pr.Ingress
		}
		r, err := p.Body(s, req)
		if err != nil {
			t.Fatal(err)
		}
		return r, r.Probed()
	}
	plain, probed := get(nil)
	if probed {
		t.Fatal("no probe, probed")
	}
	a, probed := get(testProbe("edge-a"))
	if !probed || !bytes.Contains(a.body, []byte(render.AppliedHost)) || a.revision != plain.revision || a.etag == plain.etag {
		t.Fatalf("probe body: probed %v, revision %s/%s, etag %s/%s", probed, a.revision, plain.revision, a.etag, plain.etag)
	}
	want, err := render.WithAppliedProbe(plain.body, render.AppliedProbe{Ingress: "edge-a", Revision: plain.revision,
		MAC: strings.Repeat("ab", 16), EntryPoint: "http://127.0.0.1:80", Node: "http://127.0.0.1:7400"})
	if err != nil || !bytes.Equal(want, a.body) {
		t.Fatalf("the probe body is not WithAppliedProbe of the plain body (%v)", err)
	}
	before := p.Renders()
	for range 10 {
		if r, _ := get(testProbe("edge-a")); r != a {
			t.Fatal("a second poll of the same probe got another body")
		}
	}
	if n := p.Renders() - before; n != 0 {
		t.Fatalf("10 polls of one probe body rendered %d times", n)
	}
	if b, _ := get(testProbe("edge-b")); b == a || bytes.Equal(b.body, a.body) {
		t.Fatal("two ingresses share one probe body")
	}
	// A thrasher: maxBodies+50 made-up names, each polled once, more than the cache holds
	// between two polls of edge-a (an LRU would have pushed its body out; the last 50 find
	// it full).
	for i := range maxBodies + 50 {
		get(testProbe(fmt.Sprintf("made-up-%d", i)))
	}
	before = p.Renders()
	get(testProbe("edge-a"))
	get(nil)
	if n := p.Renders() - before; n != 0 {
		t.Fatalf("after %d made-up names, edge-a's poll rendered %d bodies", maxBodies+50, n)
	}
	if n := p.cache.Len(); n > maxBodies {
		t.Fatalf("%d bodies cached, bound %d", n, maxBodies)
	}
	// No key: the plain body, not probed.
	noKey := testProbe("edge-a")
	noKey.MAC = func(string, string) (string, bool) { return "", false }
	if r, probed := get(noKey); probed || r != plain {
		t.Fatal("without a MAC key the body must be the plain one, not probed")
	}
}
