package render

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func testProbe() AppliedProbe {
	return AppliedProbe{Ingress: "edge-1.eu", Revision: strings.Repeat("ab", 16), MAC: strings.Repeat("c3", 16),
		EntryPoint: "http://127.0.0.1:80", Node: "http://127.0.0.1:7400"}
}

// TestAppliedProbeAddsItsObjectsToEveryRender: on every golden case, the body with the
// probe is the same bytes every time, decodes strictly into the render's types and Traefik's schema, holds every
// router and service of the render unchanged plus the probe's two of each (and its
// middlewares, tls and tcp sections as they were: passthrough's TCP routers), and routes
// the probe's request (host scafo-applied.invalid, the callback path) to the callback
// router and nothing to the check router.
func TestAppliedProbeAddsItsObjectsToEveryRender(t *testing.T) {
	schema := loadTraefikSchemaOrNil(t)
	p := testProbe()
	cases := loadCases(t)
	if len(cases) == 0 {
		t.Fatal("no golden cases")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := mustTraefik(t, c.doc, c.opt)
			orig := bytes.Clone(body)
			out, err := WithAppliedProbe(body, p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, orig) {
				t.Fatal("the render's body was modified")
			}
			for range 5 {
				if again, _ := WithAppliedProbe(body, p); !bytes.Equal(again, out) {
					t.Fatal("two edits with the same probe differ")
				}
			}
			if !json.Valid(out) {
				t.Fatalf("not JSON: %s", out)
			}
			if schema != nil {
				if errs := schema.validate(out); len(errs) > 0 {
					t.Fatalf("Traefik's schema refuses it: %v", errs)
				}
			}
			before, after := decodeStrict(t, body), decodeStrict(t, out)
			checkAppliedObjects(t, before, after, p)
			routers := compileRouters(t, after)
			if got := route(t, routers, request{host: AppliedHost, routingPath: AppliedPath(p.Ingress, p.Revision, p.MAC)}); got != routerAppliedCallback {
				t.Fatalf("the callback request routes to %q", got)
			}
			if got := route(t, routers, request{host: AppliedHost, routingPath: appliedNever}); got == routerAppliedCheck {
				t.Fatal("the check router matched a request")
			}
			// Another revision's callback path is not routed by this body.
			other := AppliedPath(p.Ingress, strings.Repeat("0", 32), p.MAC)
			if got := route(t, routers, request{host: AppliedHost, routingPath: other}); got == routerAppliedCallback {
				t.Fatal("another revision's callback routes to the callback router")
			}
		})
	}
}

func checkAppliedObjects(t *testing.T, before, after Configuration, p AppliedProbe) {
	t.Helper()
	if before.HTTP == nil {
		before.HTTP = &HTTPConfiguration{}
	}
	for name, r := range before.HTTP.Routers {
		if !reflect.DeepEqual(after.HTTP.Routers[name], r) {
			t.Fatalf("router %s changed", name)
		}
	}
	for name, s := range before.HTTP.Services {
		if !reflect.DeepEqual(after.HTTP.Services[name], s) {
			t.Fatalf("service %s changed", name)
		}
	}
	if !reflect.DeepEqual(after.HTTP.Middlewares, before.HTTP.Middlewares) || !reflect.DeepEqual(after.TLS, before.TLS) ||
		!reflect.DeepEqual(after.TCP, before.TCP) {
		t.Fatal("middlewares, tls or tcp changed")
	}
	if len(after.HTTP.Routers) != len(before.HTTP.Routers)+2 || len(after.HTTP.Services) != len(before.HTTP.Services)+2 {
		t.Fatalf("want 2 routers and 2 services more: %d→%d, %d→%d", len(before.HTTP.Routers), len(after.HTTP.Routers),
			len(before.HTTP.Services), len(after.HTTP.Services))
	}
	cb := after.HTTP.Routers[routerAppliedCallback]
	if cb == nil || cb.Service != svcAppliedCallback || cb.Priority != PriorityACMEChallenge {
		t.Fatalf("callback router: %+v", cb)
	}
	ck := after.HTTP.Routers[routerAppliedCheck]
	if ck == nil || ck.Service != svcAppliedCheck {
		t.Fatalf("check router: %+v", ck)
	}
	svc := after.HTTP.Services[svcAppliedCheck]
	if svc == nil || svc.LoadBalancer == nil || len(svc.LoadBalancer.Servers) != 1 || svc.LoadBalancer.Servers[0].URL != p.EntryPoint {
		t.Fatalf("check service: %+v", svc)
	}
	hc := svc.LoadBalancer.HealthCheck
	if hc == nil || hc.Path != AppliedPath(p.Ingress, p.Revision, p.MAC) || hc.Hostname != AppliedHost || hc.Interval != AppliedInterval {
		t.Fatalf("check: %+v", hc)
	}
	if lb := svc.LoadBalancer; lb.PassHostHeader == nil || *lb.PassHostHeader {
		t.Fatal("the check service passes the host header: a request matching its router could loop")
	}
	back := after.HTTP.Services[svcAppliedCallback]
	if back == nil || back.LoadBalancer == nil || len(back.LoadBalancer.Servers) != 1 || back.LoadBalancer.Servers[0].URL != p.Node {
		t.Fatalf("callback service: %+v", back)
	}
}

// TestAppliedProbeIsByteStable: each of the probe's fields moves the bytes (the same
// probe gives the same bytes: TestAppliedProbeAddsItsObjectsToEveryRender).
func TestAppliedProbeIsByteStable(t *testing.T) {
	c := loadCases(t)[0]
	body := mustTraefik(t, c.doc, c.opt)
	p := testProbe()
	seen := map[string]string{}
	for name, q := range map[string]AppliedProbe{
		"base":       p,
		"revision":   {p.Ingress, strings.Repeat("cd", 16), p.MAC, p.EntryPoint, p.Node},
		"ingress":    {"edge-2", p.Revision, p.MAC, p.EntryPoint, p.Node},
		"mac":        {p.Ingress, p.Revision, strings.Repeat("d4", 16), p.EntryPoint, p.Node},
		"entrypoint": {p.Ingress, p.Revision, p.MAC, "http://127.0.0.1:8080", p.Node},
		"node":       {p.Ingress, p.Revision, p.MAC, p.EntryPoint, "http://10.0.0.2:7400"},
	} {
		b, err := WithAppliedProbe(body, q)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[string(b)]; dup {
			t.Fatalf("%s and %s give the same bytes", name, prev)
		}
		seen[string(b)] = name
	}
}

// TestAppliedProbeShapes: the bodies a render can be: empty, routers without services,
// other top-level keys; and the refusals.
func TestAppliedProbeShapes(t *testing.T) {
	p := testProbe()
	for _, body := range []string{
		`{}`,
		` { } `,
		`{"tls":{"certificates":[]}}`,
		`{"http":{}}`,
		`{"http":{"routers":{}}}`,
		`{"http":{"services":{"x":{"loadBalancer":{"servers":[{"url":"http://a:1"}],"passHostHeader":true}}}}}`,
		`{"http":{"routers":{"host-a":{"service":"x","rule":"Host(` + "`a`" + `) && Path(` + "`/\\\"}{`" + `)","priority":1}},"services":{"x":{"loadBalancer":{"servers":[{"url":"http://a:1"}],"passHostHeader":true}}}},"tls":{}}`,
	} {
		out, err := WithAppliedProbe([]byte(body), p)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var before, after Configuration
		if err := json.Unmarshal([]byte(body), &before); err != nil {
			t.Fatal(err)
		}
		after = decodeStrict(t, out)
		checkAppliedObjects(t, before, after, p)
	}
	for _, body := range []string{``, `[]`, `{"http":[]}`, `{"http":{"routers":[]}}`, `{"http":{"routers":{"a":{}`,
		`{"http":{"routers":{"applied-callback":{}}}}`, `{"http":{"services":{"applied-check":{}}}}`} {
		if _, err := WithAppliedProbe([]byte(body), p); err == nil {
			t.Errorf("%q: accepted", body)
		}
	}
	for _, q := range []AppliedProbe{
		{"", p.Revision, p.MAC, p.EntryPoint, p.Node},
		{"Edge", p.Revision, p.MAC, p.EntryPoint, p.Node},
		{"a/b", p.Revision, p.MAC, p.EntryPoint, p.Node},
		{p.Ingress, "XYZ", p.MAC, p.EntryPoint, p.Node},
		{p.Ingress, p.Revision, "", p.EntryPoint, p.Node},
		{p.Ingress, p.Revision, p.MAC, "ftp://x:1", p.Node},
		{p.Ingress, p.Revision, p.MAC, "http://x:1/path", p.Node},
		{p.Ingress, p.Revision, p.MAC, p.EntryPoint, "http://x:1/"},
		{p.Ingress, p.Revision, p.MAC, p.EntryPoint, "http://u@x:1"},
	} {
		if _, err := WithAppliedProbe([]byte(`{}`), q); err == nil {
			t.Errorf("%+v: accepted", q)
		}
	}
}
