package publish

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// BenchmarkPublishOneChange is the node's whole part of one change, past the store:
// derive the fleet with one application's port moved (fleet.Deriver, as the reconciler
// does after a one-step store read), publish the document, and serve
// the first poll of the rendered configuration (incremental render, gzip, ETag hash,
// spill to disk for sendfile). render.BenchmarkDeriveRender measures derive + render
// alone on the same fleets; the difference is what the node adds per body.
func BenchmarkPublishOneChange(b *testing.B) {
	for _, apps := range []int{1000, 10000, 100000} {
		st := fleet.GenerateState(apps, 0)
		opt := fleet.GenerateOptions()
		b.Run(fmt.Sprintf("apps=%d", apps), func(b *testing.B) {
			st := st
			st.Nodes = slices.Clone(st.Nodes)
			p := newPublisher(render.Options{}, b.TempDir())
			app := st.Apps[4].Name // placed on vps-b and vps-c
			// The first render is cold (every fragment); the loop measures the steady state.
			var x fleet.Deriver
			d0, _, _ := x.Derive(st, opt, nil)
			p.Publish(d0, time.Now())
			if _, err := p.Body(p.cur.Load(), Request{Prefer: "", Format: api.FormatTraefik}); err != nil {
				b.Fatal(err)
			}
			n, routes, size, gz := 0, 0, 0, 0
			var deriving, publishing time.Duration
			for b.Loop() {
				n++
				// vps-b's record as a new value, as a store read makes it (untimed).
				st.Nodes = slices.Clone(st.Nodes)
				was := st.Nodes[1].Instances
				st.Nodes[1].Instances = make(map[string]fleet.Instance, len(was))
				for k, v := range was {
					st.Nodes[1].Instances[k] = v
				}
				st.Nodes[1].Instances[app] = fleet.Instance{Port: 1 + n%60000, Ready: true}
				t0 := time.Now()
				doc, _, delta := x.Derive(st, opt, []string{fleet.NodeKey("vps-b")})
				t1 := time.Now()
				if delta == nil {
					b.Fatal("the change was not patched")
				}
				if !p.PublishDelta(doc, delta, t1) {
					b.Fatal("the revision did not move")
				}
				r, err := p.Body(p.cur.Load(), Request{Prefer: "", Format: api.FormatTraefik})
				if err != nil {
					b.Fatal(err)
				}
				zb := r.Gzip() // made at the first poll that accepts gzip, as Traefik's does
				deriving, publishing = deriving+t1.Sub(t0), publishing+time.Since(t1)
				routes, size, gz = len(doc.Routes), len(r.body), len(zb)
			}
			b.ReportMetric(float64(deriving.Nanoseconds())/float64(b.N)/float64(routes), "derive-ns/route")
			b.ReportMetric(float64(publishing.Nanoseconds())/float64(b.N)/float64(routes), "publish-ns/route")
			b.ReportMetric(float64(size)/1e6, "body-MB")
			b.ReportMetric(float64(gz)/1e6, "gzip-MB")
		})
	}
}
