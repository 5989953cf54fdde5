// Command scafo-node runs a scafo node (the default command, configured by paerser from
// file, SCAFO_* environment and flags) and, with a verb (routes, ingresses, domains, apps, version),
// talks to a running one; `scafo-node store adopt` acts on a node's state dir (it makes
// the node accept a store that is not the one it served). `scafo-node [verb] --help`
// lists what each accepts.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/internal/listengate"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/client"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if err := cli.Execute(rootCommand()); err != nil {
		fmt.Fprintln(os.Stderr, "scafo-node:", err)
		os.Exit(1)
	}
}

// rootCommand is scafo-node: serve, configured by node.Loaders, plus the verbs.
func rootCommand() *cli.Command {
	cfg := node.NewConfig()
	verbs := append(client.Commands(), storeCommand(), versionCommand())
	root := &cli.Command{
		Name:          "scafo-node",
		Description:   "scafo-node publishes the fleet's routing document and its Traefik rendering.",
		Configuration: cfg,
		Resources:     node.Loaders(os.Environ()),
		Run:           func([]string) error { return serve(cfg) },
		CustomHelpFunc: client.Help("scafo-node [flags]    serve (--ingress-token is an alias of --ingress.token)\n"+
			"       scafo-node <command> [arguments] [flags]", verbs),
	}
	for _, c := range verbs {
		if err := root.AddCommand(c); err != nil {
			panic(err) // a programming error: a verb named scafo-node
		}
	}
	return root
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:           "version",
		Description:    "Print the version.",
		CustomHelpFunc: client.Help("scafo-node version", nil),
		Run: func(args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unexpected %s: usage: scafo-node version", args[0])
			}
			fmt.Println("scafo-node", version)
			return nil
		},
	}
}

// serve runs the node on cfg, which paerser has loaded and node.Loaders validated.
func serve(cfg *node.Config) error {
	log := newLogger(cfg.Log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := node.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	ln, err := listengate.Listen("tcp", cfg.Listen) // not multipath TCP: the stop gates it
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	return srv.Run(ctx, ln)
}

func newLogger(c node.LogConfig) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToUpper(c.Level))); err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
