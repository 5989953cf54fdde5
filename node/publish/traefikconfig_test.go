package publish

import (
	"reflect"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

// TestTraefikConfigValidate: the defaults pass; each bad value is refused naming its
// setting; Validate changes nothing.
func TestTraefikConfigValidate(t *testing.T) {
	if errs := TraefikDefaults().Validate(); len(errs) != 0 {
		t.Fatalf("defaults: %v", errs)
	}
	for _, tc := range []struct {
		change func(*TraefikConfig)
		sub    string
	}{
		{func(c *TraefikConfig) { c.EntryPoints = nil }, "traefik.entryPoints: at least one"},
		{func(c *TraefikConfig) { c.EntryPoints = []string{"web", " "} }, "traefik.entryPoints[1]: empty"},
		{func(c *TraefikConfig) { c.Retry.Attempts = 0 }, "traefik.retry.attempts 0"},
		{func(c *TraefikConfig) { c.Retry.Attempts = -2 }, "traefik.retry.attempts -2"},
		{func(c *TraefikConfig) { c.HealthCheck.Interval = ptypes.Duration(50 * time.Millisecond) }, "traefik.healthCheck.interval 50ms"},
		{func(c *TraefikConfig) { c.HealthCheck.Interval = -1 }, "traefik.healthCheck.interval"},
	} {
		c := TraefikDefaults()
		tc.change(&c)
		before := TraefikDefaults()
		tc.change(&before)
		errs := c.Validate()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.sub) {
			t.Errorf("%+v: %v, want one error containing %q", c, errs, tc.sub)
		}
		if !reflect.DeepEqual(c, before) {
			t.Errorf("Validate changed %+v to %+v", before, c)
		}
	}
}

// TestTraefikConfigRenderOptions: the settings become the render's options (the health
// check interval "" when automatic), and what the render refuses is an error.
func TestTraefikConfigRenderOptions(t *testing.T) {
	c := TraefikDefaults()
	o, err := c.RenderOptions([]string{"apps.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if o.HealthCheckInterval != "" || o.HealthCheckTimeout != "2s" || o.RetryInitialInterval != "200ms" ||
		o.RetryAttempts != c.Retry.Attempts || !reflect.DeepEqual(o.EntryPoints, []string{"web"}) ||
		!reflect.DeepEqual(o.PlatformDomains, []string{"apps.example.com"}) || o.PathGroupThreshold != 64 {
		t.Fatalf("render options from the defaults: %+v", o)
	}
	c.HealthCheck.Interval = ptypes.Duration(5 * time.Second)
	if o, err := c.RenderOptions(nil); err != nil || o.HealthCheckInterval != "5s" {
		t.Fatalf("a set interval: %q, %v; want 5s", o.HealthCheckInterval, err)
	}
	c.PathGroupThreshold = -1
	if _, err := c.RenderOptions(nil); err == nil || !strings.Contains(err.Error(), "traefik render options") {
		t.Fatalf("a threshold the render refuses: %v", err)
	}
}
