package node

// The configuration's paerser loaders: a strict check of every source, then the
// file, the environment, the flags, in that order, each overriding the last field by
// field, then Validate.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/traefik/paerser/cli"
	"github.com/traefik/paerser/env"
	"github.com/traefik/paerser/file"
	"github.com/traefik/paerser/flag"
	"github.com/traefik/paerser/parser"

	"github.com/scafo/ingress/internal/settings"
	"github.com/scafo/ingress/render/routing"
)

// Loaders is the node configuration's paerser resource chain, for the root
// cli.Command's Resources: the file (--configFile, else SCAFO_CONFIGFILE), then the
// SCAFO_* variables of environ, then flags, then Validate. Unlike Traefik's chain, where
// the first source found wins, every loader answers "not done", so paerser runs them all
// and each source overrides the earlier ones field by field: a secret can come from the
// environment while everything else is in the file.
//
// The chain starts with Strict: paerser ignores a file key it does not know and reads
// a value's error without the setting's name, so every source is checked first.
func Loaders(environ []string) []cli.ResourceLoader {
	return []cli.ResourceLoader{
		&Strict{Environ: environ},
		&FileLoader{Environ: environ},
		&EnvLoader{Environ: environ},
		&FlagLoader{},
		validator{},
	}
}

// FileLoader decodes the file named by --configFile (or SCAFO_CONFIGFILE in Environ)
// into the command's configuration. No file named, nothing read: there is no search
// path. A named file that cannot be read is an error.
type FileLoader struct {
	Environ []string
}

// Load implements cli.ResourceLoader.
func (l *FileLoader) Load(args []string, cmd *cli.Command) (bool, error) {
	path, err := configFilePath(args, l.Environ, cmd.Configuration)
	if err != nil || path == "" {
		return false, err
	}
	if err := file.Decode(path, cmd.Configuration); err != nil {
		return false, fmt.Errorf("reading config file %s: %w", path, err)
	}
	return false, nil
}

// configFilePath is --configFile, else SCAFO_CONFIGFILE in environ ("" for neither).
func configFilePath(args, environ []string, cfg any) (string, error) {
	ref, err := flag.Parse(aliasArgs(args), cfg)
	if err != nil {
		return "", fmt.Errorf("parsing flags: %w", err)
	}
	var path string
	for k, v := range ref { // paerser keeps the spelling given: --configFile or --configfile
		if strings.EqualFold(k, parser.DefaultRootName+".configFile") {
			path = v
		}
	}
	if path == "" {
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, EnvPrefix+"CONFIGFILE="); ok {
				path = v
			}
		}
	}
	return path, nil
}

// Strict checks the three sources before paerser reads them: every flag, every
// SCAFO_* variable (but those of NotSettings) and every key of the file must name a
// setting, and every value must parse. Each error names the setting and its source,
// with the closest known name when there is one: "unknown flag --listne (did you mean
// --listen?)", "SCAFO_API_PUBLIC: \"yes\" is not a boolean (true or false)",
// "stores in /etc/scafo/scafo-node.yaml: unknown key (did you mean store?)". All the
// problems are reported at once.
type Strict struct {
	Environ []string
}

// Load implements cli.ResourceLoader.
func (l *Strict) Load(args []string, cmd *cli.Command) (bool, error) {
	known := settings.NewKnown(cmd.Configuration, EnvPrefix)
	for path, why := range removedSettings {
		known.Removed(path, why)
	}
	var errs []error
	flagsErr := known.CheckFlags(args, flagAliases)
	errs = append(errs, flagsErr, known.CheckEnv(l.Environ, EnvPrefix, NotSetting))
	// The file too, when the flags still name it (a flag without its value may not).
	if path, err := configFilePath(args, l.Environ, cmd.Configuration); err == nil || flagsErr == nil {
		if err != nil {
			return false, err
		}
		if path != "" {
			content, err := os.ReadFile(path)
			if err != nil {
				return false, fmt.Errorf("reading config file: %w", err)
			}
			errs = append(errs, known.CheckFile(path, content))
		}
	}
	return false, errors.Join(errs...)
}

// removedSettings are the settings a past version had (path → what to do instead):
// naming one is refused as removed, not as unknown (TestARemovedSettingIsRefusedByName).
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

// EnvLoader decodes the SCAFO_* variables of Environ into the command's configuration.
type EnvLoader struct {
	Environ []string
}

// Load implements cli.ResourceLoader.
func (l *EnvLoader) Load(_ []string, cmd *cli.Command) (bool, error) {
	// Strict has refused a variable naming no setting, but those of NotSetting: they
	// are left out, where paerser would read SCAFO_INGRESS_NAME as under ingress.
	var vars []string
	for _, kv := range env.FindPrefixedEnvVars(l.Environ, EnvPrefix, cmd.Configuration) {
		if name, _, _ := strings.Cut(kv, "="); !NotSetting(name) {
			vars = append(vars, kv)
		}
	}
	if len(vars) == 0 {
		return false, nil
	}
	if err := env.Decode(vars, EnvPrefix, cmd.Configuration); err != nil {
		return false, fmt.Errorf("reading %s* environment: %w", EnvPrefix, err)
	}
	return false, nil
}

// FlagLoader decodes the flags into the command's configuration; --ingress-token is an
// alias of --ingress.token.
type FlagLoader struct{}

// Load implements cli.ResourceLoader.
func (*FlagLoader) Load(args []string, cmd *cli.Command) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	if err := flag.Decode(aliasArgs(args), cmd.Configuration); err != nil {
		return false, fmt.Errorf("parsing flags: %w", err)
	}
	return false, nil
}

// validator ends the chain: a *Config is normalised, then checked.
type validator struct{}

func (validator) Load(_ []string, cmd *cli.Command) (bool, error) {
	cfg, ok := cmd.Configuration.(*Config)
	if !ok {
		return false, fmt.Errorf("node configuration: got %T, want *Config", cmd.Configuration)
	}
	if err := cfg.normalize(); err != nil {
		return false, err
	}
	return true, cfg.Validate()
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

// aliasArgs rewrites an aliased flag (-x, --x, -x=v, --x=v) to its paerser path.
func aliasArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		dashes := strings.TrimLeft(a, "-")
		if dashes == a || len(a)-len(dashes) > 2 {
			continue
		}
		name, value, hasValue := strings.Cut(dashes, "=")
		if to, ok := flagAliases[name]; ok {
			out[i] = "--" + to
			if hasValue {
				out[i] += "=" + value
			}
		}
		if a == "--" {
			copy(out[i+1:], args[i+1:])
			break
		}
	}
	return out
}
