package publish

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// TestPublisherFleetCertsPerGroup: with fleet certificates the Publisher serves, for
// every group selection, the full render's bytes (render.TraefikGroups with the set);
// a certificate issued for a name of eu-1 changes eu-1's configuration and leaves the
// default group's bytes, ETag and cache entry alone (its key holds the fingerprint of
// its own names' certificates: nothing is re-rendered for it); the snapshot a
// certificate change swaps in keeps the document's group counts.
func TestPublisherFleetCertsPerGroup(t *testing.T) {
	opts := render.Options{}
	p := newPublisher(opts, t.TempDir())
	eu := &fleet.Ingress{Group: "eu-1"}
	st := fleet.State{
		Apps: []fleet.App{
			{Name: "shop", Account: "acme", Placement: []string{"vps-b"}},
			{Name: "blog", Account: "acme", Placement: []string{"vps-b"}, Ingress: eu},
		},
		Nodes: []fleet.NodeRecord{{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400,
			Instances: map[string]fleet.Instance{"shop": {Port: 24001, Ready: true}, "blog": {Port: 24002, Ready: true}}}},
	}
	fo := fleet.Options{PlatformDomains: []string{"apps.example.com", "eu1.example.com"}, APIPublic: true,
		DomainGroups: map[string]string{"eu1.example.com": "eu-1"}}
	doc, _ := fleet.Derive(st, fo)
	if doc.API == nil || !slices.Contains(doc.API.Hosts, "apps.example.com") {
		t.Fatalf("no API apex apps.example.com: %+v", doc.API)
	}
	p.Publish(doc, time.Now())
	groupRoutes := p.cur.Load().groupRoutes
	if groupRoutes["eu-1"] == 0 || groupRoutes["default"] == 0 {
		t.Fatalf("group counts %v", groupRoutes)
	}

	cert := func(name string) render.Certificate {
		return render.Certificate{Names: []string{name}, CertFile: "CERT " + name, KeyFile: "KEY " + name}
	}
	fc1 := &render.FleetCerts{Managed: map[string]bool{"apps.example.com": true, "shop.apps.example.com": true, "blog.eu1.example.com": true},
		Certificates: []render.Certificate{cert("apps.example.com"), cert("shop.apps.example.com")}}
	fc2 := &render.FleetCerts{Managed: fc1.Managed,
		Certificates: append(slices.Clone(fc1.Certificates), cert("blog.eu1.example.com"))}

	serve := func(set *render.CertSet) map[string]*Rendered {
		t.Helper()
		p.PublishCerts(set)
		s := p.cur.Load()
		if s.certs != set || !maps.Equal(s.groupRoutes, groupRoutes) {
			t.Fatalf("the certificate snapshot: certs %v, group counts %v (want %v)", s.certs, s.groupRoutes, groupRoutes)
		}
		out := map[string]*Rendered{}
		for _, sel := range [][]string{nil, {"default"}, {"eu-1"}} {
			got, err := p.Body(s, Request{Prefer: "", Format: api.FormatTraefik, Groups: sel})
			if err != nil {
				t.Fatal(err)
			}
			want, err := render.TraefikFleet(doc, opts, set.FleetCerts)
			if sel != nil {
				want, err = render.TraefikGroups(routing.ForGroups(doc, sel), opts, sel, set.FleetCerts)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.body, want) {
				t.Fatalf("selection %v: served bytes differ from the full render\nserved: %s\nfull:   %s", sel, got.body, want)
			}
			out[strings.Join(sel, ",")] = got
		}
		return out
	}
	before := serve(&render.CertSet{Fingerprint: "one", FleetCerts: fc1})
	for sel, r := range before {
		if !bytes.Contains(r.body, []byte("CERT apps.example.com")) {
			t.Errorf("selection %q lacks the API apex's certificate", sel)
		}
	}
	if bytes.Contains(before["eu-1"].body, []byte("CERT shop.apps.example.com")) {
		t.Error("eu-1 carries the certificate of shop.apps.example.com, a name of group default")
	}
	renders := p.renders.Load()
	after := serve(&render.CertSet{Fingerprint: "two", FleetCerts: fc2})
	if r := after["eu-1"]; !bytes.Contains(r.body, []byte("CERT blog.eu1.example.com")) || r.etag == before["eu-1"].etag {
		t.Errorf("eu-1 does not carry blog's new certificate: %s", r.body)
	}
	if after["default"] != before["default"] {
		t.Error("the default group was rendered again for a certificate of eu-1")
	}
	if bytes.Contains(after["default"].body, []byte("CERT blog.eu1.example.com")) {
		t.Error("the default group carries blog's certificate (eu-1)")
	}
	if n := p.renders.Load() - renders; n != 2 {
		t.Errorf("%d renders for a certificate of eu-1, want 2 (every group, and eu-1)", n)
	}
}

// TestAPatchedSnapshotCountsNodesAndGroupsLikeAWholeOne: the node names a ?prefer= may
// name (those with an upstream) and the routes of each group are counted from the last
// snapshot for a patched document; they must be what counting the whole document gives,
// also when a node loses its last upstream or gains its first.
func TestAPatchedSnapshotCountsNodesAndGroupsLikeAWholeOne(t *testing.T) {
	p := newPublisher(render.Options{}, "")
	st := fleet.State{
		Apps: []fleet.App{
			{Name: "blog", Account: "acme", Placement: []string{"vps-a"}},
			{Name: "shop", Account: "acme", Placement: []string{"vps-b", "vps-a"}, Ingress: &fleet.Ingress{Group: "eu-1"}},
		},
		Nodes: []fleet.NodeRecord{
			{Name: "vps-a", Address: "10.83.0.1", APIPort: 7400, Instances: map[string]fleet.Instance{"blog": {Port: 24001, Ready: true}, "shop": {Port: 24002, Ready: true}}},
			{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400, Instances: map[string]fleet.Instance{"shop": {Port: 24003, Ready: true}}},
		},
	}
	opt := fleet.Options{PlatformDomains: []string{"apps.example.com", "eu1.example.com"}, DomainGroups: map[string]string{"eu1.example.com": "eu-1"}}
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, opt, nil)
	p.Publish(doc, time.Now())
	for step, placement := range [][]string{{"vps-a"}, {"vps-a", "vps-b"}, {"vps-b"}, {"vps-b", "vps-a"}} {
		st.Apps = slices.Clone(st.Apps)
		st.Apps[1].Placement = placement
		doc, _, delta := x.Derive(st, opt, []string{fleet.AppKey("shop")})
		if delta == nil {
			t.Fatalf("step %d: the placement change was not patched", step)
		}
		p.PublishDelta(doc, delta, time.Now())
		s := p.cur.Load()
		if s.delta == nil {
			t.Fatalf("step %d: the snapshot is not a patch", step)
		}
		want := map[string]int{}
		for _, r := range doc.Routes {
			for _, u := range r.Upstreams {
				want[u.Node]++
			}
		}
		_, groups := doc.Groups()
		if !maps.Equal(s.ups, want) || !maps.Equal(s.groupRoutes, groups) {
			t.Fatalf("step %d: upstreams per node %v, groups %v; counting the whole document gives %v and %v", step, s.ups, s.groupRoutes, want, groups)
		}
	}
}

// TestALateSelectionOfAnOlderSnapshotKeepsTheLineage: a request still holding an older
// snapshot (a long-poll that woke late) makes its selection after a newer snapshot made
// the same one; the newer one stays what the next change is patched from.
func TestALateSelectionOfAnOlderSnapshotKeepsTheLineage(t *testing.T) {
	p := newPublisher(render.Options{}, "")
	st, opt := fleet.GenerateState(50, 5), fleet.GenerateOptions()
	sel := []string{routing.DefaultGroup}
	var x fleet.Deriver
	move := func(port int) (*routing.Document, *routing.Delta) {
		st.Nodes = slices.Clone(st.Nodes)
		st.Nodes[1].Instances = maps.Clone(st.Nodes[1].Instances)
		st.Nodes[1].Instances[st.Apps[4].Name] = fleet.Instance{Port: port, Ready: true}
		doc, _, delta := x.Derive(st, opt, []string{fleet.NodeKey(st.Nodes[1].Name)})
		return doc, delta
	}
	doc, _, _ := x.Derive(st, opt, nil)
	p.Publish(doc, time.Now())
	s1 := p.cur.Load()
	d, dl := move(41001)
	p.PublishDelta(d, dl, time.Now())
	s2 := p.cur.Load()
	s2.forGroupsDelta(sel)
	s1.forGroupsDelta(sel) // late
	d, dl = move(41002)
	p.PublishDelta(d, dl, time.Now())
	if _, delta := p.cur.Load().forGroupsDelta(sel); delta == nil {
		t.Fatal("the selection was made whole: a late request for an older snapshot replaced its lineage")
	}
}
