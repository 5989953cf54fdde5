package render

import (
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// apexDeniedSpellings must never reach the node API through the public apex;
// apexAllowedPaths must. They are also golden probes of the api-apex case, so
// TestTraefikDecodesTheRender replays them through Traefik's own entry point and muxer.
var (
	apexDeniedSpellings = []string{
		"/v1/storage", "/v1/storage/", "/v1/storage/certificates/x", "/v1/%73torage/x",
		"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/ingress/traefik?prefer=self",
		"/v1/ingress/anything", "/v1/ingress/", "/v1/ingress", "/v1/ingress?x",
		"/v1/ingress%2Ftraefik", "/v1/ingress%2ftraefik", "/v1/%69ngress/traefik",
		"//v1/ingress/traefik", "/v1//ingress/traefik", "/v1/x/../ingress/traefik", "/v1/./ingress/routes",
		"/metrics", "/metrics/", "/metrics?x=1", "/%6Detrics", "/%6detrics", "//metrics", "/x/../metrics",
		"/v1/health/instances/shop", "/v1/health/", "/v1/health", "/v1/%68ealth/instances/shop",
		"/v1/health%2Finstances%2Fshop",
		"/v1/status", "/v1/status/", "/v1/status?x", "//v1/status", "/v1/%73tatus", "/v1/stat%75s",
		"/v1/./status", "/v1/status/.", "/v1/status%2F",
		"/ui", "/ui/", "/ui/app.js", "/ui/style.css", "/ui?x", "/%75i/", "/u%69/app.js", "//ui/", "/x/../ui/", "/./ui/",
		"/ui%2Fapp.js", "/ui/./app.js", "/uix",
	}
	apexAllowedPaths = []string{"/", "/v1/healthz", "/v1/readyz", "/v1/apps/shop", "/v1/apps/shop/domains/ti.to/paths",
		"/v1/tokens", "/v1/node/instances/shop", "/v1/healthz?x", "/v1/statusx/../healthz"}
)

func init() {
	for _, p := range apexDeniedSpellings {
		goldenProbes["api-apex"] = append(goldenProbes["api-apex"], probe{"apps.example.net", p, ""})
	}
	for _, p := range apexAllowedPaths {
		goldenProbes["api-apex"] = append(goldenProbes["api-apex"], probe{"apps.example.net", p, "api-apps_example_net"})
	}
}

// TestPublicApexDeniesTheTokenAndOperatorEndpointsWhateverTheSpelling: the apex puts
// the node API on the internet; what a remote CLI or CI needs goes through, and the
// storage, every ingress format, metrics, instance health, status and the status page
// (/ui) never do, for every spelling Traefik routes on (its entry point resolves dot
// segments and repeated slashes and decodes unreserved escapes before matching;
// matching is case-sensitive, and so is the node's chi router, so "/V1/status" reaches
// the node and is a 404). The api-apex golden's probes hold it for an apex alone (no
// router takes a denied path); here a customer wildcard covers the apex (Derive drops
// such a wildcard; the render still pins the denied prefixes to its deny router).
func TestPublicApexDeniesTheTokenAndOperatorEndpointsWhateverTheSpelling(t *testing.T) {
	doc := &routing.Document{V: routing.Version, Routes: []routing.Route{{Host: "*.example.com", Application: "agency",
		Upstreams: []routing.Upstream{{Node: "vps-a", Address: "10.83.0.1:24200", APIPort: 7400}}}},
		API: &routing.API{Hosts: []string{"apps.example.com"}, Denied: routing.DeniedAPIPrefixes,
			Upstreams: []routing.Upstream{{Node: "vps-a", Address: "10.83.0.1:7400", APIPort: 7400}}}}
	routers := compileRouters(t, decodeStrict(t, mustTraefik(t, doc, Options{})))
	for _, p := range apexDeniedSpellings {
		rp, _, ok := traefikEntry(p)
		if !ok {
			t.Fatalf("%s refused by the entry point model", p)
		}
		if got := route(t, routers, request{host: "apps.example.com", routingPath: rp}); got != "deny-apps_example_com" {
			t.Errorf("apps.example.com%s (routing path %q) → %q, want the deny router", p, rp, got)
		}
	}
	for _, p := range apexAllowedPaths {
		rp, _, _ := traefikEntry(p)
		if got := route(t, routers, request{host: "apps.example.com", routingPath: rp}); got != "api-apps_example_com" {
			t.Errorf("apps.example.com%s (routing path %q) → %q, want the node API", p, rp, got)
		}
	}
}
