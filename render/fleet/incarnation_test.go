package fleet

import "testing"

// TestAnInstanceOfAnotherIncarnationIsNeverRouted: an application deleted and
// recreated under the same name (in any account) gets a new ID; an instance a node
// still reports for the old ID is the old owner's process and routes nothing.
func TestAnInstanceOfAnotherIncarnationIsNeverRouted(t *testing.T) {
	st := sampleState()
	st.Apps[0].ID = "00000000000000b2" // shop, recreated
	st.Nodes[0].Instances["shop"] = Instance{Port: 24417, Ready: true, AppID: "00000000000000a1"}
	st.Nodes[1].Instances["shop"] = Instance{Port: 24902, Ready: true, AppID: "00000000000000b2"}
	doc, _ := Derive(st, opts())
	for _, r := range doc.Routes {
		if r.Application != "shop" {
			continue
		}
		if len(r.Upstreams) != 1 || r.Upstreams[0].Node != "vps-b" {
			t.Fatalf("%s: upstreams %+v, want only vps-b's instance of the current incarnation", r.Host, r.Upstreams)
		}
	}
}
