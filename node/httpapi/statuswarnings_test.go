package httpapi

import (
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/render/routing"
)

// TestStatusWarningsNameWhatServesBadly: /v1/status's warnings (statusWarnings) name an
// application with no ready instance (its hosts, three at most), an ingress behind or
// lost, and "no ingress polls this fleet" when none is current or behind; a fleet that
// serves well has none, and nothing is said of ingresses the store could not list.
func TestStatusWarningsNameWhatServesBadly(t *testing.T) {
	up := []routing.Upstream{{Node: "vps-a", Address: "10.0.0.1:24000"}}
	doc := &routing.Document{Routes: []routing.Route{
		{Host: "a.example.org", Application: "shop", Upstreams: []routing.Upstream{}},
		{Host: "b.example.org", Application: "shop", Upstreams: []routing.Upstream{}},
		{Host: "blog.example.org", Application: "blog", Upstreams: up},
		{Host: "c.example.org", Application: "shop", Upstreams: []routing.Upstream{}},
		{Host: "d.example.org", Application: "shop", Upstreams: []routing.Upstream{}},
		{Host: "held.example.org", Application: routing.UnownedApplication, Upstreams: []routing.Upstream{}},
	}}
	current := api.Ingress{Name: "edge-1", Node: "vps-a", State: "current"}
	behind := api.Ingress{Name: "edge-2", Node: "vps-b", State: "behind", Behind: 3}
	lost := api.Ingress{Name: "edge-3", Node: "vps-a", State: "lost", Age: 125}
	for _, c := range []struct {
		what string
		doc  *routing.Document
		iv   ingress.View
		want []string // substrings, one per warning, in order
	}{
		{"a fleet that serves well", &routing.Document{Routes: doc.Routes[2:3]}, ingress.View{Ingresses: []api.Ingress{current}}, nil},
		{"before the first pass", nil, ingress.View{Ingresses: []api.Ingress{current}}, nil},
		{"an application with nothing ready", doc, ingress.View{Ingresses: []api.Ingress{current}},
			[]string{"application shop has no ready instance: its hosts a.example.org, b.example.org, c.example.org and 1 more answer 503"}},
		{"an ingress behind, one lost", nil, ingress.View{Ingresses: []api.Ingress{current, behind, lost}},
			[]string{"ingress edge-2 (polling vps-b) is behind: it holds a configuration 3 serials older", "ingress edge-3 (polling vps-a) is lost: not heard from for 2m5s"}},
		{"no ingress at all", nil, ingress.View{Ingresses: []api.Ingress{}}, []string{"no ingress polls this fleet"}},
		{"only a lost ingress", nil, ingress.View{Ingresses: []api.Ingress{lost}}, []string{"ingress edge-3", "no ingress polls this fleet: no route is served until a Traefik or Caddy polls a node (1 lost)"}},
		{"only a behind ingress", nil, ingress.View{Ingresses: []api.Ingress{behind}}, []string{"ingress edge-2"}},
		{"the reports could not be read", nil, ingress.View{Ingresses: []api.Ingress{}, Error: "listing ingresses/: down"}, nil},
	} {
		got := statusWarnings(c.doc, c.iv)
		if got == nil {
			t.Errorf("%s: nil, want a list (written as [])", c.what)
		}
		ok := len(got) == len(c.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.Contains(got[i], c.want[i])
		}
		if !ok {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
		if slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, routing.UnownedApplication) }) {
			t.Errorf("%s: %q names %s (its claims are under skipped)", c.what, got, routing.UnownedApplication)
		}
	}
}
