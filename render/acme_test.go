package render

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// acmeDoc: a platform host, a custom domain with a path map, a custom wildcard and the
// API apex.
func acmeDoc() *routing.Document {
	ups := []routing.Upstream{{Node: "a", Address: "10.83.0.1:24000", APIPort: 7400}, {Node: "b", Address: "10.83.0.2:24000", APIPort: 7400}}
	return &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "*.shop.example.org", Application: "shop", Upstreams: ups},
		{Host: "go.tito.io", Application: "go", Upstreams: ups},
		{Host: "shop.apps.example.com", Application: "shop", Upstreams: ups},
		{Host: "ti.to", Application: "tito", Upstreams: ups, Paths: map[string]string{"paulca": "go.tito.io"}},
	}, API: &routing.API{Hosts: []string{"apps.example.com"}, Denied: routing.DeniedAPIPrefixes,
		Upstreams: []routing.Upstream{{Node: "a", Address: "10.83.0.1:7400", APIPort: 7400}, {Node: "b", Address: "10.83.0.2:7400", APIPort: 7400}}}}
}

func acmeCerts() *FleetCerts {
	return &FleetCerts{
		HTTPEntryPoints: []string{"web"},
		Managed:         map[string]bool{"apps.example.com": true, "go.tito.io": true, "shop.apps.example.com": true, "ti.to": true},
		Certificates: []Certificate{
			{Names: []string{"ti.to"}, CertFile: "-----BEGIN CERTIFICATE-----\nT\n-----END CERTIFICATE-----\n", KeyFile: "-----BEGIN PRIVATE KEY-----\nt\n-----END PRIVATE KEY-----\n"},
			{Names: []string{"apps.example.com"}, CertFile: "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n", KeyFile: "-----BEGIN PRIVATE KEY-----\na\n-----END PRIVATE KEY-----\n"},
			{Names: []string{"go.tito.io"}, CertFile: "-----BEGIN CERTIFICATE-----\nG\n-----END CERTIFICATE-----\n", KeyFile: "-----BEGIN PRIVATE KEY-----\ng\n-----END PRIVATE KEY-----\n"},
		},
	}
}

// TestACMEChallengeRouterOutranksEveryRouter: one challenge router, on the HTTP entry
// points, to the API chain, at the highest priority Traefik accepts from a provider,
// above every other router of the render.
func TestACMEChallengeRouterOutranksEveryRouter(t *testing.T) {
	out := mustTraefikFleet(t, acmeDoc(), Options{EntryPoints: []string{"websecure"}}, acmeCerts())
	cfg := decodeStrict(t, out)
	r := cfg.HTTP.Routers[routerACMEChallenge]
	if r == nil {
		t.Fatalf("no %s router: %s", routerACMEChallenge, out)
	}
	if r.Rule != "PathPrefix(`/.well-known/acme-challenge/`)" || r.Service != svcAPI || !slices.Equal(r.EntryPoints, []string{"web"}) || r.TLS != nil {
		t.Fatalf("challenge router %+v", r)
	}
	if r.Priority != math.MaxInt-1000 {
		t.Fatalf("priority %d, want Traefik's max user priority %d", r.Priority, math.MaxInt-1000)
	}
	for name, o := range cfg.HTTP.Routers {
		if name != routerACMEChallenge && o.Priority >= r.Priority {
			t.Errorf("router %s priority %d is not below the challenge router's", name, o.Priority)
		}
	}
	if cfg.HTTP.Services[svcAPI] == nil {
		t.Fatal("the challenge router's service is not rendered")
	}
	// One API upstream (a one-node fleet): the API chain is the leaf itself, and the
	// challenge router must name that leaf, not a service that is never rendered (Traefik
	// would refuse the router and every HTTP-01 validation would get 404).
	one := acmeDoc()
	one.API.Upstreams = one.API.Upstreams[:1]
	out = mustTraefikFleet(t, one, Options{}, acmeCerts())
	cfg = decodeStrict(t, out)
	r = cfg.HTTP.Routers[routerACMEChallenge]
	if r == nil || cfg.HTTP.Services[r.Service] == nil {
		t.Fatalf("one API upstream: the challenge router %+v names a service that is not rendered: %s", r, out)
	}
	if api := cfg.HTTP.Routers[apiRouterName("apps.example.com")]; api == nil || api.Service != r.Service {
		t.Fatalf("one API upstream: the challenge router's service %q is not the API router's (%+v)", r.Service, api)
	}
	// Without an API section there is no chain to send a challenge to: no router.
	doc := acmeDoc()
	doc.API = nil
	out = mustTraefikFleet(t, doc, Options{}, acmeCerts())
	if strings.Contains(string(out), routerACMEChallenge) {
		t.Fatal("a challenge router without an API chain")
	}
}

// TestFleetCertificatesRenderSortedInlineAndByteStable: managed names' routers carry
// tls {} (no resolver), the wildcard keeps the resolver, tls.certificates is sorted by
// name whatever the input order, the PEM is inline, and the fast encoder writes what
// encoding/json writes.
func TestFleetCertificatesRenderSortedInlineAndByteStable(t *testing.T) {
	opt := Options{EntryPoints: []string{"websecure"}, CertResolver: "le"}
	want := mustTraefikFleet(t, acmeDoc(), opt, acmeCerts())
	for range 20 {
		fc := acmeCerts()
		rand.Shuffle(len(fc.Certificates), func(i, j int) { fc.Certificates[i], fc.Certificates[j] = fc.Certificates[j], fc.Certificates[i] })
		got := mustTraefikFleet(t, acmeDoc(), opt, fc)
		if string(got) != string(want) {
			t.Fatalf("bytes depend on the certificates' order:\n%s\n%s", got, want)
		}
	}
	cfg := decodeStrict(t, want)
	for name, r := range cfg.HTTP.Routers {
		switch {
		case name == routerACMEChallenge:
		case strings.HasPrefix(name, "host-~2a"): // the custom wildcard
			if r.TLS == nil || r.TLS.CertResolver != "le" {
				t.Errorf("%s: wildcard lost its resolver: %+v", name, r.TLS)
			}
		default:
			if r.TLS == nil || r.TLS.CertResolver != "" || len(r.TLS.Domains) != 0 {
				t.Errorf("%s: tls %+v, want {}", name, r.TLS)
			}
		}
	}
	if !strings.Contains(string(want), `"tls":{}`) {
		t.Fatal(`no "tls":{} in the render`)
	}
	var names []string
	for _, c := range cfg.TLS.Certificates {
		names = append(names, c.CertFile[len("-----BEGIN CERTIFICATE-----\n"):][:1])
		if !strings.HasPrefix(c.KeyFile, "-----BEGIN PRIVATE KEY-----\n") {
			t.Fatalf("key not inline: %q", c.KeyFile)
		}
	}
	if strings.Join(names, "") != "AGT" { // apps.example.com, go.tito.io, ti.to
		t.Fatalf("certificates in order %v, want sorted by name", names)
	}
	std, err := marshalStd(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(std) != string(want) {
		t.Fatalf("fast encoder and encoding/json differ:\n%s\n%s", want, std)
	}
	if s := loadTraefikSchemaOrNil(t); s != nil {
		for _, v := range s.validate(want) {
			t.Error(v)
		}
	}
	// No fleet certificates: the render is exactly Traefik's.
	plain, _ := Traefik(acmeDoc(), opt)
	none, _ := TraefikFleet(acmeDoc(), opt, nil)
	if string(plain) != string(none) {
		t.Fatal("TraefikFleet(nil) differs from Traefik")
	}
}
