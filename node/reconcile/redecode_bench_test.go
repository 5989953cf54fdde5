package reconcile

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// BenchmarkFullPassDecode is a full pass's decoding (readAll) of a store nothing wrote
// to since the last pass: every object read again, its bytes those the cache decoded.
// redecode keeps the decoded values; before it, readAll decoded every object again
// (measured with redecode as 'return r.decode(o)').
func BenchmarkFullPassDecode(b *testing.B) {
	for _, apps := range []int{10, 1000} {
		b.Run(fmt.Sprintf("apps=%d", apps), func(b *testing.B) {
			st := fleet.GenerateState(apps, 0)
			var objs []store.Object
			add := func(key string, v any) {
				raw, err := json.Marshal(v)
				if err != nil {
					b.Fatal(err)
				}
				objs = append(objs, store.Object{Key: key, Value: raw, ETag: "1"})
			}
			for _, a := range st.Apps {
				add(fleet.AppKey(a.Name), a)
			}
			for _, c := range st.Claims {
				add(fleet.ClaimKey(c.Host), c)
			}
			for _, n := range st.Nodes {
				add(fleet.NodeKey(n.Name), n)
			}
			r := &Reconciler{log: slog.New(slog.DiscardHandler), objects: map[string]cachedObject{}}
			for _, o := range objs {
				r.objects[o.Key] = r.decode(o)
			}
			for b.Loop() {
				next := make(map[string]cachedObject, len(objs))
				for _, o := range objs {
					o.Value = append([]byte(nil), o.Value...) // a read's own bytes
					old, ok := r.objects[o.Key]
					next[o.Key] = r.redecode(o, old, ok)
				}
				r.objects = next
			}
			for _, o := range objs {
				if c := r.objects[o.Key]; c.value == nil || c.bad != "" {
					b.Fatalf("%s: %+v", o.Key, c)
				}
			}
		})
	}
}
