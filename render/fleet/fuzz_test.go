package fleet

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// FuzzDerive: whatever the store holds, Derive never panics, emits a document Decode
// accepts (so every consumer can read it) and the same bytes for any input order, and
// no wildcard route covers a host of another account or of no holder.
func FuzzDerive(f *testing.F) {
	iso := isolationState()
	iso.Claims = append(iso.Claims, Claim{Host: "a.shop.example.org", Account: "globex", App: "gx"},
		Claim{Host: "*.example.com", Account: "acme", App: "shop"}, Claim{Host: "*.x.example", Account: "globex", App: "gx"})
	iso.UnreadableClaims = []string{"y.x.example", "apps.example.com", "*.example.org"}
	for _, st := range []State{sampleState(), GenerateState(20, 30), {}, iso} {
		b, err := json.Marshal(st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint64(1))
	}
	f.Add([]byte(`{"Apps":[{"name":"a","account":"x","placement":["n","n","N"]}],"Claims":[{"host":"*.a.b","account":"x","app":"a","paths":{"p":"a.apps.example.com","q":"*.a.b"}}],"Nodes":[{"name":"n","address":"::1","apiPort":1,"instances":{"a":{"port":65535,"ready":true}}}]}`), uint64(7))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		var st State
		if json.Unmarshal(data, &st) != nil {
			return
		}
		d, _ := Derive(st, opts())
		b, err := routing.Marshal(d)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if _, err := routing.Decode(b); err != nil {
			t.Fatalf("Decode refuses a derived document: %v\n%s", err, b)
		}
		if routing.ComputeRevision(d) != d.Revision {
			t.Fatal("derived document is not sealed")
		}
		checkNoCrossAccountCover(t, st, d)
		d2, _ := Derive(shuffled(st, rand.New(rand.NewPCG(seed, 1))), opts())
		b2, err := routing.Marshal(d2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("input order changed the document:\n%s\n%s", b, b2)
		}
	})
}

// checkNoCrossAccountCover fails when a wildcard route of d covers an exact route of
// another account or of no holder (docs/design.md §3: claims are exclusive by coverage).
func checkNoCrossAccountCover(t *testing.T, st State, d *routing.Document) {
	t.Helper()
	account := map[string]string{}
	for _, a := range st.Apps {
		account[a.Name] = a.Account // duplicated names are never routed
	}
	for _, w := range d.Routes {
		if !routing.IsWildcard(w.Host) {
			continue
		}
		for _, r := range d.Routes {
			if routing.Covers(w.Host, r.Host) &&
				(r.Application == routing.UnownedApplication || account[r.Application] != account[w.Application]) {
				t.Fatalf("wildcard %s (%s) covers %s (%s)", w.Host, w.Application, r.Host, r.Application)
			}
		}
	}
}
