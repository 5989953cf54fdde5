package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// rejectedPolls counts the node's log lines about a refused poll of the Traefik
// endpoint (a 401), whatever the exact wording.
func rejectedPolls(n *node) int {
	c := 0
	for _, line := range strings.Split(n.proc.Output(), "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "/v1/ingress/traefik") &&
			(strings.Contains(l, "401") || strings.Contains(l, "rejected") || strings.Contains(l, "unauthorized")) {
			c++
		}
	}
	return c
}

// Scenario 9.
func TestTraefikWithoutTheIngressTokenGetsNoRoutes(t *testing.T) {
	// Rejections are logged once per source per limits.rejectLog (10s by default); both
	// refused Traefiks poll from one loopback address, so shorten it to see each.
	f := startFleet(t, 1, nodeOptions{args: []string{"--limits.rejectLog=100ms"}})
	n1 := f.nodes[0]
	f.deploy(t, "shop", "acme", []*node{n1}, "/healthz")

	// Control: with the token, the route arrives (so the failures below are the token's).
	good := startTraefik(t, "traefik-good", traefikOptions{node: n1})
	good.waitServedBy(t, "shop.apps.localhost", "/", "shop@n1", routeTimeout)

	for _, tc := range []struct {
		name string
		opts traefikOptions
	}{
		{"wrong token", traefikOptions{node: n1, token: "not0the0ingress0token"}},
		{"no Authorization header", traefikOptions{node: n1, noAuthHeader: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged := rejectedPolls(n1)
			tr := startTraefik(t, "traefik-"+strings.ReplaceAll(tc.name, " ", "-"), tc.opts)
			// Traefik polls, is refused, backs off and retries: wait for two refusals.
			waitFor(t, "Traefik to be refused twice", 20*time.Second, func() error {
				if n := countLines(tr.proc.Output(), "received non-ok response code: 401"); n < 2 {
					return fmt.Errorf("%d refusals in Traefik's log", n)
				}
				return nil
			})
			rd, err := tr.rawData()
			if err != nil {
				t.Fatal(err)
			}
			routers, services := rd.fromProvider("http")
			if len(routers) != 0 || len(services) != 0 {
				t.Errorf("%d routers and %d services from the provider, want none", len(routers), len(services))
			}
			tr.expectTraefik404(t, "shop.apps.localhost", "/")
			if got := rejectedPolls(n1) - logged; got == 0 {
				t.Errorf("the node logged no rejected poll of /v1/ingress/traefik (%s)", tc.name)
			}
		})
	}
	good.expectServedBy(t, "shop.apps.localhost", "/", "shop@n1")
	good.requireProviderClean(t, "http")
}
