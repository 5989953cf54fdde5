// Command scafo-node runs a scafo node (the default command, configured by paerser from
// file, SCAFO_* environment and flags) and, with a verb (routes, ingresses, domains, apps,
// help, version), talks to a running one; `scafo-node store adopt` acts on a node's state
// dir (it makes the node accept a store that is not the one it served). `scafo-node
// [verb] --help` (or `scafo-node help [verb]`) lists what each accepts.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/internal/listengate"
	"github.com/scafo/ingress/internal/settings"
	"github.com/scafo/ingress/internal/systemd"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/client"
)

// version and commit are set at build time:
// -ldflags "-X main.version=v0.3.0 -X main.commit=abc1234". Without commit, the
// binary's VCS stamp (debug.ReadBuildInfo's vcs.revision) names it.
var (
	version = "dev"
	commit  = ""
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		// One prefix, on every line of a multi-line error (every unknown key at once).
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "scafo-node:", line)
		}
		code := exitStatus(err) // 78 for the node's configuration, else client.ExitCode (node/client/exit.go)
		if code == exitConfig {
			refuseQueued()
		}
		os.Exit(code)
	}
}

// run executes scafo-node with args (os.Args without the program name). Before
// paerser's cli.Execute: --version is the version command, `help [verb…]` is the verb's
// --help, and a first argument that is neither a flag nor a verb is an unknown command.
// After: paerser's "command X error:" wrapping is taken off, so an error reads
// "scafo-node: <what>".
func run(args []string) error {
	root := rootCommand()
	switch {
	case len(args) > 0 && (args[0] == "--version" || args[0] == "-version"):
		args = append([]string{"version"}, args[1:]...)
	case len(args) > 0 && args[0] == "help" && !slices.ContainsFunc(args[1:], isHelpFlag):
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") {
				return fmt.Errorf("unknown flag %s: usage: scafo-node help [command…]", a)
			}
		}
		args = append(slices.Clone(args[1:]), "--help")
	}
	args = configCheckArgs(verbFirst(args))
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		names := verbNames()
		if !slices.Contains(names, args[0]) {
			msg := fmt.Sprintf("unknown command %q", args[0])
			if best := settings.Closest(args[0], names); best != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", best)
			}
			return errors.New(msg + "; scafo-node --help lists the commands")
		}
	}
	saved := os.Args
	os.Args = append([]string{"scafo-node"}, args...)
	defer func() { os.Args = saved }()
	return unwrapCommandError(cli.Execute(root))
}

// verbFirst moves a command given after flags to the front, as kubectl takes them:
// "--url=x apps get shop" is "apps get shop --url=x" (the verbs take their flags
// anywhere). An argument right after a flag without "=" is that flag's value, not a
// command.
func verbFirst(args []string) []string {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return args
	}
	names := verbNames()
	for i := 1; i < len(args); i++ {
		a, prev := args[i], args[i-1]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") || (strings.HasPrefix(prev, "-") && !strings.Contains(prev, "=")) {
			continue
		}
		if slices.Contains(names, a) {
			return append(slices.Clone(args[i:]), args[:i]...)
		}
		break
	}
	return args
}

func isHelpFlag(a string) bool { return a == "--help" || a == "-help" || a == "-h" }

// unwrapCommandError takes off paerser's "command <name> error: " (cli.Execute wraps
// every error of a command's loaders and Run in it).
func unwrapCommandError(err error) error {
	if err == nil {
		return nil
	}
	if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(err.Error(), "command ") &&
		strings.HasSuffix(err.Error(), " error: "+inner.Error()) {
		return inner
	}
	return err
}

// verbs are the root's commands.
func verbs() []*cli.Command {
	return append(client.Commands(), storeCommand(), configCommand(), frontCommand(), helpCommand(), versionCommand())
}

func verbNames() []string {
	var names []string
	for _, v := range verbs() {
		names = append(names, v.Name)
	}
	return names
}

// rootCommand is scafo-node: serve, configured by node.Loaders, plus the verbs.
func rootCommand() *cli.Command {
	cfg := node.NewConfig()
	vs := verbs()
	root := &cli.Command{
		Name:          "scafo-node",
		Description:   "scafo-node publishes the fleet's routing document and its Traefik rendering.",
		Configuration: cfg,
		Resources:     configLoaders(node.Loaders(os.Environ())),
		Run:           func([]string) error { return serve(cfg) },
		CustomHelpFunc: client.HelpWithEnv("scafo-node [flags]    serve (--ingress-token is an alias of --ingress.token)\n"+
			"       scafo-node <command> [arguments] [flags]\n"+
			"       scafo-node --version    the version command", vs, node.EnvPrefix),
	}
	for _, c := range vs {
		if err := root.AddCommand(c); err != nil {
			panic(err) // a programming error: a verb named scafo-node
		}
	}
	return root
}

// helpCommand is listed among the commands; run rewrites `help [verb…]` to the verb's
// --help before paerser sees it, so its Run is reached only through paerser directly.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:           "help",
		Description:    "Print the help of scafo-node or of a command (scafo-node help apps put).",
		CustomHelpFunc: client.Help("scafo-node help [command…]", nil),
		AllowArg:       true,
		Run: func([]string) error {
			return rootCommand().PrintHelp(os.Stdout)
		},
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:           "version",
		Description:    "Print the version, the commit and the Go version.",
		CustomHelpFunc: client.Help("scafo-node version", nil),
		AllowArg:       true,
		Run: func(args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unexpected %s: usage: scafo-node version", args[0])
			}
			fmt.Println(versionLine())
			return nil
		},
	}
}

// versionLine is "scafo-node v0.3.0 (commit abc1234, go1.26.8)".
func versionLine() string {
	c := commit
	if c == "" {
		c = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" {
				c = rev[:min(len(rev), 12)]
				if modified == "true" {
					c += "+dirty"
				}
			}
		}
	}
	return fmt.Sprintf("scafo-node %s (commit %s, %s)", version, c, runtime.Version())
}

// serve runs the node on cfg, which paerser has loaded and node.Loaders validated.
func serve(cfg *node.Config) error {
	log := newLogger(cfg.Log, os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ln, err := apiListener(cfg.Listen)
	if err != nil {
		return err
	}
	if cfg.Node.APIPort == 0 { // listen on port 0: the port the kernel chose
		cfg.Node.APIPort = ln.Addr().(*net.TCPAddr).Port
	}
	srv, err := node.New(ctx, cfg, log)
	if err != nil {
		ln.Close()
		return err
	}
	go func() {
		select {
		case <-srv.Serving():
			if err := systemd.Notify("READY=1"); err != nil {
				log.Warn("telling the service manager the node is ready", "err", err)
			}
		case <-ctx.Done():
		}
	}()
	return srv.Run(ctx, ln)
}

// apiListener is the API's listening socket: the one the service manager holds for the
// node (scafo-node.socket, handed over as LISTEN_FDS), so that the port is never free
// across a restart (docs/security.md, "The node's port"), or else one the node binds on
// listen. A handed-over socket must be on listen's port: the node tells peers and
// ingresses that port (node.apiPort) and refuses it to applications.
func apiListener(listen string) (net.Listener, error) {
	held, err := systemd.Inherited()
	if err != nil {
		return nil, configError{err} // scafo-node.socket is the unit's configuration
	}
	if held == nil {
		ln, err := listengate.Listen("tcp", listen) // not multipath TCP: the stop gates it
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %w", listen, err)
		}
		return ln, nil
	}
	addr, ok := held.Addr().(*net.TCPAddr)
	_, port, _ := net.SplitHostPort(listen)
	if !ok || (port != "0" && port != strconv.Itoa(addr.Port)) {
		refuseOn(held)
		return nil, configError{fmt.Errorf("listen %q: the service manager handed over a socket on %s (scafo-node.socket's ListenStream=): "+
			"set one port in both (systemctl edit scafo-node.socket, or listen in the configuration)", listen, held.Addr())}
	}
	return held, nil
}

// newLogger logs to w as log.level and log.format say (Validate has checked both).
func newLogger(c node.LogConfig, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.SlogLevel()}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
