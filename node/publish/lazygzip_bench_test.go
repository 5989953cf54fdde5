package publish

import (
	"fmt"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// BenchmarkFirstPollOfANewRevision: a new revision published and its routing document
// polled once without Accept-Encoding (the fleet simulator's polls, and any poller
// that does not ask for gzip), each output spilled as the cache keeps it. Before the
// gzip body was made lazily (lazyGzip) every render also compressed and spilled it.
func BenchmarkFirstPollOfANewRevision(b *testing.B) {
	for _, apps := range []int{10, 1000} {
		b.Run(fmt.Sprintf("apps=%d", apps), func(b *testing.B) {
			docs := make([]*routing.Document, 2)
			for i := range docs {
				st, fo := fleet.GenerateState(apps, 0), fleet.GenerateOptions()
				st.Apps[0].Name = fmt.Sprintf("moved-%d", i) // two revisions to alternate
				var x fleet.Deriver
				d, _, _ := x.Derive(st, fo, nil)
				docs[i] = d
			}
			if docs[0].Revision == docs[1].Revision {
				b.Fatal("one revision")
			}
			p := newPublisher(render.Options{}, b.TempDir())
			n := 0
			for b.Loop() {
				n++
				p.Publish(docs[n%2], time.Now())
				r, err := p.Body(p.Current(), Request{Format: api.FormatRoutes, Ingress: "edge-0"})
				if err != nil || len(r.Body()) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
