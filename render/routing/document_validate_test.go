package routing

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func TestDocumentValidate(t *testing.T) {
	up := func(node, addr string) []Upstream { return []Upstream{{Node: node, Address: addr, APIPort: 7400}} }
	// sampleDocument's routes, in host order: 0 *.shop.example.org (shop), 1 go.tito.io
	// (tito-go), 2 shop.apps.example.com (shop), 3 ti.to (tito-classic, paths → go.tito.io).
	manyPaths := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("p%05d", i)] = "go.tito.io"
		}
		return m
	}
	// pass makes go.tito.io's application terminate TLS itself (makePassthrough), then more.
	pass := func(more func(d *Document)) func(d *Document) {
		return func(d *Document) { makePassthrough(d); more(d) }
	}
	mws := func(mw ...string) func(*Document) { // both routes of shop
		return func(d *Document) { d.Routes[0].Middlewares, d.Routes[2].Middlewares = mw, mw }
	}
	tests := []struct {
		name      string
		mutate    func(d *Document) // applied to a deep copy of sampleDocument
		doc       *Document         // instead of the sample, when set
		wantField string
		wantErr   string // substring of the error; "" means valid
	}{
		// Valid documents.
		{name: "the docs/design.md §2 sample", mutate: func(*Document) {}},
		{name: "nothing to route", doc: &Document{V: 1}},
		{name: "api only", doc: &Document{V: 1, API: &API{Hosts: []string{"apps.example.com"},
			Upstreams: up("vps-a", "10.83.0.1:7400")}}},
		{name: "route without upstreams (fail closed)", mutate: func(d *Document) { d.Routes[1].Upstreams = nil }},
		{name: "empty path map", mutate: func(d *Document) { d.Routes[3].Paths = map[string]string{} }},
		{name: "exactly MaxPaths prefixes", mutate: func(d *Document) { d.Routes[3].Paths = manyPaths(MaxPaths) }},
		{name: "prefix targets its own host", mutate: func(d *Document) { d.Routes[3].Paths["self"] = "ti.to" }},
		{name: "api port unknown", mutate: func(d *Document) { d.Routes[1].Upstreams[0].APIPort = 0 }},
		{name: "ipv6 upstream", mutate: func(d *Document) { d.Routes[1].Upstreams[0].Address = "[fd00::1]:80" }},
		{name: "no api section", mutate: func(d *Document) { d.API = nil }},
		{name: "upstream order is free (prefer reorders)", mutate: func(d *Document) {
			u := d.API.Upstreams
			u[0], u[2] = u[2], u[0]
		}},
		{name: "custom wildcard covering an api apex", mutate: func(d *Document) { d.Routes[0].Host = "*.example.com" }},
		{name: "revision is not checked", mutate: func(d *Document) { d.Revision = "" }},
		{name: "passthrough", mutate: pass(func(*Document) {})},
		{name: "passthrough with proxy protocol v2", mutate: pass(func(d *Document) { d.Routes[1].ProxyProtocol = 2 })},
		{name: "middlewares on both routes of shop", mutate: mws("auth@file", "www@file")},

		// The document as a whole.
		{name: "nil document", doc: nil, wantErr: "routing document is nil"},
		{name: "no version", mutate: func(d *Document) { d.V = 0 }, wantField: "v", wantErr: "unsupported routing document version"},
		{name: "version 2", mutate: func(d *Document) { d.V = 2 }, wantField: "v", wantErr: `v "2": unsupported`},

		// Route hosts.
		{name: "uppercase host", mutate: func(d *Document) { d.Routes[1].Host = "Go.tito.io" },
			wantField: "routes[1].host", wantErr: "must be lowercase"},
		{name: "host with port", mutate: func(d *Document) { d.Routes[3].Host = "ti.to:443" },
			wantField: "routes[3].host", wantErr: "must not contain a port"},
		{name: "host with backtick", mutate: func(d *Document) { d.Routes[1].Host = "go`.tito.io" },
			wantField: "routes[1].host", wantErr: "may contain only"},
		{name: "two-label wildcard", mutate: func(d *Document) { d.Routes[0].Host = "*.*.example.org" },
			wantField: "routes[0].host", wantErr: "first label"},
		{name: "duplicate host", mutate: func(d *Document) { d.Routes[2].Host = "go.tito.io" },
			wantField: "routes[2].host", wantErr: "duplicate host"},
		{name: "routes out of order", mutate: func(d *Document) { d.Routes[1], d.Routes[2] = d.Routes[2], d.Routes[1] },
			wantField: "routes[2].host", wantErr: `must be sorted by host: sorts before routes[1].host "shop.apps.example.com"`},

		// Applications, upstreams, health paths.
		{name: "application not a label", mutate: func(d *Document) { d.Routes[1].Application = "tito.go" },
			wantField: "routes[1].application", wantErr: "single DNS label"},
		{name: "node not a label", mutate: func(d *Document) { d.Routes[1].Upstreams[0].Node = "vps@b" },
			wantField: "routes[1].upstreams[0].node", wantErr: "may contain only"},
		{name: "address not ip:port", mutate: func(d *Document) { d.Routes[3].Upstreams[2].Address = "vps-b:24500" },
			wantField: "routes[3].upstreams[2].address", wantErr: "must be ip:port"},
		{name: "address not canonical", mutate: func(d *Document) { d.Routes[1].Upstreams[0].Address = "[FD00::1]:80" },
			wantField: "routes[1].upstreams[0].address", wantErr: `canonical form "[fd00::1]:80"`},
		{name: "address port 0", mutate: func(d *Document) { d.Routes[1].Upstreams[0].Address = "10.83.0.2:0" },
			wantField: "routes[1].upstreams[0].address", wantErr: "port must be 1..65535"},
		{name: "api port out of range", mutate: func(d *Document) { d.Routes[1].Upstreams[0].APIPort = 65536 },
			wantField: "routes[1].upstreams[0].apiPort", wantErr: "must be 0..65535"},
		{name: "negative api port", mutate: func(d *Document) { d.Routes[1].Upstreams[0].APIPort = -1 },
			wantField: "routes[1].upstreams[0].apiPort", wantErr: "must be 0..65535"},
		{name: "relative health path", mutate: func(d *Document) { d.Routes[1].HealthPath = "healthz" },
			wantField: "routes[1].healthPath", wantErr: "must be an absolute path"},
		{name: "hosts of one app disagree on upstreams", mutate: func(d *Document) { d.Routes[2].Upstreams = d.Routes[2].Upstreams[:1] },
			wantField: "routes[2].upstreams", wantErr: "differ from routes[0].upstreams of the same application"},
		{name: "hosts of one app disagree on upstream order", mutate: func(d *Document) {
			u := d.Routes[2].Upstreams
			u[0], u[1] = u[1], u[0]
		}, wantField: "routes[2].upstreams", wantErr: "differ from routes[0].upstreams"},
		{name: "hosts of one app disagree on health path", mutate: func(d *Document) { d.Routes[2].HealthPath = "/healthz" },
			wantField: "routes[2].healthPath", wantErr: "differs from routes[0].healthPath"},

		// Path maps.
		{name: "too many prefixes", mutate: func(d *Document) { d.Routes[3].Paths = manyPaths(MaxPaths + 1) },
			wantField: "routes[3].paths", wantErr: fmt.Sprintf("has %d prefixes, more than %d", MaxPaths+1, MaxPaths)},
		{name: "prefix with a slash", mutate: func(d *Document) { d.Routes[3].Paths["/paulca"] = "go.tito.io" },
			wantField: `routes[3].paths["/paulca"]`, wantErr: "without '/'"},
		{name: "uppercase prefix", mutate: func(d *Document) { d.Routes[3].Paths["pAulca"] = "go.tito.io" },
			wantField: `routes[3].paths["pAulca"]`, wantErr: "must be lowercase"},
		{name: "dot-dot prefix", mutate: func(d *Document) { d.Routes[3].Paths[".."] = "go.tito.io" },
			wantField: `routes[3].paths[".."]`, wantErr: "dot segment"},
		{name: "regex in prefix", mutate: func(d *Document) { d.Routes[3].Paths["a|b"] = "go.tito.io" },
			wantField: `routes[3].paths["a|b"]`, wantErr: "may contain only"},
		{name: "wildcard target", mutate: func(d *Document) { d.Routes[3].Paths["shop"] = "*.shop.example.org" },
			wantField: `routes[3].paths["shop"]`, wantErr: "must not contain a wildcard"},
		{name: "uppercase target", mutate: func(d *Document) { d.Routes[3].Paths["bigcorp"] = "GO.tito.io" },
			wantField: `routes[3].paths["bigcorp"]`, wantErr: "must be lowercase"},
		{name: "target without a route", mutate: func(d *Document) { d.Routes[3].Paths["bigcorp"] = "eu.tito.io" },
			wantField: `routes[3].paths["bigcorp"]`, wantErr: "target must be the host of a route in this document"},
		{name: "smallest failing prefix is reported", mutate: func(d *Document) {
			for _, k := range []string{"zz", "b/", "mm", "a/", "c/"} {
				d.Routes[3].Paths[k] = "go.tito.io"
			}
			d.Routes[3].Paths["0x"] = "nowhere.example"
		}, wantField: `routes[3].paths["0x"]`, wantErr: "target must be the host"},

		// Passthrough routes: an exact host without a path map, no path map targets one,
		// proxyProtocol 0 or 2 and only on them, every route of an application agrees.
		{name: "proxy protocol v1", mutate: pass(func(d *Document) { d.Routes[1].ProxyProtocol = 1 }), wantField: "routes[1].proxyProtocol"},
		{name: "proxy protocol without passthrough", mutate: pass(func(d *Document) { d.Routes[3].ProxyProtocol = 2 }), wantField: "routes[3].proxyProtocol"},
		{name: "wildcard passthrough", mutate: pass(func(d *Document) { d.Routes[0].Passthrough, d.Routes[2].Passthrough = true, true }),
			wantField: "routes[0].passthrough"},
		{name: "path map on a passthrough route", mutate: pass(func(d *Document) { d.Routes[1].Paths = map[string]string{"x": "ti.to"} }),
			wantField: "routes[1].paths"},
		{name: "path map targeting a passthrough route", mutate: pass(func(d *Document) { d.Routes[3].Paths = map[string]string{"paulca": "go.tito.io"} }),
			wantField: `routes[3].paths["paulca"]`},
		{name: "health path on a passthrough route", mutate: pass(func(d *Document) { d.Routes[1].HealthPath = "/healthz" }), wantField: "routes[1].healthPath"},
		{name: "an application's routes disagree on passthrough", mutate: pass(func(d *Document) { d.Routes[2].Passthrough = true }),
			wantField: "routes[2].passthrough"},
		{name: "an application's routes disagree on proxy protocol", mutate: pass(func(d *Document) {
			d.Routes[1].ProxyProtocol = 2
			d.Routes = append(d.Routes, Route{Host: "tls.example.net", Application: "tito-go", Passthrough: true, Upstreams: d.Routes[1].Upstreams})
		}), wantField: "routes[4].proxyProtocol"},

		// Middlewares: every route of an application the same list in the same order, a
		// passthrough route none, each reference valid (TestMiddlewareReferencesAreValidated).
		{name: "a bad middleware reference", mutate: mws("auth"), wantField: "routes[0].middlewares[0]"},
		{name: "a middleware twice", mutate: mws("auth@file", "auth@file"), wantField: "routes[0].middlewares[1]"},
		{name: "middlewares on one route of shop", mutate: func(d *Document) { d.Routes[2].Middlewares = []string{"auth@file"} },
			wantField: "routes[2].middlewares"},
		{name: "middlewares in another order", mutate: func(d *Document) {
			d.Routes[0].Middlewares, d.Routes[2].Middlewares = []string{"a@file", "b@file"}, []string{"b@file", "a@file"}
		}, wantField: "routes[2].middlewares"},
		{name: "middlewares on a passthrough route", mutate: pass(func(d *Document) { d.Routes[1].Middlewares = []string{"auth@file"} }),
			wantField: "routes[1].middlewares"},

		// The API section.
		{name: "api host wildcard", mutate: func(d *Document) { d.API.Hosts = []string{"*.example.com"} },
			wantField: "api.hosts[0]", wantErr: "must not contain a wildcard"},
		{name: "api host one label", mutate: func(d *Document) { d.API.Hosts = []string{"localhost"} },
			wantField: "api.hosts[0]", wantErr: "at least two labels"},
		{name: "api hosts out of order", mutate: func(d *Document) { d.API.Hosts = []string{"b.example", "a.example"} },
			wantField: "api.hosts[1]", wantErr: "api hosts must be sorted"},
		{name: "api host twice", mutate: func(d *Document) { d.API.Hosts = []string{"a.example", "a.example"} },
			wantField: "api.hosts[1]", wantErr: "duplicate host"},
		{name: "api host claimed by an application", mutate: func(d *Document) { d.API.Hosts = []string{"apps.example.com", "ti.to"} },
			wantField: "api.hosts[1]", wantErr: "is the host of routes[3]"},
		{name: "api upstream address", mutate: func(d *Document) { d.API.Upstreams[2].Address = "" },
			wantField: "api.upstreams[2].address", wantErr: "must be ip:port"},
		{name: "api upstream node", mutate: func(d *Document) { d.API.Upstreams[0].Node = "" },
			wantField: "api.upstreams[0].node", wantErr: "must not be empty"},
		{name: "api denied not absolute", mutate: func(d *Document) { d.API.Denied = []string{"/v1/storage", "v1/ingress"} },
			wantField: "api.denied[1]", wantErr: "must be an absolute path"},
		{name: "api denied with a query", mutate: func(d *Document) { d.API.Denied = []string{"/v1/x?y"} },
			wantField: "api.denied[0]", wantErr: "no query"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.doc
			if tc.mutate != nil {
				d = cloneDocument(sampleDocument())
				tc.mutate(d)
			}
			err := d.Validate()
			if tc.wantErr == "" && tc.wantField == "" {
				ok := d.FrameOK() // with RouteOK, what render.Incremental checks instead
				for i := range d.Routes {
					ok = ok && d.RouteOK(i)
				}
				if err != nil || !ok {
					t.Fatalf("Validate() = %v (FrameOK and RouteOK: %v), want valid", err, ok)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() accepted the document, want an error naming %q containing %q", tc.wantField, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %q, want it to contain %q", err, tc.wantErr)
			}
			field, ok := InvalidField(err)
			if tc.wantField == "" {
				if ok {
					t.Fatalf("error %q names field %q, want none", err, field)
				}
				return
			}
			if !ok || field != tc.wantField || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %q names field %q (%v), want %q", err, field, ok, tc.wantField)
			}
			if !strings.HasPrefix(err.Error(), tc.wantField+" ") {
				t.Fatalf("error %q does not start with the field name %q", err, tc.wantField)
			}
			// What render.Incremental checks instead: RouteOK refuses the route too, unless
			// the error relates routes to one another (RouteOK leaves that to its caller).
			var i int
			across := regexp.MustCompile(`duplicate host|must be sorted|of the same application`).MatchString(err.Error())
			if _, scanErr := fmt.Sscanf(tc.wantField, "routes[%d]", &i); scanErr == nil && !across && d.RouteOK(i) {
				t.Fatalf("RouteOK(%d) accepts the route Validate refuses: %v", i, err)
			}
		})
	}
}

// TestDecodeValidatesWithValidate: Decode refuses exactly what Validate refuses, once
// the document is in canonical form (Decode sorts routes, so order is not an error).
func TestDecodeValidatesWithValidate(t *testing.T) {
	d := sampleDocument()
	d.Routes[3].Paths["x"] = "eu.tito.io"
	b := mustMarshal(t, d)
	_, decErr := Decode(b)
	valErr := d.Validate()
	if decErr == nil || valErr == nil || decErr.Error() != valErr.Error() {
		t.Fatalf("Decode: %v\nValidate: %v\nwant the same error", decErr, valErr)
	}
}
