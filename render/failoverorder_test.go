package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// chainOrder follows the service a router points at down its failover chain and
// returns the server URLs in the order Traefik tries them: a failover's main service
// first, then its fallback.
func chainOrder(t *testing.T, cfg Configuration, svc string) []string {
	t.Helper()
	var out []string
	for seen := 0; ; seen++ {
		if seen > 64 {
			t.Fatalf("service %s: chain does not end", svc)
		}
		s, ok := cfg.HTTP.Services[svc]
		if !ok {
			t.Fatalf("service %s missing", svc)
		}
		if s.LoadBalancer != nil {
			for _, srv := range s.LoadBalancer.Servers {
				out = append(out, srv.URL)
			}
			return out
		}
		main := cfg.HTTP.Services[s.Failover.Service]
		if main.LoadBalancer == nil {
			t.Fatalf("failover %s: main %s is not a leaf", svc, s.Failover.Service)
		}
		for _, srv := range main.LoadBalancer.Servers {
			out = append(out, srv.URL)
		}
		svc = s.Failover.Fallback
	}
}

// TestFailoverChainTriesUpstreamsInDocumentOrder: the order of a route's upstreams is
// the order Traefik tries them in (the first ready one takes every request, the next
// only when it fails), for every host and path prefix of the application, and with
// ?prefer= the preferred node's upstreams lead, the others keeping their order. Checked
// on the decoded render, not on golden bytes.
func TestFailoverChainTriesUpstreamsInDocumentOrder(t *testing.T) {
	ups := []routing.Upstream{
		{Node: "vps-c", Address: "10.83.0.3:24003", APIPort: 7400},
		{Node: "vps-a", Address: "10.83.0.1:24001", APIPort: 7400},
		{Node: "vps-b", Address: "10.83.0.2:24002", APIPort: 7400},
		{Node: "vps-d", Address: "10.83.0.4:24004", APIPort: 7400},
	}
	doc := &routing.Document{V: routing.Version, Routes: []routing.Route{
		{Host: "shop.apps.example.com", Application: "shop", Upstreams: ups},
		{Host: "shop.example.org", Application: "shop", Upstreams: ups,
			Paths: map[string]string{"api": "shop.apps.example.com"}},
	}}
	doc.Seal()
	urls := func(us []routing.Upstream) []string {
		var out []string
		for _, u := range us {
			out = append(out, "http://"+u.Address)
		}
		return out
	}
	for _, tc := range []struct {
		prefer string
		want   []string
	}{
		{"", urls(ups)},
		{"vps-b", urls([]routing.Upstream{ups[2], ups[0], ups[1], ups[3]})},
		{"vps-d", urls([]routing.Upstream{ups[3], ups[0], ups[1], ups[2]})},
	} {
		d := doc
		if tc.prefer != "" {
			var err error
			if d, err = routing.Prefer(doc, tc.prefer); err != nil {
				t.Fatal(err)
			}
		}
		out, err := Traefik(d, Options{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := decodeStrict(t, out)
		routers := 0
		for name, r := range cfg.HTTP.Routers {
			if strings.HasPrefix(name, "guard-") {
				continue // a path map's guard: pinned to 503 by design
			}
			if got := chainOrder(t, cfg, r.Service); !slices.Equal(got, tc.want) {
				t.Errorf("prefer=%q: router %s tries %v, want %v", tc.prefer, name, got, tc.want)
			}
			routers++
		}
		if routers < 3 { // two hosts and a path prefix
			t.Fatalf("prefer=%q: %d routers, want at least 3", tc.prefer, routers)
		}
	}
}
