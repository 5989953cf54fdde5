package ingress

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
)

// TestAStoredReportIsCheckedFieldByField: decode skips a planted report whose name or
// node is no name (too long, a bidi control, upper case, empty), with a reason that does
// not repeat it; a valid one is kept whole.
func TestAStoredReportIsCheckedFieldByField(t *testing.T) {
	now := time.Now().UTC()
	good := Report{Name: "edge-1", Kind: api.KindPlugin, Node: "vps-b", Serial: 3, Seen: now}
	for _, c := range []struct {
		what string
		edit func(r *Report)
		bad  string // "" kept
	}{
		{"a valid report", func(r *Report) {}, ""},
		{"a node with dots", func(r *Report) { r.Node = "vps-b.eu" }, ""},
		{"a node of 3000 characters", func(r *Report) { r.Node = strings.Repeat("n", 3000) }, "invalid node"},
		{"a node with a bidi override", func(r *Report) { r.Node = "vps\u202eb" }, "invalid node"},
		{"a node with an isolate", func(r *Report) { r.Node = "\u2066vps-b\u2069" }, "invalid node"},
		{"an upper-case node", func(r *Report) { r.Node = "VPS-B" }, "invalid node"},
		{"no node", func(r *Report) { r.Node = "" }, "invalid node"},
		{"a node with markup", func(r *Report) { r.Node = "<b>x</b>" }, "invalid node"},
		// A reason a node wrote is quoted: a control or bidirectional character in one was
		// planted (hostile review 2, finding 4).
		{"a refusal's reason", func(r *Report) { r.Refused = `group "x": unknown` }, ""},
		{"a reason with a bidi override", func(r *Report) { r.Refused = "bad token\u202e" }, "refused: a control or bidirectional character"},
		{"a reason with an escape sequence", func(r *Report) { r.Refused = "\x1b]0;x\x07" }, "refused: a control or bidirectional character"},
		{"a reason with a newline", func(r *Report) { r.Refused = "a\nb" }, "refused: a control or bidirectional character"},
	} {
		rep := good
		c.edit(&rep)
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		o := decode(store.Object{Key: Prefix + rep.Name + ".json", Value: b, ETag: "e1"}, now.Add(time.Minute))
		switch {
		case o.bad != c.bad:
			t.Errorf("%s: skipped %q, want %q", c.what, o.bad, c.bad)
		case c.bad == "" && o.rep != rep:
			t.Errorf("%s: decoded %+v, want %+v", c.what, o.rep, rep)
		case len(o.bad) > 100:
			t.Errorf("%s: a reason of %d bytes repeats the planted value", c.what, len(o.bad))
		}
	}
}
