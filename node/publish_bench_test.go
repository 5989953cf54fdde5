package node

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
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
			p.publish(d0, time.Now())
			if _, err := p.get(p.cur.Load(), "", api.FormatTraefik); err != nil {
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
				if !p.publishDelta(doc, delta, t1) {
					b.Fatal("the revision did not move")
				}
				r, err := p.get(p.cur.Load(), "", api.FormatTraefik)
				if err != nil {
					b.Fatal(err)
				}
				deriving, publishing = deriving+t1.Sub(t0), publishing+time.Since(t1)
				routes, size, gz = len(doc.Routes), len(r.body), len(r.gz)
			}
			b.ReportMetric(float64(deriving.Nanoseconds())/float64(b.N)/float64(routes), "derive-ns/route")
			b.ReportMetric(float64(publishing.Nanoseconds())/float64(b.N)/float64(routes), "publish-ns/route")
			b.ReportMetric(float64(size)/1e6, "body-MB")
			b.ReportMetric(float64(gz)/1e6, "gzip-MB")
		})
	}
}

// BenchmarkReconcileDeriveOneChange is the reconcile pass's own part of one change, past
// the store reads: reconciler.derive folds the cached objects into the fleet state,
// derives (fleet.Deriver, patching: one instance moved in a node record read by a
// one-step pass) and publishes; the Traefik render waits for a poll and is not part of
// it.
func BenchmarkReconcileDeriveOneChange(b *testing.B) {
	for _, apps := range []int{1000, 10000, 100000} {
		st := fleet.GenerateState(apps, 0)
		b.Run(fmt.Sprintf("apps=%d", apps), func(b *testing.B) {
			opt := fleet.GenerateOptions()
			r := &reconciler{pub: newPublisher(render.Options{}, ""), log: slog.New(slog.DiscardHandler),
				opts: func() fleet.Options { o := opt; o.Now = time.Time{}; return o }, objects: map[string]cachedObject{}}
			for _, a := range st.Apps {
				r.objects[fleet.AppKey(a.Name)] = cachedObject{etag: "1", value: a}
			}
			for _, c := range st.Claims {
				r.objects[fleet.ClaimKey(c.Host)] = cachedObject{etag: "1", value: c}
			}
			for _, n := range st.Nodes {
				r.objects[fleet.NodeKey(n.Name)] = cachedObject{etag: "1", value: n}
			}
			now := opt.Now
			r.derive(now, nil)
			key, app := fleet.NodeKey("vps-b"), st.Apps[4].Name
			routes := len(r.pub.current().doc.Routes)
			var deriving time.Duration
			n := 0
			for b.Loop() {
				n++
				b.StopTimer()
				rec := r.objects[key].value.(fleet.NodeRecord)
				was := rec.Instances
				rec.Instances = make(map[string]fleet.Instance, len(was))
				for k, v := range was {
					rec.Instances[k] = v
				}
				rec.Instances[app] = fleet.Instance{Port: 1 + n%60000, Ready: true}
				r.objects[key] = cachedObject{etag: strconv.Itoa(n), value: rec}
				b.StartTimer()
				t0 := time.Now()
				r.derive(now, []string{key})
				deriving += time.Since(t0)
				if r.pub.current().delta == nil {
					b.Fatal("the change was not patched")
				}
			}
			b.ReportMetric(float64(deriving.Nanoseconds())/float64(b.N)/float64(routes), "ns/route")
		})
	}
}
