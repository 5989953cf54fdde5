package render

import (
	"strconv"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// TestServiceApplicationNamesTheApplicationOfEveryLeafAndNothingElse: over every golden case's
// render, each HTTP service Traefik records metrics for (a load balancer with servers) is, with
// each provider suffix Traefik adds, either the leaf of upstream i of an application's route
// (and maps to that application, path maps included: a prefix targets its application's
// chain) or the node API's or the applied probe's (and maps to nothing); every other service
// (failovers, load balancers without servers) maps to nothing, so a request is counted once,
// at its leaf.
func TestServiceApplicationNamesTheApplicationOfEveryLeafAndNothingElse(t *testing.T) {
	mapped := 0
	for _, c := range loadCases(t) {
		cfg := decodeStrict(t, mustTraefik(t, c.doc, c.opt))
		// The leaves the document implies, independently of the names the render picked.
		leaves := map[string]string{}
		for _, r := range c.doc.Routes {
			if r.Passthrough {
				continue // a TCP service: Traefik has no service metrics for TCP
			}
			for i, u := range r.Upstreams {
				leaves["app-"+r.Application+"."+strconv.Itoa(i)+"."+u.Node] = r.Application
			}
		}
		for name, svc := range cfg.HTTP.Services {
			hasServers := svc.LoadBalancer != nil && len(svc.LoadBalancer.Servers) > 0
			want, isLeaf := leaves[name]
			if hasServers && !isLeaf && !isNodeService(name, c.doc) {
				t.Errorf("%s: service %s has servers (Traefik records metrics for it) but is no application's leaf", c.name, name)
			}
			for _, provider := range []string{"http", "plugin-scafo", "file"} {
				app, ok := ServiceApplication(name + "@" + provider)
				if isLeaf && (!ok || app != want) {
					t.Errorf("%s: ServiceApplication(%s@%s) = %q %v, want %q", c.name, name, provider, app, ok, want)
				}
				if !isLeaf && ok {
					t.Errorf("%s: ServiceApplication(%s@%s) = %q, want no application (not a leaf of one)", c.name, name, provider, app)
				}
				if isLeaf && ok {
					mapped++
				}
			}
			if app, ok := ServiceApplication(name); ok {
				t.Errorf("%s: ServiceApplication(%s) without a provider suffix = %q; Traefik's label always has one", c.name, name, app)
			}
		}
	}
	if mapped == 0 {
		t.Fatal("no leaf mapped: the cases render no application")
	}
}

// isNodeService: the node API's chain and the applied probe's services, the load balancers
// with servers that are no application's.
func isNodeService(name string, doc *routing.Document) bool {
	if name == svcAppliedCheck || name == svcAppliedCallback {
		return true
	}
	if doc.API == nil {
		return false
	}
	for i, u := range doc.API.Upstreams {
		if name == leafName(svcAPI, i, u.Node) {
			return true
		}
	}
	return false
}

// TestServiceApplicationRefusesLookAlikes: names an application's leaf is not (its chain's
// root and failovers, the node API, a missing provider, a dotted application component, two
// providers) map to nothing; the provider suffixes Traefik writes map.
func TestServiceApplicationRefusesLookAlikes(t *testing.T) {
	for _, c := range []struct {
		service, app string
	}{
		{"app-shop.0.vps-a@http", "shop"},
		{"app-shop-eu.12.n~5fx@plugin-scafo", "shop-eu"},
		{"app-a.1.b@file", "a"},
		{"app-shop@http", ""},
		{"app-shop.failover1@http", ""},
		{"app-shop.0.vps-a", ""},
		{"app-shop.0.vps-a@", ""},
		{"app-shop.0.vps-a@http@file", ""},
		{"app-sh.op.0.vps-a@http", ""},
		{"app-shop.x.vps-a@http", ""},
		{"api.0.vps-a@http", ""},
		{"deny@http", ""},
		{"xapp-shop.0.vps-a@http", ""},
		{"app-Shop.0.vps-a@http", ""},
	} {
		app, ok := ServiceApplication(c.service)
		if app != c.app || ok != (c.app != "") {
			t.Errorf("ServiceApplication(%q) = %q %v, want %q", c.service, app, ok, c.app)
		}
	}
}
