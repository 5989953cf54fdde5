package node

// The configuration's paerser loaders: the file, the environment, the flags, in
// that order, each overriding the last field by field, then Validate.

import (
	"fmt"
	"strings"

	"github.com/traefik/paerser/cli"
	"github.com/traefik/paerser/env"
	"github.com/traefik/paerser/file"
	"github.com/traefik/paerser/flag"
	"github.com/traefik/paerser/parser"
)

// Loaders is the node configuration's paerser resource chain, for the root
// cli.Command's Resources: the file (--configFile, else SCAFO_CONFIGFILE), then the
// SCAFO_* variables of environ, then flags, then Validate. Unlike Traefik's chain, where
// the first source found wins, every loader answers "not done", so paerser runs them all
// and each source overrides the earlier ones field by field: a secret can come from the
// environment while everything else is in the file.
func Loaders(environ []string) []cli.ResourceLoader {
	return []cli.ResourceLoader{
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
	ref, err := flag.Parse(aliasArgs(args), cmd.Configuration)
	if err != nil {
		return false, fmt.Errorf("parsing flags: %w", err)
	}
	var path string
	for k, v := range ref { // paerser keeps the spelling given: --configFile or --configfile
		if strings.EqualFold(k, parser.DefaultRootName+".configFile") {
			path = v
		}
	}
	if path == "" {
		for _, kv := range l.Environ {
			if v, ok := strings.CutPrefix(kv, EnvPrefix+"CONFIGFILE="); ok {
				path = v
			}
		}
	}
	if path == "" {
		return false, nil
	}
	if err := file.Decode(path, cmd.Configuration); err != nil {
		return false, fmt.Errorf("reading config file %s: %w", path, err)
	}
	return false, nil
}

// EnvLoader decodes the SCAFO_* variables of Environ into the command's configuration.
// A variable under a known section that names no setting (SCAFO_NODE_NAEM) is an error.
type EnvLoader struct {
	Environ []string
}

// Load implements cli.ResourceLoader.
func (l *EnvLoader) Load(_ []string, cmd *cli.Command) (bool, error) {
	vars := env.FindPrefixedEnvVars(l.Environ, EnvPrefix, cmd.Configuration)
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

// validator ends the chain: a *Config is checked and its derived defaults filled.
type validator struct{}

func (validator) Load(_ []string, cmd *cli.Command) (bool, error) {
	cfg, ok := cmd.Configuration.(*Config)
	if !ok {
		return false, fmt.Errorf("node configuration: got %T, want *Config", cmd.Configuration)
	}
	return true, cfg.Validate()
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
