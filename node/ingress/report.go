package ingress

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/scafo/ingress/internal/safetext"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/routing"
)

// ValidName is the rule of an ingress's name: 1..63 bytes of [a-z0-9.-], starting
// and ending with a letter or digit (a host name's first label, or a whole short host
// name). The layer-4 front checks its name setting with it.
func ValidName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%d bytes: want 1..63", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || (c == '-' || c == '.') && i > 0 && i < len(s)-1) {
			return fmt.Errorf("%q: want [a-z0-9.-], starting and ending with a letter or digit", s)
		}
	}
	return nil
}

// Applies says whether an ingress of kind reports what it applied (the provider
// plugin, the layer-4 front), rather than being recorded as served (an HTTP-provider
// Traefik).
func Applies(kind string) bool { return kind == api.KindPlugin || kind == api.KindFront }

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Report is one ingress's object in the store (ingresses/<name>.json).
type Report struct {
	Name string `json:"name"`
	// Kind is "plugin" or "front" (Serial/Revision applied) or "http" (served).
	Kind string `json:"kind"`
	// Node is the node whose polls it reported on (the node it polls).
	Node string `json:"node"`
	// Serial, Epoch and Revision name the configuration it holds; Serial 0: none yet.
	Serial   uint64 `json:"serial"`
	Epoch    string `json:"epoch,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Groups is the ?group= selection its polls ask for, canonical (sorted,
	// comma-separated; "" for every group): Revision is that selection's.
	Groups string `json:"groups,omitempty"`
	// Probe: an HTTP-provider Traefik that declares an applied probe
	// (api.HeaderAppliedProbe): Serial and Revision are what its callback said it
	// serves, not what it was served.
	Probe bool `json:"probe,omitempty"`
	// Seen is when that node last heard from it.
	Seen time.Time `json:"seen"`
	// Refused says why that node refused its last poll, or the report it carried
	// (Book.RefusePoll; at most MaxRefusedLen bytes): until a poll is recorded again it
	// is listed "refused", not "current", whatever it held before.
	Refused string `json:"refused,omitempty"`
}

// MaxRefusedLen bounds a report's Refused reason.
const MaxRefusedLen = 300

func (r Report) sameState(o Report) bool {
	return r.Name == o.Name && r.Kind == o.Kind && r.Node == o.Node && r.Serial == o.Serial &&
		r.Epoch == o.Epoch && r.Revision == o.Revision && r.Groups == o.Groups && r.Probe == o.Probe &&
		r.Refused == o.Refused
}

// decode checks one stored report; a malformed one is skipped with the reason
// (it hides nothing else). A report seen after horizon (this node's clock plus
// lostAfter) is skipped too: it would never be lost nor forgotten, and every write
// with ?wait=applied would wait for it.
func decode(o store.Object, horizon time.Time) viewObject {
	name := strings.TrimSuffix(strings.TrimPrefix(o.Key, Prefix), ".json")
	var rep Report
	bad := ""
	switch {
	case !strings.HasSuffix(o.Key, ".json"):
		bad = "not a .json object"
	case json.Unmarshal(o.Value, &rep) != nil:
		bad = "malformed JSON"
	case rep.Name != name:
		bad = fmt.Sprintf("name %.70q does not match key", rep.Name)
	case ValidName(rep.Name) != nil:
		bad = "invalid name"
	case ValidName(rep.Node) != nil:
		// Shown on the status page beside the name: a node's name is a DNS label, so held
		// to the name's rule, it can be neither long nor hold a control character.
		bad = "invalid node"
	case !Applies(rep.Kind) && rep.Kind != api.KindHTTP:
		bad = fmt.Sprintf("kind %.20q: want plugin, front or http", rep.Kind)
	case rep.Seen.IsZero():
		bad = "no seen time"
	case rep.Seen.After(horizon):
		bad = fmt.Sprintf("seen %s, in the future (beyond this node's clock plus ingresses.lostAfter)", rep.Seen.UTC().Format(time.RFC3339))
	case rep.Revision != "" && !isHex(rep.Revision, 32):
		bad = "malformed revision"
	case len(rep.Refused) > MaxRefusedLen:
		bad = fmt.Sprintf("refused: %d bytes, want at most %d", len(rep.Refused), MaxRefusedLen)
	case strings.ContainsFunc(rep.Refused, safetext.Unsafe):
		// A node writes a reason quoted (%q): a control or bidirectional character in
		// one is planted, and would reach /v1/status's warnings and terminals as is.
		bad = "refused: a control or bidirectional character"
	case rep.Groups != "" && !canonicalGroups(rep.Groups):
		bad = fmt.Sprintf("groups %.70q: want a ?group= selection, sorted", rep.Groups)
	}
	return viewObject{etag: o.ETag, rep: rep, bad: bad}
}

// canonicalGroups reports whether s is a valid group selection in its canonical spelling.
func canonicalGroups(s string) bool {
	gs, err := routing.ParseGroups(s)
	return err == nil && strings.Join(gs, ",") == s
}
