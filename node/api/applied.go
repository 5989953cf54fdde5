package api

import "encoding/json"

// A write made with ?wait=applied&timeout=<duration> (DESIGN §11) is answered once
// every live ingress holds it (200), or at the timeout (202), in this envelope; the
// write's own answer is its "result".

// Applied is the answer of a write made with ?wait=applied.
type Applied struct {
	// Serial is the store serial that announced the write (for a write that changed
	// nothing: the store's serial when it answered).
	Serial uint64 `json:"serial"`
	// Applied: every live ingress holds it (200); false at the timeout (202). With no
	// live ingress at all it is true once this node publishes the write, and NoIngress
	// says that nothing was waited for.
	Applied bool `json:"applied"`
	// Ingresses is how many live ingresses were waited for.
	Ingresses int `json:"ingresses"`
	// NoIngress: no live ingress polls the fleet (Ingresses is 0), so "applied" checked
	// nothing an ingress serves; Detail says so ("no ingress polls this fleet"). A client
	// that waits to know the write is served treats it as not live (the CLI does, unless
	// --allow-no-ingress). Absent (false) otherwise. Added beside "applied" so that a
	// client reading "applied" alone keeps its meaning.
	NoIngress bool `json:"noIngress,omitempty"`
	// Behind are the live ingresses that did not report it in time.
	Behind []Ingress `json:"behind"`
	Detail string    `json:"detail,omitempty"`
	// Result is the write's own answer.
	Result json.RawMessage `json:"result"`
}
