package probe

import (
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/settings/settingstest"
)

// TestConfigDefaultsAndEveryRefusalNamed: the prober's defaults, and each invalid
// combination refused naming its setting (probe.interval is 0, off, or at least 10ms);
// Validate changes nothing.
func TestConfigDefaultsAndEveryRefusalNamed(t *testing.T) {
	def := Defaults()
	if def.Interval != ptypes.Duration(time.Second) || def.EffectiveTimeout() != 500*time.Millisecond || def.DownAfter != 2 || def.UpAfter != 2 || def.Concurrency != 32 ||
		def.FlapWindow != ptypes.Duration(time.Minute) || def.FlapUps != 3 || def.HoldDown != ptypes.Duration(10*time.Second) || def.HoldDownMax != ptypes.Duration(5*time.Minute) {
		t.Errorf("defaults %+v (timeout %s)", def, def.EffectiveTimeout())
	}
	d := func(v time.Duration) ptypes.Duration { return ptypes.Duration(v) }
	for _, tc := range []struct {
		name string
		set  func(*Config)
		err  string // "" valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"disabled", func(p *Config) { p.Interval = 0; p.DownAfter = 0 }, ""},
		{"interval at the floor", func(p *Config) { p.Interval, p.Timeout = d(10*time.Millisecond), d(5*time.Millisecond) }, ""},
		{"interval 1ms", func(p *Config) { p.Interval = d(time.Millisecond) }, "probe.interval 1ms: at least 10ms"},
		{"interval 9ms", func(p *Config) { p.Interval = d(9 * time.Millisecond) }, "probe.interval 9ms: at least 10ms"},
		{"negative interval", func(p *Config) { p.Interval = -1 }, "probe.interval"},
		{"timeout above interval", func(p *Config) { p.Timeout = d(2 * time.Second) }, "probe.timeout"},
		{"negative timeout", func(p *Config) { p.Timeout = -1 }, "probe.timeout"},
		{"downAfter 0", func(p *Config) { p.DownAfter = 0 }, "probe.downAfter"},
		{"upAfter 0", func(p *Config) { p.UpAfter = 0 }, "probe.upAfter"},
		{"concurrency 1", func(p *Config) { p.Concurrency = 1 }, "probe.concurrency"},
		{"concurrency 5000", func(p *Config) { p.Concurrency = 5000 }, "probe.concurrency"},
		{"damping off", func(p *Config) { p.FlapWindow = 0; p.FlapUps = 0; p.HoldDown = 0 }, ""},
		{"negative flapWindow", func(p *Config) { p.FlapWindow = -1 }, "probe.flapWindow"},
		{"flapUps 1", func(p *Config) { p.FlapUps = 1 }, "probe.flapUps"},
		{"holdDown 0", func(p *Config) { p.HoldDown = 0 }, "probe.holdDown"},
		{"holdDownMax below holdDown", func(p *Config) { p.HoldDownMax = d(time.Second) }, "probe.holdDownMax"},
	} {
		c := Defaults()
		tc.set(&c)
		before := c
		errs := c.Validate()
		switch {
		case tc.err == "" && len(errs) != 0:
			t.Errorf("%s: unexpected errors %v", tc.name, errs)
		case tc.err != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.err)):
			t.Errorf("%s: errors %v, want the first naming %s", tc.name, errs, tc.err)
		}
		if c != before {
			t.Errorf("%s: Validate changed %+v to %+v", tc.name, before, c)
		}
	}
}

// TestConfigIntervalFloorHidesNoOtherRefusal: an interval under the floor is refused
// beside what else is wrong with the section (a timeout longer than the interval, a
// negative one), all at once, as when the floor was the root's check.
func TestConfigIntervalFloorHidesNoOtherRefusal(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, -time.Second} {
		c := Defaults()
		c.Interval, c.Timeout = ptypes.Duration(5*time.Millisecond), ptypes.Duration(timeout)
		var msgs []string
		for _, err := range c.Validate() {
			msgs = append(msgs, err.Error())
		}
		all := strings.Join(msgs, "\n")
		for _, sub := range []string{"probe.interval 5ms: at least 10ms", "probe.timeout " + timeout.String() + ": must be at most probe.interval 5ms"} {
			if !strings.Contains(all, sub) {
				t.Errorf("timeout %s: errors %q, want one containing %q", timeout, all, sub)
			}
		}
	}
}

// TestProbeSettingsLoadOrAreRefusedNamingTheirSource: the probe.* section read as the
// node reads it (flags, SCAFO_PROBE_* variables, a file): each value lands, and a value
// Validate refuses stops the node naming the setting and where it came from (from
// node/config_test.go's TestConfigProbeFlapDamping and the probe rows of
// node/config_bounds_test.go's TestConfigRefusesValuesNoFleetMeans).
func TestProbeSettingsLoadOrAreRefusedNamingTheirSource(t *testing.T) {
	d := func(v time.Duration) ptypes.Duration { return ptypes.Duration(v) }
	section := settingstest.Section[Config]{Path: "probe", Defaults: Defaults, Validate: Config.Validate}
	section.Run(t, []settingstest.Case[Config]{
		{Name: "defaults"},
		{Name: "flap damping from flags and a variable",
			Args: []string{"--probe.flapWindow=30s", "--probe.flapUps=4", "--probe.holdDown=2s"}, Environ: []string{"SCAFO_PROBE_HOLDDOWNMAX=1m"},
			Set: func(c *Config) {
				c.FlapWindow, c.FlapUps, c.HoldDown, c.HoldDownMax = d(30*time.Second), 4, d(2*time.Second), d(time.Minute)
			}},
		{Name: "from a file", File: "probe:\n  interval: 2s\n  downAfter: 3\n",
			Set: func(c *Config) { c.Interval, c.DownAfter = d(2*time.Second), 3 }},
		{Name: "off", Args: []string{"--probe.interval=0"}, Set: func(c *Config) { c.Interval = 0 }},
		{Name: "holdDown above holdDownMax", Args: []string{"--probe.holdDown=10m"},
			Want: []string{"probe.holdDown 10m0s, probe.holdDownMax 5m0s: holdDown must be positive and at most holdDownMax",
				"probe.holdDown from flag --probe.holdDown", "probe.holdDownMax not set, the default"}},
		{Name: "interval under the floor, a flag", Args: []string{"--probe.interval=1ms"},
			Want: []string{"probe.interval 1ms: at least 10ms", "(from flag --probe.interval)"}},
		{Name: "interval under the floor, a variable", Environ: []string{"SCAFO_PROBE_INTERVAL=5ms"},
			Want: []string{"probe.interval 5ms: at least 10ms", "(from SCAFO_PROBE_INTERVAL in the environment)"}},
		{Name: "interval under the floor, the file", File: "probe:\n  interval: 7ms\n",
			Want: []string{"probe.interval 7ms: at least 10ms", "(from probe.interval in FILE)"}},
		{Name: "concurrency out of range", Args: []string{"--probe.concurrency=0"}, Want: []string{"probe.concurrency 0: must be 2..1024"}},
		{Name: "not a duration", Args: []string{"--probe.interval=fast"}, Want: []string{`--probe.interval: invalid duration "fast"`}},
	})
}
