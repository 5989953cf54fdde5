package publish

import (
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
)

// TestATrackedIngressHoldsOnePlace: the fleet's bodies are the default outputs and each
// tracked ingress's latest output. One name cycling 100 selections holds one place (its
// last output, served from the cache at its next poll); the body it polled before goes
// with its spill files; an untracked poll's body never takes a fleet place.
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
	body(Request{Format: api.FormatTraefik})
	var last *Rendered
	var lastReq Request
	for _, q := range thrashSelections(100) {
		req := Request{Format: api.FormatTraefik, Prefer: q.prefer, Groups: q.groups, Ingress: "edge-x"}
		r := body(req)
		if last != nil && r != last {
			if _, err := os.Stat(last.file); last.file == "" || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the body edge-x polled before: spilled to %q, still there (%v)", last.file, err)
			}
		}
		last, lastReq = r, req
	}
	p.cache.mu.Lock()
	fleet, other := p.cache.lru.Len(), p.cache.other.Len()
	p.cache.mu.Unlock()
	if fleet > 2 {
		t.Fatalf("%d fleet bodies after one name polled 100 selections: want the default output and its last one", fleet)
	}
	before := p.Renders()
	if r := body(lastReq); r != last || p.Renders() != before {
		t.Fatal("the tracked ingress's last output was not served from the cache")
	}
	body(Request{Format: api.FormatTraefik, Groups: []string{"g1", "g2"}}) // untracked
	p.cache.mu.Lock()
	fleet2 := p.cache.lru.Len()
	p.cache.mu.Unlock()
	if fleet2 != fleet || other > maxOtherBodies {
		t.Fatalf("an untracked poll: %d fleet bodies (was %d); %d others (bound %d)", fleet2, fleet, other, maxOtherBodies)
	}
}
