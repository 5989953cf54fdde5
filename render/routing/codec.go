package routing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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
// them), refuses any version but Version, and validates what a consumer relies on:
// route hosts (host or one-label wildcard, unique), application and node names,
// upstream addresses, path prefixes and targets (each target the exact host of a route
// in the document), at most MaxPaths prefixes per host, health paths, the API section.
// A validation failure is a *FieldError naming the field ("routes[2].paths[\"Bob\"]";
// route indices count in host order).
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
	if probe.V != Version {
		return nil, &FieldError{Field: "v", Value: strconv.Itoa(probe.V),
			Rule: "unsupported routing document version (this reader speaks " + strconv.Itoa(Version) + ")"}
	}
	var d Document
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decoding routing document: %w", err)
	}
	c := canonical(&d)
	if err := validateDocument(c); err != nil {
		return nil, err
	}
	return c, nil
}

func validateDocument(d *Document) error {
	hosts := make(map[string]struct{}, len(d.Routes))
	for i := range d.Routes {
		r := &d.Routes[i]
		f := fmt.Sprintf("routes[%d]", i)
		if err := ValidateCustomHost(f+".host", r.Host); err != nil {
			return err
		}
		if _, dup := hosts[r.Host]; dup {
			return &FieldError{Field: f + ".host", Value: r.Host, Rule: "duplicate host"}
		}
		hosts[r.Host] = struct{}{}
		if err := ValidateLabel(f+".application", r.Application); err != nil {
			return err
		}
		if err := validateUpstreams(f+".upstreams", r.Upstreams); err != nil {
			return err
		}
		if r.HealthPath != "" {
			if err := ValidateHealthPath(f+".healthPath", r.HealthPath); err != nil {
				return err
			}
		}
	}
	for i := range d.Routes {
		r := &d.Routes[i]
		if len(r.Paths) > MaxPaths {
			return &FieldError{Field: fmt.Sprintf("routes[%d].paths", i), Value: r.Host,
				Rule: fmt.Sprintf("has %d prefixes, more than %d", len(r.Paths), MaxPaths)}
		}
		for _, k := range sortedKeys(r.Paths) {
			f := fmt.Sprintf("routes[%d].paths[%q]", i, k)
			if err := ValidatePrefix(f, k); err != nil {
				return err
			}
			t := r.Paths[k]
			if err := ValidateHost(f, t); err != nil {
				return err
			}
			if _, ok := hosts[t]; !ok {
				return &FieldError{Field: f, Value: t, Rule: "target must be the host of a route in this document"}
			}
		}
	}
	if a := d.API; a != nil {
		for i, h := range a.Hosts {
			if err := ValidateHost(fmt.Sprintf("api.hosts[%d]", i), h); err != nil {
				return err
			}
		}
		if err := validateUpstreams("api.upstreams", a.Upstreams); err != nil {
			return err
		}
		for i, p := range a.Denied {
			if err := ValidateHealthPath(fmt.Sprintf("api.denied[%d]", i), p); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateUpstreams(field string, us []Upstream) error {
	for j, u := range us {
		f := fmt.Sprintf("%s[%d]", field, j)
		if err := ValidateLabel(f+".node", u.Node); err != nil {
			return err
		}
		if err := ValidateAddress(f+".address", u.Address); err != nil {
			return err
		}
		if u.APIPort < 0 || u.APIPort > 65535 {
			return &FieldError{Field: f + ".apiPort", Value: strconv.Itoa(u.APIPort), Rule: "must be 0..65535"}
		}
	}
	return nil
}
