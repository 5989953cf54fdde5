package publish

import (
	"fmt"
	"testing"

	"github.com/scafo/ingress/internal/freq"
)

// TestBodyCacheOrder: when full, a body an output's newer body superseded goes first,
// then the least-polled output's; a new body of an output polled no more than that is
// not kept (and told evicted, so its spill files go), and Admits says so beforehand.
func TestBodyCacheOrder(t *testing.T) {
	polls := freq.New(4)
	var gone []*Rendered
	c := newBodyCache(3, polls, func(r *Rendered) { gone = append(gone, r) })
	key := func(out string, rev int) renderKey {
		return renderKey{format: "traefik", prefer: out, revision: fmt.Sprint(rev)}
	}
	body := map[renderKey]*Rendered{}
	add := func(k renderKey, n int) bool {
		t.Helper()
		for range n {
			polls.Add(outputOf(k))
		}
		body[k] = &Rendered{revision: k.revision}
		var seq uint64
		fmt.Sscan(k.revision, &seq)
		return c.Add(k, body[k], seq)
	}
	add(key("a", 1), 5)
	add(key("b", 1), 5)
	add(key("c", 1), 2)
	// b's revision 2 supersedes its revision 1, which goes although polled most.
	if !add(key("b", 2), 1) || len(gone) != 1 || gone[0] != body[key("b", 1)] {
		t.Fatalf("the superseded body did not go first: gone %v", gone)
	}
	// A one-off: polled once, less than c (the least polled): not kept.
	k := key("x", 1)
	polls.Add(outputOf(k))
	if c.Admits(k) {
		t.Fatal("Admits says a one-off would displace a polled output")
	}
	r := &Rendered{}
	if c.Add(k, r, 1) || gone[len(gone)-1] != r {
		t.Fatal("a one-off's body was kept, or not told evicted")
	}
	if _, ok := c.Get(key("c", 1)); !ok {
		t.Fatal("the one-off displaced the least-polled output")
	}
	// An output polled more than c takes c's place.
	if !add(key("y", 1), 4) || gone[len(gone)-1] != body[key("c", 1)] {
		t.Fatal("an output polled more often did not take the least-polled one's place")
	}
	for _, k := range []renderKey{key("a", 1), key("b", 2), key("y", 1)} {
		if _, ok := c.Get(k); !ok {
			t.Fatalf("%+v is not kept", k)
		}
	}
	if c.Len() != 3 {
		t.Fatalf("%d kept, the size is 3", c.Len())
	}
	// A body of b for an older snapshot, rendered late, is superseded from the start:
	// it goes before b's current one.
	if !add(key("b", 1), 9) || gone[len(gone)-1] != body[key("y", 1)] && gone[len(gone)-1] != body[key("a", 1)] {
		t.Fatal("the late body of b was not kept in the place of the least polled")
	}
	add(key("z", 1), 20)
	if _, ok := c.Get(key("b", 2)); !ok {
		t.Fatal("the late body of an older snapshot displaced the current one")
	}
	if _, ok := c.Get(key("b", 1)); ok {
		t.Fatal("the late body of an older snapshot was not the first to go")
	}
}
