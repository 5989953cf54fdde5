package client

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/traefik/paerser/cli"
	"github.com/traefik/paerser/flag"

	"github.com/scafo/ingress/internal/settings"
)

// Commands are the verbs that talk to a running node, for the root command's
// AddCommand: routes, ingresses, certs, domains list|paths|claim|release, apps list|put|get|rm, instances
// allocate|move|release, audit. They print to stdout; they end with the statuses of exit.go.
func Commands() []*cli.Command {
	return []*cli.Command{
		routesCommand(),
		ingressesCommand(),
		certsCommand(),
		Group("domains", "Custom domains: list, a host's path map, claims.",
			domainListCommand(), domainPathsCommand(), domainClaimCommand(), domainReleaseCommand()),
		Group("apps", "Applications: list, create or replace, show, delete.",
			appListCommand(), appPutCommand(), appGetCommand(), appRmCommand()),
		instancesCommand(),
		auditCommand(),
	}
}

// Help returns a cli.Command CustomHelpFunc: the description, the usage line, the
// subcommands (cmds), and every setting of the command's Configuration as a flag, with
// its default as the configuration reference writes it (250ms, 10m, 720h).
func Help(usage string, cmds []*cli.Command) func(io.Writer, *cli.Command) error {
	return HelpWithEnv(usage, cmds, "")
}

// HelpWithEnv is Help naming each flag's environment variable too (envPrefix + the
// path in capitals, "." as "_"): the node's own configuration.
func HelpWithEnv(usage string, cmds []*cli.Command, envPrefix string) func(io.Writer, *cli.Command) error {
	return func(w io.Writer, cmd *cli.Command) error {
		tw := tabwriter.NewWriter(w, 4, 0, 4, ' ', 0)
		fmt.Fprintf(tw, "%s\t%s\n\nUsage: %s\n", cmd.Name, cmd.Description, usage)
		if len(cmds) > 0 {
			fmt.Fprintf(tw, "\nCommands:\n")
			for _, c := range cmds {
				if !c.Hidden {
					fmt.Fprintf(tw, "\t%s\t%s\n", c.Name, c.Description)
				}
			}
		}
		if cmd.Configuration != nil {
			list := settings.List(cmd.Configuration, envPrefix)
			if len(list) > 0 {
				fmt.Fprintf(tw, "\nFlags:\n")
			}
			for _, s := range list {
				def := s.Default
				if def == "" || s.Secret {
					def = "none"
				}
				line := fmt.Sprintf("\t%s  (Default: %s)", s.Flag(), def)
				if s.Env != "" {
					line += "  [" + s.Env + "]"
				}
				fmt.Fprintln(tw, line)
				if s.Description != "" {
					fmt.Fprintf(tw, "\t\t%s\n", s.Description)
				}
			}
		}
		return tw.Flush()
	}
}

// withExitStatuses is a verb's help followed by the exit statuses (exit.go).
func withExitStatuses(help func(io.Writer, *cli.Command) error) func(io.Writer, *cli.Command) error {
	return func(w io.Writer, cmd *cli.Command) error {
		if err := help(w, cmd); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "\n%s\n", ExitStatuses)
		return err
	}
}

// Group is a command that only holds verbs (scafo-node <name> <command> …): its help
// lists them, and a missing or unknown verb is a usage error naming the closest.
func Group(name, desc string, verbs ...*cli.Command) *cli.Command {
	usage := "scafo-node " + name + " <command> [arguments] [flags]"
	g := &cli.Command{
		Name:           name,
		Description:    desc,
		CustomHelpFunc: Help(usage, verbs),
		AllowArg:       true,
		Run:            GroupRun(name, usage, verbs),
	}
	for _, v := range verbs {
		_ = g.AddCommand(v)
	}
	return g
}

// GroupRun is the Run of a command that only holds verbs (reached when no verb is
// named, or an unknown one): a usage error naming the closest verb.
func GroupRun(name, usage string, verbs []*cli.Command) func([]string) error {
	return func(args []string) error {
		if len(args) == 0 {
			return errors.New("usage: " + usage + " (--help lists the commands)")
		}
		var names []string
		for _, v := range verbs {
			names = append(names, v.Name)
		}
		hint := ""
		if best := settings.Closest(args[0], names); best != "" {
			hint = " (did you mean " + best + "?)"
		}
		if strings.HasPrefix(args[0], "-") {
			return fmt.Errorf("unknown flag %s: usage: %s", args[0], usage)
		}
		return fmt.Errorf("unknown command \"%s %s\"%s: usage: %s", name, args[0], hint, usage)
	}
}

// conner is a verb's configuration: it embeds Conn.
type conner interface{ conn() *Conn }

// verb builds a command run against a node. cfg is its paerser Configuration; usage
// names its nargs positional arguments. The flags may come before, between or after
// the positional arguments.
func verb(name, desc, usage string, nargs int, cfg conner, run func(c *client, args []string) error) *cli.Command {
	args := &argsLoader{}
	return &cli.Command{
		Name:           name,
		Description:    desc,
		Configuration:  cfg,
		Resources:      []cli.ResourceLoader{args},
		AllowArg:       nargs > 0,
		CustomHelpFunc: withExitStatuses(Help(usage, nil)),
		Run: func([]string) error {
			pos := args.pos
			if kv, ok := cfg.(keyValuer); ok {
				var err error
				if pos, err = kv.keyValues(pos); err != nil {
					return err
				}
			}
			if len(pos) != nargs {
				return errors.New("usage: " + usage)
			}
			c, err := dial(verbName(usage), *cfg.conn(), os.Stdout)
			if err != nil {
				return err
			}
			return run(c, pos)
		},
	}
}

// verbName is the verb a usage line names: "scafo-node apps put <app> …" is "apps put".
func verbName(usage string) string {
	var words []string
	for _, w := range strings.Fields(usage)[1:] {
		if strings.ContainsAny(w[:1], "<[-(") {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// keyValuer is a configuration that also takes its settings as key=value arguments:
// it sets them and returns the other arguments.
type keyValuer interface {
	keyValues(pos []string) ([]string, error)
}

// argsLoader is a verb's paerser resource: it decodes the flags into the command's
// Configuration and keeps the positional arguments for Run.
type argsLoader struct {
	pos []string
}

// Load implements cli.ResourceLoader.
func (l *argsLoader) Load(args []string, cmd *cli.Command) (bool, error) {
	pos, flags := splitArgs(args, boolFlags(cmd.Configuration))
	l.pos = pos
	if err := settings.NewKnown(cmd.Configuration, "").CheckFlags(flags, nil); err != nil {
		return false, err
	}
	if len(flags) > 0 {
		if err := flag.Decode(flags, cmd.Configuration); err != nil {
			return false, fmt.Errorf("parsing flags: %w", err)
		}
	}
	return true, nil
}

// splitArgs separates positional arguments from flags. A flag without "=" takes the
// next argument as its value unless it is a bool (isBool, lowercase names); "--" ends
// the flags.
func splitArgs(args []string, isBool map[string]bool) (pos, flags []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(pos, args[i+1:]...), flags
		case len(a) < 2 || a[0] != '-':
			pos = append(pos, a)
		case strings.Contains(a, "="):
			flags = append(flags, a)
		default:
			flags = append(flags, a)
			if !isBool[strings.ToLower(strings.TrimLeft(a, "-"))] && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	return pos, flags
}

// boolFlags names (lowercase, dotted) the bool settings of a configuration struct.
func boolFlags(cfg any) map[string]bool {
	out := map[string]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case !f.IsExported():
			case f.Anonymous:
				walk(f.Type, prefix)
			case f.Type.Kind() == reflect.Bool:
				out[prefix+strings.ToLower(f.Name)] = true
			default:
				walk(f.Type, prefix+strings.ToLower(f.Name)+".")
			}
		}
	}
	walk(reflect.TypeOf(cfg), "")
	return out
}
