package routing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestRevisionMovesWhenAnyFieldChanges: each change moves the revision, and no two
// changes give one revision (order is content: middlewares a,b are not b,a; a field
// cannot migrate into another and hash alike: a middleware is not a health path).
func TestRevisionMovesWhenAnyFieldChanges(t *testing.T) {
	base := sampleDocument()
	mws := func(mw ...string) func(d *Document) { // both routes of shop
		return func(d *Document) { d.Routes[0].Middlewares, d.Routes[2].Middlewares = mw, mw }
	}
	seen := map[string]string{}
	for _, tc := range []struct {
		name   string
		mutate func(d *Document)
	}{
		{"version", func(d *Document) { d.V = 2 }},
		{"route host", func(d *Document) { d.Routes[1].Host = "go2.tito.io" }},
		{"route application", func(d *Document) { d.Routes[1].Application = "tito-go2" }},
		{"route removed", func(d *Document) { d.Routes = d.Routes[:3] }},
		{"health path set", func(d *Document) { d.Routes[0].HealthPath = "/healthz" }},
		{"health path changed", func(d *Document) { d.Routes[1].HealthPath = "/ready" }},
		{"upstream node", func(d *Document) { d.Routes[1].Upstreams[0].Node = "vps-c" }},
		{"upstream address", func(d *Document) { d.Routes[1].Upstreams[0].Address = "10.83.0.2:24601" }},
		{"upstream api port", func(d *Document) { d.Routes[1].Upstreams[0].APIPort = 7401 }},
		{"upstream order", func(d *Document) { slices.Reverse(d.Routes[0].Upstreams) }},
		{"upstream dropped", func(d *Document) { d.Routes[0].Upstreams = d.Routes[0].Upstreams[:1] }},
		{"path added", func(d *Document) { d.Routes[3].Paths["newco"] = "go.tito.io" }},
		{"path removed", func(d *Document) { delete(d.Routes[3].Paths, "bigcorp") }},
		{"path retargeted", func(d *Document) { d.Routes[3].Paths["paulca"] = "shop.apps.example.com" }},
		{"path renamed", func(d *Document) {
			delete(d.Routes[3].Paths, "paulca")
			d.Routes[3].Paths["paulcb"] = "go.tito.io"
		}},
		{"paths added to another host", func(d *Document) {
			d.Routes[1].Paths = map[string]string{"paulca": "ti.to"}
		}},
		{"api removed", func(d *Document) { d.API = nil }},
		{"api host", func(d *Document) { d.API.Hosts[0] = "apps.example.net" }},
		{"api upstream order", func(d *Document) { slices.Reverse(d.API.Upstreams) }},
		{"api denied", func(d *Document) { d.API.Denied = d.API.Denied[:1] }},
		{"route group", func(d *Document) { d.Routes[1].Group = "eu-1" }},
		{"passthrough's other fields", func(d *Document) { makePassthrough(d); d.Routes[1].Passthrough = false }},
		{"passthrough", makePassthrough},
		{"proxy protocol", func(d *Document) { makePassthrough(d); d.Routes[1].ProxyProtocol = 2 }},
		{"middlewares a,b", mws("a@file", "b@file")},
		{"middlewares b,a", mws("b@file", "a@file")},
		{"middleware a", mws("a@file")},
		{"health path x@file", func(d *Document) { d.Routes[1].HealthPath = "/x@file" }},
		{"middleware x@file", func(d *Document) { d.Routes[1].HealthPath, d.Routes[1].Middlewares = "", []string{"x@file"} }},
	} {
		d := cloneDocument(base)
		tc.mutate(d)
		got := ComputeRevision(d)
		if got == base.Revision {
			t.Errorf("%s: revision %s did not move", tc.name, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s give one revision %s", other, tc.name, got)
		}
		seen[got] = tc.name
	}
}

func TestRevisionSeparatesSections(t *testing.T) {
	// The same strings moved between sections must never hash alike.
	a := &Document{V: 1, Routes: []Route{}, API: &API{Hosts: []string{"a.example", "b.example"}, Denied: []string{}}}
	b := &Document{V: 1, Routes: []Route{}, API: &API{Hosts: []string{"a.example"}, Denied: []string{"b.example"}}}
	c := &Document{V: 1, Routes: []Route{}, API: &API{Hosts: []string{"a.exampleb.example"}, Denied: []string{}}}
	d := &Document{V: 1, Routes: []Route{{Host: "x.example", Application: "x",
		Paths: map[string]string{"ab": "c.example"}}}}
	e := &Document{V: 1, Routes: []Route{{Host: "x.example", Application: "x",
		Paths: map[string]string{"a": "bc.example"}}}}
	f := &Document{V: 1, Routes: []Route{{Host: "x.example", Application: "x", HealthPath: "/h"}}}
	g := &Document{V: 1, Routes: []Route{{Host: "x.example", Application: "x/h"}}}
	seen := map[string]int{}
	for i, doc := range []*Document{a, b, c, d, e, f, g} {
		r := ComputeRevision(doc)
		if j, dup := seen[r]; dup {
			t.Fatalf("documents %d and %d share revision %s", j, i, r)
		}
		seen[r] = i
	}
}

// TestRevisionIgnoresWhatIsNotRoutingContent: route order, nil versus empty lists and
// maps, and the Revision field itself do not move the revision; ComputeRevision leaves
// its input as it was, Prefer keeps the revision, and Seal sets version and revision.
func TestRevisionIgnoresWhatIsNotRoutingContent(t *testing.T) {
	base := sampleDocument()
	d := cloneDocument(base)
	slices.Reverse(d.Routes)
	d.Routes[0].Upstreams = d.Routes[0].Upstreams[:len(d.Routes[0].Upstreams):len(d.Routes[0].Upstreams)]
	d.Routes[1].Paths = map[string]string{}
	d.Revision = "something else"
	if got := ComputeRevision(d); got != base.Revision {
		t.Fatalf("reordered routes, empty paths, another Revision field: revision %s, want %s", got, base.Revision)
	}
	if slices.IsSortedFunc(d.Routes, compareRoutes) {
		t.Fatal("ComputeRevision sorted its input in place")
	}
	if p, err := Prefer(base, "vps-b"); err != nil || p.Revision != base.Revision {
		t.Fatalf("Prefer changed the revision: %v, %v", p, err)
	}
	e := &Document{Routes: []Route{}}
	e.Seal()
	if e.V != Version || len(e.Revision) != RevisionLen {
		t.Fatalf("Seal: v=%d revision=%q", e.V, e.Revision)
	}
}

// TestRevisionEncodingIsPinned guards the encoding: a change to it moves every
// revision, so every ingress of a fleet mixing old and new nodes would see two
// revisions for one state. Change the constant only on purpose (last: the route
// blocks of revisionBlock, issue 13).
func TestRevisionEncodingIsPinned(t *testing.T) {
	const want = "e7aa79a5107984fadb1f091e99bb2a43"
	if got := sampleDocument().Revision; got != want {
		t.Fatalf("revision of the sample document = %s, want %s", got, want)
	}
}

// TestUpdatedBlockDigestsGiveTheRevisionOfTheDocument edits random routes of documents
// spanning several blocks: the revision SealBlocks and Blocks.Reseal give is
// ComputeRevision's, and a change to any route, in any block, moves it.
func TestUpdatedBlockDigestsGiveTheRevisionOfTheDocument(t *testing.T) {
	rnd := rand.New(rand.NewPCG(13, 4))
	for _, n := range []int{1, revisionBlock - 1, revisionBlock, revisionBlock + 1, 5*revisionBlock + 7} {
		d := &Document{V: Version, Routes: make([]Route, n)}
		for i := range d.Routes {
			d.Routes[i] = Route{Host: fmt.Sprintf("h%05d.example.com", i), Application: fmt.Sprintf("a%d", i%7),
				Upstreams: []Upstream{{Node: "vps-a", Address: "10.0.0.1:" + strconv.Itoa(1000+i), APIPort: 8443}}}
		}
		blocks := SealBlocks(d)
		rev := d.Revision
		if rev != ComputeRevision(d) {
			t.Fatalf("%d routes: SealBlocks %s != ComputeRevision %s", n, rev, ComputeRevision(d))
		}
		for step := 0; step < 20; step++ {
			next := &Document{V: Version, Routes: slices.Clone(d.Routes)}
			var changed []int
			for i := range next.Routes {
				if rnd.IntN(n) < 2 {
					changed = append(changed, i)
					next.Routes[i].Upstreams = []Upstream{{Node: "vps-b", Address: "10.0.0.2:" + strconv.Itoa(rnd.IntN(60000)+1), APIPort: 8443}}
				}
			}
			nb := blocks.Reseal(next, changed)
			got, want := next.Revision, ComputeRevision(next)
			if got != want {
				t.Fatalf("%d routes, changed %v: updated revision %s != %s", n, changed, got, want)
			}
			if len(changed) > 0 && got == rev {
				t.Fatalf("%d routes, changed %v: the revision did not move", n, changed)
			}
			d, blocks, rev = next, nb, got
		}
	}
}
