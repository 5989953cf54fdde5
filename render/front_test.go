package render

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// TestWithAFrontNoTCPRouterNamesAPassthroughHost: with Options.Front, a layer-4 front
// routes passthrough names, so the render writes no tcp section at all (Traefik can
// never fold a spelling onto one), while every passthrough host keeps its exclusion
// from covering wildcards and from the challenge router, and the HTTP part of the
// render is the same bytes as without the front.
func TestWithAFrontNoTCPRouterNamesAPassthroughHost(t *testing.T) {
	c := passthroughCase(t)
	opt := c.opt
	opt.Front = true
	fc := &FleetCerts{HTTPEntryPoints: []string{"web"}, Managed: map[string]bool{"shop.apps.example.com": true}}
	with := mustTraefikFleet(t, c.doc, opt, fc)
	without := mustTraefikFleet(t, c.doc, c.opt, fc)
	cfg, base := decodeStrict(t, with), decodeStrict(t, without)
	if cfg.TCP != nil {
		t.Fatalf("tcp section with a front: %+v", cfg.TCP)
	}
	if base.TCP == nil || len(base.TCP.Routers) == 0 {
		t.Fatal("the case has no TCP router without a front: the test proves nothing")
	}
	if !strings.Contains(cfg.HTTP.Routers[routerACMEChallenge].Rule, `db\.example\.org`) {
		t.Fatalf("the challenge router lost its exclusion: %s", cfg.HTTP.Routers[routerACMEChallenge].Rule)
	}
	// The http section is what it is without the front (whose routers take no request
	// for a passthrough host: goldenProbes["passthrough"]).
	if !reflect.DeepEqual(cfg.HTTP, base.HTTP) {
		t.Fatal("the front changed the http section")
	}
	again, _ := TraefikFleet(c.doc, opt, fc)
	if !bytes.Equal(with, again) {
		t.Fatal("two renders with a front differ")
	}
}
