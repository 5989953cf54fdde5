package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/internal/systemd"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/client"
)

// exitConfig is the exit status of a node refused for its configuration: EX_CONFIG of
// sysexits.h. The unit's RestartPreventExitStatus= names it, so that systemd does not
// restart a node that cannot start until its start limit hides the reason
// (docs/install.md, "When the node does not start").
const exitConfig = 78

// configError is an error in the node's configuration (a loader refused it, or the
// socket the service manager handed over does not match it): the command exits
// exitConfig, as for a *node.ConfigError (a token two roles accept, found in the token
// files at the start).
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// configLoaders marks every error of loaders as a configError.
func configLoaders(loaders []cli.ResourceLoader) []cli.ResourceLoader {
	out := make([]cli.ResourceLoader, len(loaders))
	for i, l := range loaders {
		out[i] = markConfig{l}
	}
	return out
}

type markConfig struct{ cli.ResourceLoader }

func (m markConfig) Load(args []string, cmd *cli.Command) (bool, error) {
	done, err := m.ResourceLoader.Load(args, cmd)
	if err != nil {
		return done, configError{err}
	}
	return done, nil
}

// exitStatus is the command's exit status for err: exitConfig for the node's
// configuration, else the verbs' (client.ExitCode: 1 unless a verb says otherwise).
func exitStatus(err error) int {
	if errors.As(err, new(configError)) || errors.As(err, new(*node.ConfigError)) {
		return exitConfig
	}
	return client.ExitCode(err)
}

// refuseWindow is how long a node refused for its configuration keeps answering 503 on
// the held socket before it exits: at most one start per window per connecting client,
// whatever their number (a start and its refusal took 136 to 362 ms here).
const refuseWindow = time.Second

// refuseQueued answers, when the service manager handed over the API's socket, every
// connection queued on it, and every one arriving within refuseWindow, with a 503 before
// a node refused for its configuration exits. systemd starts the node again for a
// socket with connections queued: left there, they would start it in a loop (and, but
// for the socket unit's TriggerLimitIntervalSec=0, the socket's trigger limit would stop
// the socket and free its port for any process to take). Emptied, only a new connection
// starts it again (the unit has no start limit), at most one per refuseWindow, to be
// refused the same way; the reason is in the journal, which the answer points to.
func refuseQueued() {
	if held, err := systemd.Inherited(); err == nil && held != nil {
		refuseOn(held)
	}
}

// refuseOn answers what is queued on held with a 503, then closes it.
func refuseOn(held *systemd.Listener) {
	defer held.Close()
	tcp, ok := held.Listener.(*net.TCPListener)
	if !ok {
		return
	}
	const body = `{"error":"node not started","detail":"the node's configuration is refused: journalctl -u scafo-node says why"}` + "\n"
	tcp.SetDeadline(time.Now().Add(refuseWindow))
	for {
		c, err := tcp.Accept()
		if err != nil {
			return
		}
		c.SetDeadline(time.Now().Add(100 * time.Millisecond))
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		c.Close()
	}
}

// configCommand is `scafo-node config`: the node's configuration, checked without a node.
func configCommand() *cli.Command {
	return client.Group("config", "The node's configuration: check a file, the variables and the flags without starting a node.",
		configCheckCommand())
}

// configCheckCommand is `scafo-node config check [--configFile=FILE] [node flags]`: the
// node's whole loading (file, SCAFO_* variables, flags, the checks a start makes of
// them) and nothing else: no state dir, store or port is touched. It prints the file it
// read and exits 0, or the refusals (each naming its setting) and exits 78, as the node
// would. `scafo-node config check FILE` is `--configFile=FILE`.
func configCheckCommand() *cli.Command {
	cfg := node.NewConfig()
	usage := "scafo-node config check [FILE] [node flags]"
	return &cli.Command{
		Name: "check",
		Description: "Load the node's configuration (FILE, SCAFO_* variables, flags) as a start would, " +
			"and say whether the node would start on it (exit 0), or why not (exit 78), without starting it.",
		Configuration:  cfg,
		Resources:      configLoaders(node.Loaders(os.Environ())),
		CustomHelpFunc: client.Help(usage, nil),
		Run: func([]string) error { // the loaders refused every argument but the node's flags
			src := "no file (defaults, SCAFO_* variables and flags)"
			if cfg.ConfigFile != "" {
				src = cfg.ConfigFile
			}
			fmt.Printf("configuration OK: %s\n", src)
			return nil
		},
	}
}

// configCheckArgs turns `config check FILE …` into `config check --configFile=FILE …`.
func configCheckArgs(args []string) []string {
	if len(args) >= 3 && args[0] == "config" && args[1] == "check" && args[2] != "" && args[2][0] != '-' {
		return append([]string{"config", "check", "--configFile=" + args[2]}, args[3:]...)
	}
	return args
}
