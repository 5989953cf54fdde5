package node

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// TestPatchedFoldEqualsAFoldOfEverything: after random one-step changes to the cached
// objects (applications, claims and node records written, rewritten into another
// group, deleted; malformed objects coming and going; keys that sort between and
// around the others), the patched fold is the fold of every object, entry for entry.
// A fold patched wrong would derive from a state the store does not hold.
func TestPatchedFoldEqualsAFoldOfEverything(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	objects := map[string]cachedObject{}
	names := []string{"a", "app", "app-2", "app.x", "b-1", "blog", "z", "zz-9"}
	hosts := []string{"ti.to", "a.ti.to", "*.ti.to", "tito.io", "z.example.org"}
	nodes := []string{"vps-a", "vps-b", "vps-c"}
	write := func() string {
		switch r.IntN(3) {
		case 0:
			n := names[r.IntN(len(names))]
			k := fleet.AppKey(n)
			switch r.IntN(6) {
			case 0:
				delete(objects, k)
			case 1:
				objects[k] = cachedObject{bad: "malformed JSON"}
			default:
				a := fleet.App{Name: n, Account: "acme"}
				if r.IntN(2) == 0 {
					a.Ingress = &fleet.Ingress{Group: []string{"eu-1", "us", "Bad Group"}[r.IntN(3)]}
				}
				objects[k] = cachedObject{etag: fmt.Sprint(r.Int()), value: a}
			}
			return k
		case 1:
			h := hosts[r.IntN(len(hosts))]
			k := fleet.ClaimKey(h)
			switch r.IntN(5) {
			case 0:
				delete(objects, k)
			case 1:
				objects[k] = cachedObject{bad: "host does not match key"}
			default:
				objects[k] = cachedObject{etag: fmt.Sprint(r.Int()), value: fleet.Claim{Host: h, Account: "acme", App: "blog"}}
			}
			return k
		default:
			n := nodes[r.IntN(len(nodes))]
			k := fleet.NodeKey(n)
			switch r.IntN(5) {
			case 0:
				delete(objects, k)
			case 1:
				objects[k] = cachedObject{bad: "malformed JSON"}
			default:
				objects[k] = cachedObject{etag: fmt.Sprint(r.Int()), value: fleet.NodeRecord{Name: n, Address: "10.0.0.1", APIPort: 7400}}
			}
			return k
		}
	}
	for range 20 {
		write()
	}
	f := buildFold(objects)
	patchedPasses := 0
	for step := range 3000 {
		var changed []string
		for range 1 + r.IntN(3) {
			changed = append(changed, write())
		}
		want := buildFold(objects)
		got := f.patched(objects, changed)
		if got == nil {
			f = want // a malformed object was involved: everything is folded again
			continue
		}
		patchedPasses++
		if !reflect.DeepEqual(normFold(got), normFold(want)) {
			t.Fatalf("step %d (changed %v):\npatched %+v\nfolded  %+v", step, changed, got, want)
		}
		f = got
	}
	if patchedPasses < 1000 {
		t.Fatalf("%d of 3000 passes were patched: the test does not exercise the patch", patchedPasses)
	}
}

// normFold is f with empty lists as nil (an emptied list and a never-filled one are
// the same fold).
func normFold(f *fold) fold {
	out := *f
	if len(out.apps) == 0 {
		out.apps = nil
	}
	if len(out.claims) == 0 {
		out.claims = nil
	}
	if len(out.nodeKeys) == 0 {
		out.nodeKeys = nil
	}
	return out
}
