package fleetcerts_test

import (
	"testing"

	"github.com/scafo/ingress/internal/settings/settingstest"
	"github.com/scafo/ingress/node/fleetcerts"
)

// TestACMESettingsLoadOrAreRefusedNamingTheirSource: the acme.* section read as the node
// reads it (its own checks; those with other sections are node/config_load_test.go's).
// An issuance lock's lease is at most 1h, the most /v1/storage grants: a lock expiring
// beyond twice that is taken over as corrupt (certstore), so a longer lease would lose
// its locks to peers. acme.customBudget defaults to 50 and takes 0 to 10000. (From
// node/config_test.go's TestConfigACMELockLeaseIsBounded and
// TestConfigACMECustomBudgetIsBounded.)
func TestACMESettingsLoadOrAreRefusedNamingTheirSource(t *testing.T) {
	section := settingstest.Section[fleetcerts.Config]{Path: "acme", Defaults: fleetcerts.Defaults,
		Normalize: (*fleetcerts.Config).Normalize, Validate: fleetcerts.Config.Validate}
	on := []string{"--acme.enabled", "--acme.caServer=https://127.0.0.1:14000/dir"}
	with := func(args ...string) []string { return append(append([]string{}, on...), args...) }
	enabled := func(c *fleetcerts.Config) { c.Enabled, c.CAServer = true, "https://127.0.0.1:14000/dir" }
	cases := []settingstest.Case[fleetcerts.Config]{
		{Name: "off, inert", Args: []string{"--acme.lockLease=3h"}, Set: func(c *fleetcerts.Config) { c.LockLease.Set("3h") }},
		{Name: "on, the defaults", Args: on, Set: func(c *fleetcerts.Config) { enabled(c); c.CustomBudget = 50 }},
		{Name: "the longest lease", Args: with("--acme.lockLease=1h"), Set: func(c *fleetcerts.Config) { enabled(c); c.LockLease.Set("1h") }},
		{Name: "no custom budget", Args: with("--acme.customBudget=0"), Set: func(c *fleetcerts.Config) { enabled(c); c.CustomBudget = 0 }},
		{Name: "the largest custom budget", Args: with("--acme.customBudget=10000"), Set: func(c *fleetcerts.Config) { enabled(c); c.CustomBudget = 10000 }},
		{Name: "not https", Args: []string{"--acme.enabled", "--acme.caServer=http://ca.example/dir"},
			Want: []string{`acme.caServer "http://ca.example/dir": must be an https:// URL`, "(from flag --acme.caServer)"}},
		{Name: "a negative custom budget", Args: with("--acme.customBudget=-1"), Want: []string{"acme.customBudget -1: from 0 to 10000 per hour"}},
		{Name: "a custom budget too large", Environ: []string{"SCAFO_ACME_CUSTOMBUDGET=10001"}, Args: on,
			Want: []string{"acme.customBudget 10001: from 0 to 10000 per hour", "(from SCAFO_ACME_CUSTOMBUDGET in the environment)"}},
	}
	for _, v := range [][2]string{{"0s", "0s"}, {"500ms", "500ms"}, {"61m", "1h1m0s"}, {"3h", "3h0m0s"}} {
		cases = append(cases, settingstest.Case[fleetcerts.Config]{Name: "lockLease " + v[0], Args: with("--acme.lockLease=" + v[0]),
			Want: []string{"acme.lockLease " + v[1] + ": from 1s to 1h0m0s", "(from flag --acme.lockLease)"}})
	}
	section.Run(t, cases)
}
