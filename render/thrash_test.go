package render

import (
	"fmt"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// TestThrasherKeepsPolledOutputState is issue 25 item 8 at the render cache: an
// ingress-token holder cycling 100 distinct outputs, more than maxOutputs of them
// between two polls of a real ingress's output, which the node keeps (SetPopularity
// ranks it 1, as node/publish ranks the outputs its body cache keeps first; the
// thrasher's 0). The real output's last order must survive every round (its renders
// merge with it: no cold assembly after its first), where the least recently assembled
// output would go. The old cache cleared every output's state whenever a 33rd output
// came. (The bytes are the full render's: TestIncrementalRenderEqualsFullRender.)
func TestThrasherKeepsPolledOutputState(t *testing.T) {
	st, fopt := fleet.GenerateState(20, 0), fleet.GenerateOptions()
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fopt, nil)
	inc := mustIncremental(t, Options{})
	inc.SetPopularity(func(output string) int {
		if output == "legit" {
			return 1
		}
		return 0
	})
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
	for round := range 10 {
		poll("legit")
		for i := range 2 * maxOutputs {
			sel := fmt.Sprintf("thrash-%03d|g%d", (round*2*maxOutputs+i)%100, i)
			poll(sel)
			poll(sel)
		}
		if _, ok := inc.prev["legit"]; !ok {
			t.Fatalf("round %d: the thrasher evicted the polled output's state", round)
		}
	}
	if inc.prev["legit"] == kept {
		t.Fatal("the polled output's state was never assembled again") // the assertions above saw renders
	}
	if len(inc.prev) > maxOutputs {
		t.Fatalf("%d outputs kept, the bound is %d", len(inc.prev), maxOutputs)
	}
	before := inc.Cold()
	poll("legit")
	if inc.Cold() != before {
		t.Fatal("the polled output's next render found no state to merge with")
	}
}

// TestNewOutputGetsASlot: an output the node starts keeping (a new real ingress's:
// SetPopularity ranks it above the others) takes the place of the least recently
// assembled of the lower-ranked ones, and then keeps it against one-offs; ranked like
// the others it takes none (at equal ranks the state kept stays). Without SetPopularity
// the least recently assembled output goes.
func TestNewOutputGetsASlot(t *testing.T) {
	st, fopt := fleet.GenerateState(10, 0), fleet.GenerateOptions()
	var x fleet.Deriver
	doc, _, _ := x.Derive(st, fopt, nil)
	for _, ranked := range []bool{true, false} {
		inc := mustIncremental(t, Options{})
		keeps := map[string]bool{}
		if ranked {
			inc.SetPopularity(func(output string) int {
				if keeps[output] {
					return 1
				}
				return 0
			})
		}
		render := func(output string) {
			t.Helper()
			if _, err := inc.Render(Request{Doc: doc, Output: output}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range maxOutputs {
			render(fmt.Sprintf("busy-%02d", i))
		}
		render("new")
		_, kept := inc.prev["new"]
		_, first := inc.prev["busy-00"]
		if ranked && (kept || !first) || !ranked && (!kept || first) {
			t.Fatalf("ranked %v: a 33rd output ranked like the others kept %v, the least recently assembled kept %v", ranked, kept, first)
		}
		if !ranked {
			continue
		}
		keeps["new"] = true
		render("new")
		if _, ok := inc.prev["new"]; !ok {
			t.Fatal("an output the node keeps did not take the place of one it does not")
		}
		if _, ok := inc.prev["busy-00"]; ok {
			t.Fatal("the output that gave way was not the least recently assembled")
		}
		for i := range 50 {
			render(fmt.Sprintf("one-off-%02d", i))
			if _, ok := inc.prev["new"]; !ok {
				t.Fatalf("after %d one-offs the kept output's state went", i+1)
			}
		}
	}
}
