package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// passthroughCase is testdata/passthrough.json's document and options.
func passthroughCase(t *testing.T) loadedCase {
	t.Helper()
	for _, c := range loadCases(t) {
		if c.name == "passthrough" {
			return c
		}
	}
	t.Fatal("no testdata/passthrough.json")
	return loadedCase{}
}

// TestPassthroughHostsHaveATCPRouterAndNoHTTPRouter: every passthrough host has
// exactly one TCP router, HostSNI of its exact name with tls.passthrough on the
// render's entry points, to a service holding its first upstream (none when nothing is
// ready); no HTTP router's rule names a passthrough host, and no HTTP service points
// at a passthrough application's instance.
func TestPassthroughHostsHaveATCPRouterAndNoHTTPRouter(t *testing.T) {
	for _, prefer := range []string{"", "vps-a", "vps-b"} {
		c := passthroughCase(t)
		doc := c.doc
		if prefer != "" {
			var err error
			if doc, err = routing.Prefer(doc, prefer); err != nil {
				t.Fatal(err)
			}
		}
		out := mustTraefik(t, doc, c.opt)
		cfg := decodeStrict(t, out)
		if cfg.TCP == nil {
			t.Fatal("no tcp section")
		}
		n := 0
		for _, rt := range doc.Routes {
			if !rt.Passthrough {
				continue
			}
			n++
			r := cfg.TCP.Routers[hostRouterName(rt.Host)]
			if r == nil || r.Rule != "HostSNI(`"+rt.Host+"`)" || r.TLS == nil || !r.TLS.Passthrough ||
				!slices.Equal(r.EntryPoints, c.opt.EntryPoints) || r.Priority != PriorityHost {
				t.Fatalf("%s: TCP router %+v", rt.Host, r)
			}
			svc := cfg.TCP.Services[r.Service]
			if svc == nil || (svc.LoadBalancer == nil) == (len(rt.Upstreams) > 0) {
				t.Fatalf("%s: TCP service %q missing", rt.Host, r.Service)
			}
			var want []string
			if len(rt.Upstreams) > 0 {
				want = []string{rt.Upstreams[0].Address}
			}
			if svc.LoadBalancer == nil {
				if w := svc.Weighted; w == nil || len(w.Services) != 0 || w.HealthCheck == nil {
					t.Fatalf("%s: nothing ready, service %+v, want a weighted service of none", rt.Host, svc)
				}
			} else {
				var got []string
				for _, s := range svc.LoadBalancer.Servers {
					got = append(got, s.Address)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("prefer=%q %s: servers %v, want the first upstream %v", prefer, rt.Host, got, want)
				}
				want, tp := tcpTransport, cfg.TCP.ServersTransports[svc.LoadBalancer.ServersTransport]
				if rt.ProxyProtocol == 2 {
					want = tcpTransportProxyV2
				}
				if svc.LoadBalancer.ServersTransport != want || tp == nil || tp.DialTimeout != "2s" ||
					(tp.ProxyProtocol != nil) != (rt.ProxyProtocol == 2) {
					t.Fatalf("%s: serversTransport %q (%+v) with proxyProtocol %d", rt.Host, svc.LoadBalancer.ServersTransport, tp, rt.ProxyProtocol)
				}
			}
			for name, hr := range cfg.HTTP.Routers {
				if strings.Contains(hr.Rule, "`"+rt.Host+"`") {
					t.Fatalf("HTTP router %s routes passthrough host %s: %s", name, rt.Host, hr.Rule)
				}
			}
			for name, s := range cfg.HTTP.Services {
				if s.LoadBalancer == nil {
					continue
				}
				for _, u := range rt.Upstreams {
					for _, srv := range s.LoadBalancer.Servers {
						if strings.Contains(srv.URL, u.Address) {
							t.Fatalf("HTTP service %s points at passthrough instance %s", name, u.Address)
						}
					}
				}
			}
		}
		if len(cfg.TCP.Routers) != n || n == 0 {
			t.Fatalf("%d TCP routers for %d passthrough hosts", len(cfg.TCP.Routers), n)
		}
	}
}

// TestTheChallengeRouterNeverAnswersForAPassthroughHost: the fleet-wide HTTP-01
// router excludes every passthrough host (the application holds its own certificate;
// a challenge for its name must not reach the node API), and fleet certificates never
// put `tls: {}` on a passthrough host (it has no HTTP router at all). (Without
// passthrough hosts the rule is the bare path: TestACMEChallengeRouterOutranksEveryRouter.)
func TestTheChallengeRouterNeverAnswersForAPassthroughHost(t *testing.T) {
	c := passthroughCase(t)
	fc := &FleetCerts{HTTPEntryPoints: []string{"web"}, Managed: map[string]bool{"db.example.org": true, "shop.apps.example.com": true}}
	out := mustTraefikFleet(t, c.doc, c.opt, fc)
	cfg := decodeStrict(t, out)
	r := cfg.HTTP.Routers[routerACMEChallenge]
	if r == nil {
		t.Fatal("no challenge router")
	}
	want := "PathPrefix(`/.well-known/acme-challenge/`) && !HostRegexp(`^(?:cache\\.apps\\.example\\.com|db\\.apps\\.example\\.com|db\\.example\\.org|mq\\.apps\\.example\\.com)\\.?$`)"
	if r.Rule != want {
		t.Fatalf("challenge rule = %s\nwant %s", r.Rule, want)
	}
	if cfg.TCP.Routers[hostRouterName("db.example.org")].TLS.CertResolver != "" {
		t.Fatal("a passthrough router asks for a certificate")
	}
}
