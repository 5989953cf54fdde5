package publish

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
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
// render of its snapshot's document, and every selection document is ForGroups'. The
// writer publishes its next document only once a reader has rendered, from start to
// end, a snapshot loaded after its last publish, so every document is rendered while
// the other readers may still hold the one before.
func TestRacingRendersOfPatchedSnapshotsServeTheFullRender(t *testing.T) {
	opts := render.Options{}
	p := newPublisher(opts, "")
	st, fo := euFleet(240, 40, 3, 1)
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fo, nil)
	p.Publish(doc, time.Now())
	sets := []*render.CertSet{
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
	// step is the writer's count of publishes, at[g] the step at which reader g began its
	// last finished render.
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	step, at := 0, make([]int, 3)
	wg.Go(func() {
		defer close(done)
		r := rand.New(rand.NewPCG(3, 3))
		for i := range 80 {
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
			p.PublishDelta(d, delta, time.Now())
			if i%9 == 4 {
				p.PublishCerts(sets[(i/9)%2])
			}
			mu.Lock()
			step = i + 1
			for slices.Max(at) < step {
				cond.Wait()
			}
			mu.Unlock()
		}
	})
	for g := range 3 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 17))
			defer func() { // a reader that stopped holds the writer back no more (it failed)
				mu.Lock()
				at[g] = math.MaxInt
				cond.Broadcast()
				mu.Unlock()
			}()
			var old *Snapshot
			for {
				select {
				case <-done:
					return
				default:
				}
				mu.Lock()
				began := step
				mu.Unlock()
				s := p.cur.Load()
				if old != nil && r.IntN(4) == 0 {
					s = old // a long-poll still holding a superseded snapshot
				}
				old = s
				sel, prefer := sels[r.IntN(len(sels))], prefers[r.IntN(len(prefers))]
				format := api.FormatTraefik
				if r.IntN(5) == 0 {
					format = api.FormatRoutes
				}
				if sel != nil && r.IntN(3) == 0 {
					gd := s.ForGroups(sel)
					if want := routing.ForGroups(s.doc, sel); gd.Revision != want.Revision {
						errs <- fmt.Errorf("selection %v of revision %s: revision %s, ForGroups gives %s", sel, s.doc.Revision, gd.Revision, want.Revision)
						return
					}
				}
				got, err := p.Body(s, Request{Prefer: prefer, Format: format, Groups: sel})
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
				case format == api.FormatRoutes:
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
				mu.Lock()
				at[g] = began
				cond.Broadcast()
				mu.Unlock()
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

// TestAChangeInOneGroupLeavesAnotherGroupsBodiesAlone: every long-poll of ?group=
// wakes at every new snapshot and asks for its body again. A change in group eu leaves
// the selection default's document as it was (its revision is its own), so what the
// node serves to default is the body it cached, not a render, gzip, hash and spill of
// the whole selection per change anywhere in the fleet; a change inside default renders
// it again, and what is served is the full render.
func TestAChangeInOneGroupLeavesAnotherGroupsBodiesAlone(t *testing.T) {
	p := newPublisher(render.Options{}, t.TempDir())
	st, fo := euFleet(200, 10, 10, 5)
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fo, nil)
	p.Publish(doc, time.Now())
	sel := []string{routing.DefaultGroup}
	serve := func(at string) map[string]*Rendered {
		t.Helper()
		s := p.cur.Load()
		out := map[string]*Rendered{}
		for _, prefer := range []string{"", "vps-a"} {
			for _, format := range []string{api.FormatTraefik, api.FormatRoutes} {
				got, err := p.Body(s, Request{Prefer: prefer, Format: format, Groups: sel})
				if err != nil {
					t.Fatal(err)
				}
				d, err := routing.Prefer(routing.ForGroups(s.doc, sel), prefer)
				if err != nil {
					t.Fatal(err)
				}
				want, err := routing.Marshal(d)
				if format == api.FormatTraefik {
					want, err = render.TraefikGroups(d, render.Options{}, sel, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.body, want) || got.revision != routing.ForGroups(s.doc, sel).Revision {
					t.Fatalf("%s prefer %q %s: served bytes (or revision %s) differ from the full render's", at, prefer, format, got.revision)
				}
				out[prefer+"|"+format] = got
			}
		}
		return out
	}
	move := func(app string) {
		st.Nodes = slices.Clone(st.Nodes)
		for i := range st.Nodes {
			if in, ok := st.Nodes[i].Instances[app]; ok {
				st.Nodes[i].Instances = maps.Clone(st.Nodes[i].Instances)
				in.Port++
				st.Nodes[i].Instances[app] = in
				d, _, delta := x.Derive(st, fo, []string{fleet.NodeKey(st.Nodes[i].Name)})
				if !p.PublishDelta(d, delta, time.Now()) {
					t.Fatalf("moving %s did not move the revision", app)
				}
				return
			}
		}
		t.Fatalf("no instance of %s", app)
	}
	last := serve("first")
	for step := range 4 {
		move(fmt.Sprintf("app-%05d", 10*step+5)) // group eu
		renders := p.renders.Load()
		now := serve(fmt.Sprintf("step %d", step))
		if n := p.renders.Load() - renders; n != 0 {
			t.Fatalf("step %d: a change in eu rendered the selection default %d times again", step, n)
		}
		for k, r := range now {
			if r != last[k] {
				t.Fatalf("step %d %s: not the cached body", step, k)
			}
		}
	}
	move("app-00002") // group default
	renders := p.renders.Load()
	now := serve("inside")
	if n := p.renders.Load() - renders; n != 4 {
		t.Fatalf("a change inside default rendered %d of its 4 outputs", n)
	}
	if now["|traefik"].etag == last["|traefik"].etag {
		t.Fatal("a change inside default kept its ETag")
	}
}

// euFleet is fleet.GenerateState(apps, prefixes) with the applications i (i%every ==
// at) in group eu, whose platform domain is eu.example.com, and its options.
func euFleet(apps, prefixes, every, at int) (fleet.State, fleet.Options) {
	st, fo := fleet.GenerateState(apps, prefixes), fleet.GenerateOptions()
	fleet.GenerateGroup(&st, &fo, "eu", "eu.example.com", func(i int) bool { return i%every == at })
	return st, fo
}
