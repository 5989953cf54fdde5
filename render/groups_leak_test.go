package render

import (
	"bytes"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// Issue 25 item 10: a cross-group target's own path map never reaches the group that
// targets it, even when that map points back at a host the group carries (so a leak
// would keep the group's document valid: nothing but this test would see it). eu-1's
// front.example.org maps "m" to us-1's mid.example.org, whose own map points at
// eu-1's side.example.org; eu-1 carries mid without its map, and editing mid's map
// leaves eu-1's revision and bytes alone.
func TestGroupNeverCarriesACrossGroupTargetsOwnPathMap(t *testing.T) {
	inst := map[string]fleet.Instance{"front": {Port: 1000, Ready: true}, "mid": {Port: 1001, Ready: true}, "side": {Port: 1002, Ready: true}}
	eu, us := &fleet.Ingress{Group: "eu-1"}, &fleet.Ingress{Group: "us-1"}
	st := fleet.State{
		Apps: []fleet.App{
			{Name: "front", Account: "acme", Placement: []string{"n1"}, Ingress: eu},
			{Name: "side", Account: "acme", Placement: []string{"n1"}, Ingress: eu},
			{Name: "mid", Account: "acme", Placement: []string{"n1"}, Ingress: us},
		},
		Claims: []fleet.Claim{
			{Host: "front.example.org", Account: "acme", App: "front", Paths: map[string]string{"m": "mid.example.org"}},
			{Host: "side.example.org", Account: "acme", App: "side"},
			{Host: "mid.example.org", Account: "acme", App: "mid", Paths: map[string]string{"s": "side.example.org"}},
		},
		Nodes: []fleet.NodeRecord{{Name: "n1", Address: "10.0.0.1", APIPort: 7400, Instances: inst}},
	}
	opt := fleet.Options{PlatformDomains: []string{"eu1.example.com", "us1.example.com"},
		DomainGroups: map[string]string{"eu1.example.com": "eu-1", "us1.example.com": "us-1"}}
	groups := []string{"eu-1"}
	render := func() (*routing.Document, []byte) {
		t.Helper()
		doc, _ := fleet.Derive(st, opt)
		// The whole document routes mid's map: the map is real, only eu-1 must not see it.
		for _, r := range doc.Routes {
			if r.Host == "mid.example.org" && len(r.Paths) == 0 {
				t.Fatalf("mid.example.org has no path map in the whole document: the test proves nothing")
			}
		}
		gd := routing.ForGroups(doc, groups)
		if err := gd.Validate(); err != nil {
			t.Fatalf("eu-1's document is invalid: %v", err)
		}
		b, err := TraefikGroups(gd, Options{}, groups, nil)
		if err != nil {
			t.Fatal(err)
		}
		return gd, b
	}
	gd1, b1 := render()
	for _, r := range gd1.Routes {
		if r.Host == "mid.example.org" && r.Paths != nil {
			t.Fatalf("eu-1 carries mid.example.org with its path map %v (us-1's business)", r.Paths)
		}
	}
	if bytes.Contains(b1, []byte("PathPrefix(`/s`)")) || bytes.Contains(b1, []byte("/s/")) {
		t.Errorf("eu-1's configuration holds a router for mid's prefix s:\n%s", b1)
	}
	st.Claims[2].Paths = map[string]string{"t": "side.example.org"}
	gd2, b2 := render()
	if gd2.Revision != gd1.Revision || !bytes.Equal(b1, b2) {
		t.Error("a change to us-1's mid.example.org path map moved eu-1's revision or bytes")
	}
}
