package fleet

import (
	"strings"
	"testing"
)

// Issue 25 item 9: an application in a group that no platform domain belongs to gets
// no platform host, and the derivation says so (the node's /v1/status lists it under
// skipped); an application of a mapped group, and a fleet with no platform domain at
// all, get no such line.
func TestAnApplicationInAGroupWithoutAPlatformDomainIsReported(t *testing.T) {
	st := State{
		Apps: []App{
			{Name: "eu-app", Account: "acme", Placement: []string{"n1"}, Ingress: &Ingress{Group: "eu-1"}},
			{Name: "lost-app", Account: "acme", Placement: []string{"n1"}, Ingress: &Ingress{Group: "ap-1"}},
			{Name: "plain", Account: "acme", Placement: []string{"n1"}},
		},
		Claims: []Claim{{Host: "lost.example.org", Account: "acme", App: "lost-app"}},
		Nodes: []NodeRecord{{Name: "n1", Address: "10.0.0.1", APIPort: 7400, Seen: now,
			Instances: map[string]Instance{"eu-app": {Port: 1000, Ready: true}, "lost-app": {Port: 1001, Ready: true}, "plain": {Port: 1002, Ready: true}}}},
	}
	o := opts()
	o.PlatformDomains = []string{"apps.example.com", "eu1.example.com"}
	o.DomainGroups = map[string]string{"eu1.example.com": "eu-1"}
	d, sk := Derive(st, o)
	requireSkipped(t, sk, AppKey("lost-app"), `ingress group "ap-1" has no platform domain`)
	for _, app := range []string{"eu-app", "plain"} {
		for _, r := range skippedFor(sk, AppKey(app)) {
			if strings.Contains(r, "no platform domain") {
				t.Errorf("%s (a mapped group) reported: %s", app, r)
			}
		}
	}
	if r := routeFor(t, d, "lost.example.org"); r == nil || len(r.Upstreams) == 0 {
		t.Errorf("lost-app's custom domain = %+v, want routed", r)
	}
	for _, r := range d.Routes {
		if strings.HasPrefix(r.Host, "lost-app.") {
			t.Errorf("lost-app has a platform host %s", r.Host)
		}
	}

	o.PlatformDomains, o.DomainGroups = nil, nil
	_, sk = Derive(st, o)
	for _, s := range sk {
		if strings.Contains(s.Reason, "no platform domain") {
			t.Errorf("no platform domain at all, yet reported: %+v", s)
		}
	}
}
