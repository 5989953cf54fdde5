// Command scafo-node runs a scafo node (the default command) and talks to one.
//
//	scafo-node [flags]                 serve (see --help for every setting)
//	scafo-node routes [--json]         every host, its application and upstreams, path rows under their host
//	scafo-node domains paths <host>    a claim's path map
//	scafo-node version
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/node"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	cfg := node.NewConfig()
	root := &cli.Command{
		Name:          "scafo-node",
		Description:   "scafo-node publishes the fleet's routing document and its Traefik rendering.",
		Configuration: cfg,
		Resources:     node.Loaders(os.Environ()),
		Run:           func([]string) error { return serve(cfg) },
	}
	for _, c := range node.ClientCommands(version) {
		if err := root.AddCommand(c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if err := cli.Execute(root); err != nil {
		fmt.Fprintln(os.Stderr, "scafo-node:", err)
		os.Exit(1)
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
	ln, err := net.Listen("tcp", cfg.Listen)
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
