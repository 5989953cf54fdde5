package publish

import (
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
)

// TestATrackedIngressHoldsOnePlace: the fleet's bodies are the default outputs and each
// tracked ingress's latest output. One name cycling 100 selections holds one fleet
// place (its last output, served from the cache at its next poll); what it polled
// before becomes another output's body, kept in the room left and never spilled; an
// untracked poll never takes a fleet place, and a fleet body takes an other's room.
func TestATrackedIngressHoldsOnePlace(t *testing.T) {
	_, _, _, doc := thrashFleet(10)
	p := newPublisher(render.Options{}, t.TempDir())
	p.Publish(doc, time.Now())
	s := p.cur.Load()
	body := func(req Request) *Rendered {
		t.Helper()
		r, err := p.Body(s, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	lens := func() (fleet, other int) {
		p.cache.mu.Lock()
		defer p.cache.mu.Unlock()
		return p.cache.lru.Len(), p.cache.other.Len()
	}
	body(Request{Format: api.FormatTraefik})
	var last *Rendered
	var lastReq Request
	for i, q := range thrashSelections(100) {
		req := Request{Format: api.FormatTraefik, Prefer: q.prefer, Groups: q.groups, Ingress: "edge-x"}
		last, lastReq = body(req), req
		if fleet, other := lens(); fleet > 2 || other != i {
			t.Fatalf("after %d selections of one name: %d fleet bodies (want the default output and its last), %d others", i+1, fleet, other)
		}
		if last.file == "" {
			t.Fatal("the tracked ingress's body was not spilled")
		}
	}
	before := p.Renders()
	if r := body(lastReq); r != last || p.Renders() != before {
		t.Fatal("the tracked ingress's last output was not served from the cache")
	}
	fleet, other := lens()
	if r := body(Request{Format: api.FormatRoutes, Groups: []string{"g1", "g2", "g3"}}); r.file != "" { // untracked
		t.Fatal("an untracked output's body was spilled")
	}
	if f, o := lens(); f != fleet || o != other+1 {
		t.Fatalf("an untracked poll: %d fleet bodies (was %d), %d others (was %d)", f, fleet, o, other)
	}
	// The room fills with others; then a new fleet output takes an other's place.
	for _, q := range thrashSelections(300) {
		body(Request{Format: api.FormatRoutes, Prefer: q.prefer, Groups: q.groups})
	}
	if f, o := lens(); f != fleet || f+o != maxBodies {
		t.Fatalf("after 300 untracked outputs: %d fleet bodies (was %d), %d others: want the room full", f, fleet, o)
	}
	before = p.Renders()
	z := Request{Format: api.FormatRoutes, Groups: []string{"g0"}, Ingress: "edge-z"}
	if r := body(z); r != body(z) || p.Renders() > before+1 {
		t.Fatal("a new fleet output was not kept in a full cache")
	}
	if f, o := lens(); f != fleet+1 || f+o != maxBodies {
		t.Fatalf("a new fleet output in a full cache: %d fleet bodies (want %d), %d others", f, fleet+1, o)
	}
}
