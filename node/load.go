package node

// The configuration's sources (Loaders) and its one normalisation.

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/internal/settings"
	"github.com/scafo/ingress/render/routing"
)

// Loaders is the node configuration's paerser resource chain, for the root
// cli.Command's Resources (internal/settings.Chain): a strict check of every source,
// then the file (--configFile, else SCAFO_CONFIGFILE), then the SCAFO_* variables of
// environ, then flags, each overriding the earlier ones field by field, then normalize
// and Validate.
func Loaders(environ []string) []cli.ResourceLoader {
	return settings.Chain{
		Environ: environ, EnvPrefix: EnvPrefix, Removed: removedSettings, NotSetting: NotSetting,
		Aliases: flagAliases, Finish: finish,
	}.Loaders()
}

// FlagLoader is the chain's flag loader (--ingress-token read as --ingress.token).
func FlagLoader() cli.ResourceLoader { return settings.FlagLoader{Aliases: flagAliases} }

// removedSettings are the settings a past version had (path → what to do instead):
// naming one is refused as removed, not as unknown (TestTheNodeConfigurationLoadsOrIsRefusedNamingTheSettingAndItsSource).
var removedSettings = map[string]string{
	"limits.trustedProxies": "X-Forwarded-For is no longer read: application tokens carry the fleet's MAC and are looked up on a budget of their own, not one per client address (docs/security.md); delete the setting",
}

// notSettings are the SCAFO_* variables other programs of the project read: the
// command-line verbs (SCAFO_URL, SCAFO_TOKEN), the Traefik integration
// (SCAFO_INGRESS_NAME), the Caddy module (SCAFO_ENDPOINTS). A node started from a shell
// that set them for those programs starts.
var notSettings = map[string]bool{
	"SCAFO_URL": true, "SCAFO_TOKEN": true, "SCAFO_INGRESS_NAME": true, "SCAFO_ENDPOINTS": true,
}

// notSettingPrefixes are the test suite's and the build's variables (go test, e2e,
// benchmarks, CI scripts), which a node the tests start inherits.
var notSettingPrefixes = []string{"SCAFO_TEST_", "SCAFO_E2E_", "SCAFO_BENCH", "SCAFO_TRAEFIK_DECODE",
	"SCAFO_ROOT", "SCAFO_DEBIAN_", "SCAFO_NODE_BIN", "SCAFO_COSTMODEL_"}

// NotSetting says whether a SCAFO_* variable belongs to another program (notSettings,
// notSettingPrefixes): the node ignores it rather than refusing it as a mistyped setting.
func NotSetting(name string) bool {
	if notSettings[name] {
		return true
	}
	for _, p := range notSettingPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// finish ends the chain: a *Config is normalised, then checked, each error naming the
// source of the settings it names (origins, kept in the Config for New's checks).
func finish(c any, origins *settings.Origins) error {
	cfg, ok := c.(*Config)
	if !ok {
		return fmt.Errorf("node configuration: got %T, want *Config", c)
	}
	cfg.origins = origins
	if err := cfg.normalize(); err != nil {
		return origins.Explain(err)
	}
	return cfg.Validate()
}

// normalize is the configuration's one normalisation, between the sources and Validate:
// the platform domains folded, the values derived from other settings filled
// (store.dir.path from stateDir, node.apiPort from listen) and, with DNS-01 on, the TSIG
// secret read from its file into acme.dns01.rfc2136.tsigSecret (the file read once: New
// builds the provider from the secret). An error names the setting.
func (c *Config) normalize() error {
	for i, d := range c.Platform.Domains {
		c.Platform.Domains[i] = routing.FoldHost(d)
	}
	if c.Store.Dir.Path == "" {
		c.Store.Dir.Path = filepath.Join(c.StateDir, "store")
	}
	if c.Node.APIPort == 0 {
		c.Node.APIPort = portOf(c.Listen)
	}
	return c.ACME.Normalize()
}

// flagAliases are the flag spellings kept beside the paerser path they stand for.
var flagAliases = map[string]string{"ingress-token": "ingress.token"}
