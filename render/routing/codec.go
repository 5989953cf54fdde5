package routing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Marshal writes d as JSON, byte-stable: routes in host order (sorted on a copy when
// d holds them otherwise; d is never modified), map keys sorted (encoding/json does),
// nil lists written as [] so an empty list and a missing one cannot differ in bytes,
// no HTML escaping ('&' in a health path stays '&'), and no trailing newline.
//
// Marshal does not validate; a document from Derive or Decode is valid by
// construction.
func Marshal(d *Document) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(canonical(d)); err != nil {
		return nil, fmt.Errorf("encoding routing document: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonical returns d, or when d is not already in canonical form (routes sorted, no
// nil lists, no empty path maps) a shallow copy that is. Maps and upstream slices are
// shared, never written.
func canonical(d *Document) *Document {
	if isCanonical(d) {
		return d
	}
	out := *d
	out.Routes = slices.Clone(d.Routes)
	if out.Routes == nil {
		out.Routes = []Route{}
	}
	slices.SortStableFunc(out.Routes, compareRoutes)
	for i := range out.Routes {
		r := &out.Routes[i]
		if r.Upstreams == nil {
			r.Upstreams = []Upstream{}
		}
		if len(r.Paths) == 0 {
			r.Paths = nil
		}
	}
	if d.API != nil {
		api := *d.API
		if api.Hosts == nil {
			api.Hosts = []string{}
		}
		if api.Upstreams == nil {
			api.Upstreams = []Upstream{}
		}
		if api.Denied == nil {
			api.Denied = []string{}
		}
		out.API = &api
	}
	return &out
}

func isCanonical(d *Document) bool {
	if d.Routes == nil || !slices.IsSortedFunc(d.Routes, compareRoutes) {
		return false
	}
	for i := range d.Routes {
		r := &d.Routes[i]
		if r.Upstreams == nil || (r.Paths != nil && len(r.Paths) == 0) {
			return false
		}
	}
	if a := d.API; a != nil && (a.Hosts == nil || a.Upstreams == nil || a.Denied == nil) {
		return false
	}
	return true
}

// Decode reads a routing document. It tolerates unknown fields (a newer writer may add
// them), refuses any version but Version, and validates the result with
// Document.Validate. A validation failure is a *FieldError naming the field
// ("routes[2].paths[\"Bob\"]"; route indices count in host order).
//
// The result is in canonical form: routes sorted by host, nil lists made empty, empty
// path maps made nil, so Decode(Marshal(Decode(x))) equals Decode(x). The revision is
// opaque and not checked: a document served with ?prefer= keeps the revision of its
// un-reordered form.
func Decode(data []byte) (*Document, error) {
	var probe struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("decoding routing document: %w", err)
	}
	// Refuse another version before decoding it into v1 types.
	if err := validateVersion(probe.V); err != nil {
		return nil, err
	}
	var d Document
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decoding routing document: %w", err)
	}
	c := canonical(&d)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
