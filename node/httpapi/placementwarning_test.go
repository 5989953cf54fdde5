package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAPlacementOnANodeNoRecordNamesIsWarnedAtItsWrite: an application placed on a node
// no node record names (a typo, or a node not started yet) is accepted, and its write
// says so in "warnings", beside the write domain's own (fleetwrite's AppWarnings: here a
// group without a platform domain); a placement on known nodes answers without the field.
func TestAPlacementOnANodeNoRecordNamesIsWarnedAtItsWrite(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	put := func(code int, app, body string) []string {
		var a struct {
			Name     string   `json:"name"`
			Warnings []string `json:"warnings"`
		}
		raw := n.Must(code, "PUT", "/v1/apps/"+app, ipAdmin, body)
		if err := json.Unmarshal(raw, &a); err != nil || a.Name != app {
			t.Fatalf("PUT %s answered %s (%v)", app, raw, err)
		}
		if a.Warnings == nil && strings.Contains(string(raw), "warnings") {
			t.Errorf("PUT %s: %s", app, raw)
		}
		return a.Warnings
	}
	if w := put(201, "shop", `{"account":"acme","placement":["vps-a"]}`); len(w) != 0 {
		t.Errorf("a placement on this node: warnings %q", w)
	}
	for _, code := range []int{201, 200} { // create, then the identical update
		w := put(code, "blog", `{"account":"acme","placement":["vps-a","vsp-b"]}`)
		if len(w) != 1 || !strings.Contains(w[0], `node "vsp-b"`) || !strings.Contains(w[0], "no node record names") {
			t.Errorf("a placement on vsp-b, which no record names (%d): warnings %q", code, w)
		}
	}
	w := put(201, "eu", `{"account":"acme","placement":["vps-a","vsp-b"],"ingress":{"group":"us-2"}}`)
	if len(w) != 2 || !strings.Contains(w[0], "no platform host") || !strings.Contains(w[1], `node "vsp-b"`) {
		t.Errorf("group us-2, which no platform domain is in, placed on vsp-b: warnings %q, want both", w)
	}
}
