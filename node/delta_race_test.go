package node

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// TestRacingRendersOfPatchedSnapshotsServeTheFullRender: a writer publishes a chain of
// patched documents (fleet.Deriver, publishDelta) and swaps fleet certificates in
// between (publishCerts), while readers render every kind of output of whatever
// snapshot they loaded (default, ?prefer=, ?group= with and without prefer, the routes
// format), some of them of a snapshot already superseded, and ask for the selections'
// documents as the status and wait handlers do (forGroupsDelta). Every body is the full
// render of its snapshot's document, and every selection document is ForGroups'.
func TestRacingRendersOfPatchedSnapshotsServeTheFullRender(t *testing.T) {
	opts := render.Options{}
	p := newPublisher(opts, "")
	st := fleet.GenerateState(240, 40)
	for i := range st.Apps {
		if i%3 == 1 {
			st.Apps[i].Ingress = &fleet.Ingress{Group: "eu"}
		}
	}
	fo := fleet.GenerateOptions()
	fo.PlatformDomains = []string{"apps.example.com", "eu.example.com"}
	fo.DomainGroups = map[string]string{"eu.example.com": "eu"}
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fo, nil)
	p.publish(doc, time.Now())
	sets := []*fleetcerts.Set{
		{Fingerprint: "one", FleetCerts: &render.FleetCerts{Managed: map[string]bool{"app-00003.apps.example.com": true},
			Certificates: []render.Certificate{{Names: []string{"app-00003.apps.example.com"}, CertFile: "C3", KeyFile: "K3"}}}},
		{Fingerprint: "two", FleetCerts: &render.FleetCerts{Managed: map[string]bool{"app-00004.eu.example.com": true},
			Certificates: []render.Certificate{{Names: []string{"app-00004.eu.example.com"}, CertFile: "C4", KeyFile: "K4"}}}},
	}
	sels := [][]string{nil, {"default"}, {"eu"}, {"default", "eu"}}
	prefers := []string{"", "vps-a", "vps-c"}

	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 8)
	patched := 0
	wg.Go(func() {
		defer close(done)
		r := rand.New(rand.NewPCG(3, 3))
		for step := range 80 {
			st.Nodes = slices.Clone(st.Nodes)
			node := &st.Nodes[r.IntN(len(st.Nodes))]
			node.Instances = maps.Clone(node.Instances)
			for range 1 + r.IntN(2) {
				app := st.Apps[r.IntN(len(st.Apps))].Name
				if in, ok := node.Instances[app]; ok {
					in.Port = 30000 + r.IntN(1000)
					if r.IntN(6) == 0 {
						in.Ready = !in.Ready
					}
					node.Instances[app] = in
				}
			}
			d, _, delta := x.Derive(st, fo, []string{fleet.NodeKey(node.Name)})
			if delta != nil {
				patched++
			}
			p.publishDelta(d, delta, time.Now())
			if step%9 == 4 {
				p.publishCerts(sets[(step/9)%2])
			}
			time.Sleep(5 * time.Millisecond) // readers render in between
		}
	})
	for g := range 3 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 17))
			var old *snapshot
			for {
				select {
				case <-done:
					return
				default:
				}
				s := p.cur.Load()
				if old != nil && r.IntN(4) == 0 {
					s = old // a long-poll still holding a superseded snapshot
				}
				old = s
				sel, prefer := sels[r.IntN(len(sels))], prefers[r.IntN(len(prefers))]
				format := formatTraefik
				if r.IntN(5) == 0 {
					format = formatRoutes
				}
				if sel != nil && r.IntN(3) == 0 {
					gd := s.forGroups(sel)
					if want := routing.ForGroups(s.doc, sel); gd.Revision != want.Revision {
						errs <- fmt.Errorf("selection %v of revision %s: revision %s, ForGroups gives %s", sel, s.doc.Revision, gd.Revision, want.Revision)
						return
					}
				}
				got, err := p.getGroups(s, prefer, format, sel)
				if err != nil {
					errs <- err
					return
				}
				d := s.doc
				if sel != nil {
					d = routing.ForGroups(d, sel)
				}
				d, err = routing.Prefer(d, prefer)
				if err != nil {
					errs <- err
					return
				}
				var fc *render.FleetCerts
				if s.certs != nil {
					fc = s.certs.FleetCerts
				}
				var want []byte
				switch {
				case format == formatRoutes:
					want, err = routing.Marshal(d)
				case sel == nil:
					want, err = render.TraefikFleet(d, opts, fc)
				default:
					want, err = render.TraefikGroups(d, opts, sel, fc)
				}
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got.body, want) {
					errs <- fmt.Errorf("revision %s selection %v prefer %q format %s: served bytes differ from the full render", s.doc.Revision, sel, prefer, format)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if patched < 40 {
		t.Fatalf("%d of 80 documents were patched: the test does not exercise the delta path", patched)
	}
	t.Logf("%d renders, %d patched documents, selections kept %d", p.renders.Load(), patched, len(p.lineage.last))
	if n := len(p.lineage.last); n > len(sels) {
		t.Errorf("the lineage holds %d selections, more than the %d asked for", n, len(sels)-1)
	}
}
