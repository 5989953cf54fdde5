package settings

// A configuration's paerser loaders: a strict check of every source, then the file,
// the environment, the flags, in that order, each overriding the last field by field,
// then the configuration's own finish (normalise and validate).

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/traefik/paerser/cli"
	"github.com/traefik/paerser/env"
	"github.com/traefik/paerser/file"
	"github.com/traefik/paerser/flag"
	"github.com/traefik/paerser/parser"
)

// Chain describes one program's configuration sources.
type Chain struct {
	// Environ is the process environment (os.Environ()).
	Environ []string
	// EnvPrefix starts every variable that names a setting (SCAFO_).
	EnvPrefix string
	// Removed are the settings a past version had (path → what to do instead): naming
	// one is refused as removed, not as unknown.
	Removed map[string]string
	// NotSetting says whether a variable with EnvPrefix belongs to another program: it
	// is neither refused nor read (nil: every such variable is a setting).
	NotSetting func(name string) bool
	// Aliases are flag spellings kept beside the paerser path they stand for
	// ("ingress-token" → "ingress.token").
	Aliases map[string]string
	// Finish ends the chain: it normalises and validates the loaded configuration.
	// origins says which source set each setting (the strict check recorded them), so
	// that its errors can name the source (Origins.Explain) as the strict check's do.
	Finish func(cfg any, origins *Origins) error
}

// Loaders is the chain, for a cli.Command's Resources: Strict, then the file
// (--configFile, else <EnvPrefix>CONFIGFILE), then the variables, then the flags, then
// Finish. Unlike Traefik's chain, where the first source found wins, every loader
// answers "not done", so paerser runs them all and each source overrides the earlier
// ones field by field: a secret can come from the environment while everything else
// is in the file.
//
// The chain starts with Strict: paerser ignores a file key it does not know and reads
// a value's error without the setting's name, so every source is checked first. The
// check records which source set each setting, for Finish.
func (c Chain) Loaders() []cli.ResourceLoader {
	o := &Origins{}
	read := &fileRead{}
	return []cli.ResourceLoader{strictLoader{c, o, read}, fileLoader{c, read}, envLoader{c}, FlagLoader{Aliases: c.Aliases}, finishLoader{c, o}}
}

func (c Chain) notSetting(name string) bool { return c.NotSetting != nil && c.NotSetting(name) }

// fileLoader decodes the file named by --configFile (or <EnvPrefix>CONFIGFILE) into
// the command's configuration. No file named, nothing read: there is no search path.
// A named file that cannot be read is an error.
//
// It decodes the very bytes the strict check read, bounded and checked (fileRead), and
// never opens the file again: a second read (paerser's file.Decode) took whatever the
// path held then, unbounded and unchecked (a FIFO answering its second open with 100
// MiB, a file swapped between the reads; hostile review 2).
type fileLoader struct {
	c    Chain
	read *fileRead
}

// fileRead is the configuration file as the strict check read it, for the file loader:
// its bytes and whether it sets anything (the check parsed it already).
type fileRead struct {
	path    string
	content []byte
	sets    bool
}

func (l fileLoader) Load(args []string, cmd *cli.Command) (bool, error) {
	path, err := l.c.configFilePath(args, cmd.Configuration)
	if err != nil || path == "" {
		return false, err
	}
	read := *l.read
	if read.path != path || read.content == nil {
		// Not read by the strict check (it is not in this chain's order): read it here,
		// bounded and checked alike.
		if read.content, err = ReadFile(path); err != nil {
			return false, err
		}
		var p problems
		if read.sets, err = NewKnown(cmd.Configuration, l.c.EnvPrefix).checkFile(path, read.content, &p); err == nil {
			err = p.err()
		}
		if err != nil {
			return false, err
		}
	}
	if err := decodeContent(path, read, cmd.Configuration); err != nil {
		return false, fmt.Errorf("reading config file %s: %w", path, err)
	}
	return false, nil
}

// decodeContent is paerser's file.Decode on a file read (and parsed by the check)
// already: the same refusal of an unknown extension and of a file that sets nothing,
// then paerser's own parse and fill, the file's only other parse.
func decodeContent(path string, read fileRead, cfg any) error {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".toml", ".yml", ".yaml", ".json":
	default:
		return fmt.Errorf("unsupported file extension: %s", path)
	}
	if !read.sets {
		return fmt.Errorf("no configuration found in file: %s", path)
	}
	return file.DecodeContent(string(read.content), ext, cfg)
}

// configFilePath is --configFile, else <EnvPrefix>CONFIGFILE ("" for neither).
func (c Chain) configFilePath(args []string, cfg any) (string, error) {
	ref, err := flag.Parse(aliasArgs(args, c.Aliases), cfg)
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
		for _, kv := range c.Environ {
			if v, ok := strings.CutPrefix(kv, c.EnvPrefix+"CONFIGFILE="); ok {
				path = v
			}
		}
	}
	return path, nil
}

// strictLoader checks the three sources before paerser reads them: every flag, every
// variable with EnvPrefix (but those of NotSetting) and every key of the file must
// name a setting, and every value must parse. Each error names the setting and its
// source, with the closest known name when there is one: "unknown flag --listne (did
// you mean --listen?)", "SCAFO_API_PUBLIC: \"yes\" is not a boolean (true or false)",
// "stores in /etc/scafo/scafo-node.yaml: unknown key (did you mean store?)". All the
// problems are reported at once, the first MaxReported of the three sources named and
// the others counted ("and 199 980 more"). The file is read once (the file loader decodes
// these bytes, fileRead) and bounded
// (MaxFileBytes, MaxFileDepth, MaxAliasValues: bounds.go) before it is parsed.
type strictLoader struct {
	c       Chain
	origins *Origins  // filled here, read by the finish
	read    *fileRead // filled here, decoded by the file loader
}

func (l strictLoader) Load(args []string, cmd *cli.Command) (bool, error) {
	known := NewKnown(cmd.Configuration, l.c.EnvPrefix)
	*l.origins = *newOrigins(known)
	known.origins = l.origins
	for path, why := range l.c.Removed {
		known.Removed(path, why)
	}
	var p problems
	known.checkFlags(args, l.c.Aliases, &p)
	flagsBad := p.count() > 0
	known.checkEnv(l.c.Environ, l.c.EnvPrefix, l.c.notSetting, &p)
	// The file too, when the flags still name it (a flag without its value may not).
	if path, err := l.c.configFilePath(args, cmd.Configuration); err == nil || !flagsBad {
		if err != nil {
			return false, err
		}
		if path != "" {
			content, err := ReadFile(path)
			if err == nil {
				var sets bool
				sets, err = known.checkFile(path, content, &p)
				*l.read = fileRead{path: path, content: content, sets: sets}
			}
			if err != nil { // the file's own error first, then the flags' and variables'
				return false, errors.Join(err, p.err())
			}
		}
	}
	return false, p.err()
}

// envLoader decodes the variables with EnvPrefix into the command's configuration.
type envLoader struct{ c Chain }

func (l envLoader) Load(_ []string, cmd *cli.Command) (bool, error) {
	// Strict has refused a variable naming no setting, but those of NotSetting: they
	// are left out, where paerser would read SCAFO_INGRESS_NAME as under ingress.
	var vars []string
	for _, kv := range env.FindPrefixedEnvVars(l.c.Environ, l.c.EnvPrefix, cmd.Configuration) {
		if name, _, _ := strings.Cut(kv, "="); !l.c.notSetting(name) {
			vars = append(vars, kv)
		}
	}
	if len(vars) == 0 {
		return false, nil
	}
	if err := env.Decode(vars, l.c.EnvPrefix, cmd.Configuration); err != nil {
		return false, fmt.Errorf("reading %s* environment: %w", l.c.EnvPrefix, err)
	}
	return false, nil
}

// FlagLoader decodes the flags into the command's configuration, an alias read as the
// path it stands for.
type FlagLoader struct {
	Aliases map[string]string
}

// Load implements cli.ResourceLoader.
func (l FlagLoader) Load(args []string, cmd *cli.Command) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	if err := flag.Decode(aliasArgs(args, l.Aliases), cmd.Configuration); err != nil {
		return false, fmt.Errorf("parsing flags: %w", err)
	}
	return false, nil
}

// finishLoader ends the chain with the configuration's Finish.
type finishLoader struct {
	c       Chain
	origins *Origins
}

func (l finishLoader) Load(_ []string, cmd *cli.Command) (bool, error) {
	if l.c.Finish == nil {
		return true, nil
	}
	return true, l.c.Finish(cmd.Configuration, l.origins)
}

// aliasArgs rewrites an aliased flag (-x, --x, -x=v, --x=v) to its paerser path.
func aliasArgs(args []string, aliases map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		dashes := strings.TrimLeft(a, "-")
		if dashes == a || len(a)-len(dashes) > 2 {
			continue
		}
		name, value, hasValue := strings.Cut(dashes, "=")
		if to, ok := aliases[name]; ok {
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
