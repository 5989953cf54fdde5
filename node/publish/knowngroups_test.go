package publish

import (
	"slices"
	"testing"
	"time"

	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/routing"
)

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
