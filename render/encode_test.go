package render

import (
	"bytes"
	"testing"

	"github.com/traefik/genconf/dynamic"
	"github.com/traefik/genconf/dynamic/types"

	"github.com/scafo/ingress/render/routing"
)

// TestFastEncoderMatchesEncodingJSON holds encodeConfiguration to encoding/json's exact
// bytes on every golden case, on generated fleets in every router form, and on values
// with every field and awkward strings set.
func TestFastEncoderMatchesEncodingJSON(t *testing.T) {
	check := func(name string, cfg *Configuration) {
		t.Helper()
		want, err := marshalStd(cfg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeConfiguration(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			i := firstDiff(got, want)
			t.Fatalf("%s: fast encoding differs at byte %d:\n got  …%s\n want …%s", name, i, excerpt(got, i), excerpt(want, i))
		}
	}
	build := func(doc *routing.Document, opt Options) *Configuration {
		o, err := opt.resolve()
		if err != nil {
			t.Fatal(err)
		}
		r := renderer{opt: o, routers: map[string]*dynamic.Router{}, services: map[string]*Service{}, tls: map[string]*dynamic.RouterTLSConfig{}}
		if err := r.render(doc); err != nil {
			t.Fatal(err)
		}
		cfg := &Configuration{}
		if len(r.routers) > 0 {
			cfg.HTTP = &HTTPConfiguration{Routers: r.routers, Services: r.services}
		}
		return cfg
	}
	cases := append(loadCases(t), generatedCases(t)...)
	for _, c := range cases {
		check(c.name, build(c.doc, c.opt))
	}
	if len(cases) < 12 {
		t.Fatalf("only %d cases found", len(cases))
	}
	check("empty", &Configuration{})

	// Every field the fast path writes, with strings encoding/json escapes.
	f, tr := false, true
	odd := "a\"b\\c\n\r\t\x01\x1f<>&\u2028\u2029é\xff`"
	check("odd", &Configuration{HTTP: &HTTPConfiguration{
		Routers: map[string]*dynamic.Router{odd: {EntryPoints: []string{odd, "web"}, Service: odd, Rule: odd, Priority: -3,
			TLS: &dynamic.RouterTLSConfig{CertResolver: odd, Domains: []types.Domain{{Main: odd, SANs: []string{odd}}, {}}}}},
		Services: map[string]*Service{
			odd: {LoadBalancer: &LoadBalancer{ServersLoadBalancer: dynamic.ServersLoadBalancer{
				Servers:        []dynamic.Server{{URL: odd}, {}},
				HealthCheck:    &dynamic.ServerHealthCheck{Scheme: odd, Path: odd, Method: odd, Port: 7, Interval: odd, Timeout: odd, Hostname: odd, FollowRedirects: &f},
				PassHostHeader: &tr}, PassiveHealthCheck: &PassiveHealthCheck{FailureWindow: odd, MaxFailedAttempts: 2}}},
			"b": {LoadBalancer: &LoadBalancer{ServersLoadBalancer: dynamic.ServersLoadBalancer{HealthCheck: &dynamic.ServerHealthCheck{}}, PassiveHealthCheck: &PassiveHealthCheck{}}},
			"c": {Failover: &dynamic.Failover{Service: odd, Fallback: odd, HealthCheck: &dynamic.HealthCheck{}}},
			"d": {Failover: &dynamic.Failover{}},
			"e": {},
		},
	}})
	// Fields the fast path does not write fall back to encoding/json.
	check("fallback", &Configuration{HTTP: &HTTPConfiguration{Routers: map[string]*dynamic.Router{"r": {Middlewares: []string{"m"}}}}})
}
