package fleetwrite_test

import (
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/settings/settingstest"
	"github.com/scafo/ingress/node/fleetwrite"
)

// TestWriteSettingsLoadOrAreRefusedNamingTheirSource: the writes.*, ports.* and audit.*
// sections read as the node reads them; a value their Validate refuses stops the node
// naming the setting and its source (from the writes rows of node/config_bounds_test.go's
// TestConfigRefusesValuesNoFleetMeans). ports.quarantine against reconcile.interval and
// the API's port inside the range span sections: node/config_load_test.go.
func TestWriteSettingsLoadOrAreRefusedNamingTheirSource(t *testing.T) {
	writes := settingstest.Section[fleetwrite.WritesConfig]{Path: "writes", Defaults: fleetwrite.DefaultWrites, Validate: fleetwrite.WritesConfig.Validate}
	t.Run("writes", func(t *testing.T) {
		writes.Run(t, []settingstest.Case[fleetwrite.WritesConfig]{
			{Name: "defaults"},
			{Name: "set", Args: []string{"--writes.rate=0.5", "--writes.burst=3"}, Environ: []string{"SCAFO_WRITES_ROUTEPERMINUTE=12"},
				Set: func(c *fleetwrite.WritesConfig) { c.Rate, c.Burst, c.RoutePerMinute = 0.5, 3, 12 }},
			{Name: "rate NaN", Args: []string{"--writes.rate=NaN"}, Want: []string{"writes.rate NaN: must be a finite number", "(from flag --writes.rate)"}},
			{Name: "rate +Inf", Args: []string{"--writes.rate=+Inf"}, Want: []string{"writes.rate +Inf: must be a finite number"}},
			{Name: "routePerMinute NaN", Environ: []string{"SCAFO_WRITES_ROUTEPERMINUTE=NaN"},
				Want: []string{"writes.routePerMinute NaN: must be a finite number", "(from SCAFO_WRITES_ROUTEPERMINUTE in the environment)"}},
			{Name: "no burst", File: "writes:\n  burst: 0\n",
				Want: []string{"writes.rate 5, writes.burst 0: both must be positive", "writes.burst from writes.burst in FILE", "writes.rate not set, the default"}},
		})
	})
	ports := settingstest.Section[fleetwrite.PortsConfig]{Path: "ports", Defaults: fleetwrite.DefaultPorts, Validate: fleetwrite.PortsConfig.Validate}
	t.Run("ports", func(t *testing.T) {
		ports.Run(t, []settingstest.Case[fleetwrite.PortsConfig]{
			{Name: "defaults"},
			{Name: "a range", Args: []string{"--ports.min=30000", "--ports.max=30010"}, Set: func(c *fleetwrite.PortsConfig) { c.Min, c.Max = 30000, 30010 }},
			{Name: "upside down", Args: []string{"--ports.min=30010", "--ports.max=30000"},
				Want: []string{"ports.min/ports.max: invalid range 30010..30000"}},
			{Name: "past the last port", Environ: []string{"SCAFO_PORTS_MAX=70000"}, Want: []string{"invalid range 24000..70000"}},
			{Name: "not an integer", Args: []string{"--ports.min=low"}, Want: []string{`--ports.min: "low" is not an integer`}},
		})
	})
	audit := settingstest.Section[fleetwrite.AuditConfig]{Path: "audit", Defaults: fleetwrite.DefaultAudit, Validate: fleetwrite.AuditConfig.Validate}
	t.Run("audit", func(t *testing.T) {
		audit.Run(t, []settingstest.Case[fleetwrite.AuditConfig]{
			{Name: "defaults"},
			{Name: "an hour", Args: []string{"--audit.retention=1h"}, Set: func(c *fleetwrite.AuditConfig) { c.Retention = ptypes.Duration(time.Hour) }},
			{Name: "under an hour", Args: []string{"--audit.retention=59m"}, Want: []string{"audit.retention 59m0s: at least 1h", "(from flag --audit.retention)"}},
		})
	})
}
