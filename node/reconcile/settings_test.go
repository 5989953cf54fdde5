package reconcile_test

import (
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/settings/settingstest"
	"github.com/scafo/ingress/node/reconcile"
)

// TestReconcileSettingsLoadOrAreRefusedNamingTheirSource: the reconcile.* section read
// as the node reads it; a value Validate refuses stops the node naming the setting and
// its source (from the reconcile rows of node/config_bounds_test.go's
// TestConfigRefusesValuesNoFleetMeans).
func TestReconcileSettingsLoadOrAreRefusedNamingTheirSource(t *testing.T) {
	section := settingstest.Section[reconcile.Config]{Path: "reconcile", Defaults: reconcile.Defaults, Validate: reconcile.Config.Validate}
	section.Run(t, []settingstest.Case[reconcile.Config]{
		{Name: "defaults"},
		{Name: "the floor's neighbour", Args: []string{"--reconcile.interval=20ms"},
			Set: func(c *reconcile.Config) { c.Interval = ptypes.Duration(20 * time.Millisecond) }},
		{Name: "a bare number is seconds", Environ: []string{"SCAFO_RECONCILE_INTERVAL=1"},
			Set: func(c *reconcile.Config) { c.Interval = ptypes.Duration(time.Second) }},
		{Name: "interval under the floor", Args: []string{"--reconcile.interval=1ns"},
			Want: []string{"reconcile.interval 1ns: at least 10ms", "(from flag --reconcile.interval)"}},
		{Name: "a negative interval", Args: []string{"--reconcile.interval=-1s"}, Want: []string{"reconcile.interval: must be positive"}},
		{Name: "a TTL within the heartbeat", File: "reconcile:\n  nodeTTL: 10s\n",
			Want: []string{"reconcile.nodeTTL 10s: must be longer than reconcile.heartbeat 15s", "reconcile.nodeTTL from reconcile.nodeTTL in FILE", "reconcile.heartbeat not set, the default"}},
	})
}
