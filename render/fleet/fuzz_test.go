package fleet

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// FuzzDerive: whatever the store holds, Derive never panics, emits a document Decode
// accepts (so every consumer can read it) and the same bytes for any input order.
func FuzzDerive(f *testing.F) {
	for _, st := range []State{sampleState(), GenerateState(20, 30), {}} {
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
