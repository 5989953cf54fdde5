package routing

import (
	"errors"
	"strings"
	"testing"
)

// passthroughDocument is sampleDocument with go.tito.io's application terminating TLS
// itself (no path map targets it there, so the prefixes of ti.to are dropped).
func passthroughDocument() *Document {
	d := cloneDocument(sampleDocument())
	d.Routes[3].Paths = nil
	d.Routes[1].Passthrough = true
	d.Routes[1].HealthPath = ""
	d.Seal()
	return d
}

// TestPassthroughRoutesFollowTheirRules: a passthrough route is an exact host without a
// path map, no path map targets it, proxyProtocol is 0 or 2 and only on passthrough
// routes, and every route of one application agrees on both fields; each refusal names
// the field.
func TestPassthroughRoutesFollowTheirRules(t *testing.T) {
	if err := passthroughDocument().Validate(); err != nil {
		t.Fatalf("valid passthrough document refused: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(d *Document)
		field  string // "" when valid
	}{
		{"proxy protocol v2", func(d *Document) { d.Routes[1].ProxyProtocol = 2 }, ""},
		{"proxy protocol v1", func(d *Document) { d.Routes[1].ProxyProtocol = 1 }, "routes[1].proxyProtocol"},
		{"proxy protocol without passthrough", func(d *Document) { d.Routes[3].ProxyProtocol = 2 }, "routes[3].proxyProtocol"},
		{"wildcard passthrough", func(d *Document) {
			d.Routes[0].Passthrough, d.Routes[2].Passthrough = true, true
		}, "routes[0].passthrough"},
		{"path map on a passthrough route", func(d *Document) {
			d.Routes[1].Paths = map[string]string{"x": "ti.to"}
		}, "routes[1].paths"},
		{"path map targeting a passthrough route", func(d *Document) {
			d.Routes[3].Paths = map[string]string{"paulca": "go.tito.io"}
		}, `routes[3].paths["paulca"]`},
		{"health path on a passthrough route", func(d *Document) { d.Routes[1].HealthPath = "/healthz" }, "routes[1].healthPath"},
		{"an application's routes disagree", func(d *Document) { d.Routes[2].Passthrough = true }, "routes[2].passthrough"},
		{"an application's routes disagree on proxy protocol", func(d *Document) {
			d.Routes[0].Passthrough, d.Routes[2].Passthrough = false, false
			d.Routes[1].ProxyProtocol = 2
			d.Routes = append(d.Routes, Route{Host: "tls.example.net", Application: "tito-go", Passthrough: true,
				Upstreams: d.Routes[1].Upstreams})
		}, "routes[4].proxyProtocol"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := cloneDocument(passthroughDocument())
			tc.mutate(d)
			err := d.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			if fe.Field != tc.field {
				t.Fatalf("field = %q, want %q (%v)", fe.Field, tc.field, err)
			}
		})
	}
}

// TestPassthroughIsAdditive: a document without passthrough routes keeps its revision
// and its bytes (the fields are omitted), and turning passthrough or the PROXY protocol
// on moves the revision.
func TestPassthroughIsAdditive(t *testing.T) {
	plain := sampleDocument()
	b, err := Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "passthrough") || strings.Contains(string(b), "proxyProtocol") {
		t.Fatalf("a document without passthrough writes the fields: %s", b)
	}
	d := passthroughDocument()
	base := cloneDocument(d)
	base.Routes[1].Passthrough = false
	base.Seal()
	if d.Revision == base.Revision {
		t.Fatal("passthrough did not move the revision")
	}
	pp := cloneDocument(d)
	pp.Routes[1].ProxyProtocol = 2
	pp.Seal()
	if pp.Revision == d.Revision {
		t.Fatal("proxyProtocol did not move the revision")
	}
	b, _ = Marshal(pp)
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("decoding a passthrough document: %v", err)
	}
	if !got.Routes[1].Passthrough || got.Routes[1].ProxyProtocol != 2 {
		t.Fatalf("round trip lost the fields: %+v", got.Routes[1])
	}
}
