package reconcile

import (
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// BenchmarkReconcileDeriveOneChange is the reconcile pass's own part of one change, past
// the store reads: Reconciler.derive folds the cached objects into the fleet state,
// derives (fleet.Deriver, patching: one instance moved in a node record read by a
// one-step pass) and publishes; the Traefik render waits for a poll and is not part of
// it.
func BenchmarkReconcileDeriveOneChange(b *testing.B) {
	for _, apps := range []int{1000, 10000, 100000} {
		st := fleet.GenerateState(apps, 0)
		b.Run(fmt.Sprintf("apps=%d", apps), func(b *testing.B) {
			opt := fleet.GenerateOptions()
			r := &Reconciler{pub: publish.New(render.Options{}, "", nil), log: slog.New(slog.DiscardHandler),
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
			routes := len(r.pub.Current().Doc().Routes)
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
				if !r.pub.Current().Patched() {
					b.Fatal("the change was not patched")
				}
			}
			b.ReportMetric(float64(deriving.Nanoseconds())/float64(b.N)/float64(routes), "ns/route")
		})
	}
}
