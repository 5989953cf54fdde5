package publish

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// TestConcurrentPollsOfANewRevisionRenderOnce: N pollers waking on one revision change
// cost one render per (revision, prefer, format), not N.
func TestConcurrentPollsOfANewRevisionRenderOnce(t *testing.T) {
	p := newPublisher(render.Options{}, t.TempDir())
	doc, _ := fleet.Derive(fleet.GenerateState(2000, 1000), fleet.GenerateOptions())
	p.Publish(doc, time.Now())
	s := p.cur.Load()
	var wg sync.WaitGroup
	bodies := make([][]byte, 64)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Body(s, Request{Prefer: "", Format: api.FormatTraefik})
			if err != nil {
				t.Error(err)
				return
			}
			bodies[i] = r.body
		}()
	}
	wg.Wait()
	if n := p.renders.Load(); n != 1 {
		t.Fatalf("%d renders for 64 concurrent polls of one key, want 1", n)
	}
	for i := range bodies {
		if string(bodies[i]) != string(bodies[0]) || len(bodies[i]) == 0 {
			t.Fatal("pollers got different bodies")
		}
	}
}

// TestKnownGroupsTravelOnTheSnapshot: the groups a ?group= may select are the default,
// the named ones published with the document, and those with routes. A pass that names
// a new group for the same revision makes it known at once without waking long-polls;
// new certificates and a plain Publish keep the named groups.
func TestKnownGroupsTravelOnTheSnapshot(t *testing.T) {
	_, _, _, doc := thrashFleet(20) // routes in g0…g7
	p := newPublisher(render.Options{}, "")
	p.PublishNamed(doc, nil, map[string]bool{"spare": true}, time.Now())
	s := p.Current()
	known := s.KnownGroups()
	for _, g := range []string{routing.DefaultGroup, "spare", "g0", "g7"} {
		if !slices.Contains(known, g) {
			t.Fatalf("known groups %v: %s missing", known, g)
		}
	}
	if !slices.IsSorted(known) {
		t.Fatalf("known groups %v: not sorted", known)
	}
	if g := s.UnknownGroup([]string{"g1", "spare", "typo"}); g != "typo" {
		t.Fatalf("UnknownGroup = %q, want typo", g)
	}
	if p.PublishNamed(doc, nil, map[string]bool{"spare": true, "eu-9": true}, time.Now()) {
		t.Fatal("the same revision moved")
	}
	select {
	case <-s.Superseded():
		t.Fatal("a newly named group woke the long-polls")
	default:
	}
	if g := p.Current().UnknownGroup([]string{"eu-9"}); g != "" || p.Current() != s {
		t.Fatalf("a group named for the same revision: unknown %q", g)
	}
	p.PublishCerts(&render.CertSet{Fingerprint: "one", FleetCerts: &render.FleetCerts{}})
	if p.Current() == s || p.Current().UnknownGroup([]string{"eu-9", "spare"}) != "" {
		t.Fatal("new certificates lost the named groups")
	}
}
