package render

import (
	"fmt"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// TestThrasherKeepsPolledOutputState is issue 25 item 8 at the render cache: an
// ingress-token holder cycling 100 distinct outputs (each asked for twice in a row,
// more than once) while a real ingress asks for its output every round. The real
// output's last order must survive every round (its renders merge with it: no cold
// assembly after its first). The old cache cleared every output's state whenever a
// 33rd output came. (The bytes are the full render's: TestIncrementalRenderEqualsFullRender.)
func TestThrasherKeepsPolledOutputState(t *testing.T) {
	st, fopt := fleet.GenerateState(20, 0), fleet.GenerateOptions()
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fopt, nil)
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	poll := func(output string) {
		t.Helper()
		// A copy of doc each time: Render answers an output's next render of the very
		// document it last rendered with its last body, and every poll here must render
		// and assemble (as one of a new revision does).
		d := *doc
		if _, err := inc.Render(Request{Doc: &d, Output: output}); err != nil {
			t.Fatal(err)
		}
	}
	poll("legit")
	kept := inc.prev["legit"]
	for round := range 300 {
		poll("legit")
		sel := fmt.Sprintf("thrash-%03d|g%d", round%100, round%100)
		poll(sel)
		poll(sel)
		if _, ok := inc.prev["legit"]; !ok {
			t.Fatalf("round %d: the thrasher's %s evicted the polled output's state", round, sel)
		}
	}
	if inc.prev["legit"] == kept {
		t.Fatal("the polled output's state was never assembled again") // the assertions above saw renders
	}
	if len(inc.prev) > maxOutputs {
		t.Fatalf("%d outputs kept, the bound is %d", len(inc.prev), maxOutputs)
	}
	// The polled output's renders were all merges with its last order: its only cold
	// assembly was its first. Count them directly.
	before := inc.Cold()
	poll("legit")
	if inc.Cold() != before {
		t.Fatal("the polled output's next render found no state to merge with")
	}
}

// TestNewOutputGetsASlot: an output asked for from now on (a new real ingress) takes
// the place of the least-asked one once asked for more often, and then keeps it against
// one-offs.
func TestNewOutputGetsASlot(t *testing.T) {
	st, fopt := fleet.GenerateState(50, 0), fleet.GenerateOptions()
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fopt, nil)
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := func(output string) {
		t.Helper()
		if _, err := rendered(inc, Request{Doc: doc, Output: output}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxOutputs { // every slot asked for three times
		for range 3 {
			render(fmt.Sprintf("busy-%02d", i))
		}
	}
	for range 3 {
		render("new")
	}
	if _, ok := inc.prev["new"]; ok {
		t.Fatal("a new output asked for no more often than the others took one's place")
	}
	render("new")
	if _, ok := inc.prev["new"]; !ok {
		t.Fatal("a new output asked for more often than the others was not kept")
	}
	for i := range 50 {
		render("new")
		render(fmt.Sprintf("one-off-%02d", i))
		if _, ok := inc.prev["new"]; !ok {
			t.Fatalf("after %d one-offs the new output's state went", i+1)
		}
	}
}
