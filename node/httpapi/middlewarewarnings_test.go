package httpapi

import (
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// TestStatusWarnsOfMiddlewaresTheConfigurationNoLongerDeclares: an application whose
// routes list a middleware traefik.middlewares does not declare (the configuration
// changed after the write) is named once, with the undeclared names only; declared ones
// and applications without middlewares are not.
func TestStatusWarnsOfMiddlewaresTheConfigurationNoLongerDeclares(t *testing.T) {
	up := []routing.Upstream{{Node: "vps-a", Address: "10.0.0.1:24000"}}
	doc := &routing.Document{Routes: []routing.Route{
		{Host: "a.example.org", Application: "shop", Upstreams: up, Middlewares: []string{"auth@file", "gone@file"}},
		{Host: "b.example.org", Application: "shop", Upstreams: up, Middlewares: []string{"auth@file", "gone@file"}},
		{Host: "blog.example.org", Application: "blog", Upstreams: up, Middlewares: []string{"auth@file"}},
		{Host: "c.example.org", Application: "plain", Upstreams: up},
	}}
	got := middlewareWarnings(doc, []string{"auth@file"})
	if len(got) != 1 || !strings.HasPrefix(got[0], "application shop lists gone@file, which traefik.middlewares does not declare") {
		t.Fatalf("warnings %q, want one naming shop and gone@file", got)
	}
	if got := middlewareWarnings(doc, []string{"auth@file", "gone@file"}); len(got) != 0 {
		t.Fatalf("warnings %q with every name declared", got)
	}
	if got := middlewareWarnings(nil, nil); got != nil {
		t.Fatalf("warnings %q before the first document", got)
	}
}
