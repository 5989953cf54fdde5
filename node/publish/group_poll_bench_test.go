package publish

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// BenchmarkGroupPollAfterAChangeElsewhere is what a parked long-poll of ?group=default
// (Traefik format, prefer=vps-a) costs the node when a change in group eu (100 of 10 000
// applications) wakes it: the body it gets for the new snapshot. The change itself
// (derive, publish) is outside the timed part.
func BenchmarkGroupPollAfterAChangeElsewhere(b *testing.B) {
	p := newPublisher(render.Options{}, b.TempDir())
	st, fo := euFleet(10000, 0, 100, 0)
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fo, nil)
	p.Publish(doc, time.Now())
	sel := []string{routing.DefaultGroup}
	if _, err := p.Body(p.cur.Load(), Request{Prefer: "vps-a", Format: api.FormatTraefik, Groups: sel}); err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		app := fmt.Sprintf("app-%05d", (n*100)%10000)
		st.Nodes = slices.Clone(st.Nodes)
		for i := range st.Nodes {
			if in, ok := st.Nodes[i].Instances[app]; ok {
				st.Nodes[i].Instances = maps.Clone(st.Nodes[i].Instances)
				in.Port = 1 + (in.Port+1)%60000
				st.Nodes[i].Instances[app] = in
				d, _, delta := x.Derive(st, fo, []string{fleet.NodeKey(st.Nodes[i].Name)})
				p.PublishDelta(d, delta, time.Now())
				break
			}
		}
		b.StartTimer()
		if _, err := p.Body(p.cur.Load(), Request{Prefer: "vps-a", Format: api.FormatTraefik, Groups: sel}); err != nil {
			b.Fatal(err)
		}
	}
}
