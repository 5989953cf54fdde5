package probe_test

import (
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/settings/settingstest"
	"github.com/scafo/ingress/node/probe"
)

// TestProbeSettingsLoadOrAreRefusedNamingTheirSource: the probe.* section read as the
// node reads it (flags, SCAFO_PROBE_* variables, a file): each value lands, and a value
// Validate refuses stops the node naming the setting and where it came from (from
// node/config_test.go's TestConfigProbeFlapDamping and the probe rows of
// node/config_bounds_test.go's TestConfigRefusesValuesNoFleetMeans).
func TestProbeSettingsLoadOrAreRefusedNamingTheirSource(t *testing.T) {
	d := func(v time.Duration) ptypes.Duration { return ptypes.Duration(v) }
	section := settingstest.Section[probe.Config]{Path: "probe", Defaults: probe.Defaults, Validate: probe.Config.Validate}
	section.Run(t, []settingstest.Case[probe.Config]{
		{Name: "defaults"},
		{Name: "flap damping from flags and a variable",
			Args: []string{"--probe.flapWindow=30s", "--probe.flapUps=4", "--probe.holdDown=2s"}, Environ: []string{"SCAFO_PROBE_HOLDDOWNMAX=1m"},
			Set: func(c *probe.Config) {
				c.FlapWindow, c.FlapUps, c.HoldDown, c.HoldDownMax = d(30*time.Second), 4, d(2*time.Second), d(time.Minute)
			}},
		{Name: "from a file", File: "probe:\n  interval: 2s\n  downAfter: 3\n",
			Set: func(c *probe.Config) { c.Interval, c.DownAfter = d(2*time.Second), 3 }},
		{Name: "off", Args: []string{"--probe.interval=0"}, Set: func(c *probe.Config) { c.Interval = 0 }},
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
