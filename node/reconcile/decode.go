package reconcile

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// tracked reports whether key is an object the fold reads (an application, a claim or
// a node record).
func tracked(key string) bool {
	return strings.HasPrefix(key, fleet.PrefixApps) || strings.HasPrefix(key, fleet.PrefixDomains) ||
		strings.HasPrefix(key, fleet.PrefixNodes)
}

// decode parses one object, tolerating unknown fields (a newer node may have written
// them). A malformed object is skipped and reported; it withdraws nothing else. It is
// treated as absent, not as its last good version, so that every node (a restarted one
// included) derives the same document from the same store.
func (r *Reconciler) decode(o store.Object) cachedObject {
	name := keyName(o.Key)
	var (
		v      any
		reason string
	)
	switch {
	case !strings.HasSuffix(o.Key, ".json"):
		reason = "not a .json object"
	case strings.HasPrefix(o.Key, fleet.PrefixApps):
		var a fleet.App
		if err := json.Unmarshal(o.Value, &a); err != nil {
			reason = "malformed JSON: " + err.Error()
		} else if a.Name != name {
			reason = fmt.Sprintf("name %q does not match key", a.Name)
		} else {
			v = a
		}
	case strings.HasPrefix(o.Key, fleet.PrefixDomains):
		var c fleet.Claim
		if err := json.Unmarshal(o.Value, &c); err != nil {
			reason = "malformed JSON: " + err.Error()
		} else if c.Host != name {
			reason = fmt.Sprintf("host %q does not match key", c.Host)
		} else {
			v = c
		}
	case strings.HasPrefix(o.Key, fleet.PrefixNodes):
		var n fleet.NodeRecord
		if err := json.Unmarshal(o.Value, &n); err != nil {
			reason = "malformed JSON: " + err.Error()
		} else if n.Name != name {
			reason = fmt.Sprintf("name %q does not match key", n.Name)
		} else {
			v = n
		}
	}
	if reason == "" {
		return cachedObject{etag: o.ETag, value: v}
	}
	r.log.Warn("skipping malformed store object", "object", o.Key, "reason", reason)
	return cachedObject{etag: o.ETag, bad: reason}
}

// skip is an object that could not be read as an object (store.ErrTooLarge): skipped
// and reported like a malformed one; the rest of the fleet is derived without it.
func (r *Reconciler) skip(key, etag string, err error) cachedObject {
	reason := fmt.Sprintf("not read: larger than %d bytes", store.MaxObjectSize)
	r.log.Warn("skipping malformed store object", "object", key, "reason", reason, "err", err)
	return cachedObject{etag: etag, bad: reason}
}
