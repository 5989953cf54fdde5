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

	"github.com/scafo/ingress/internal/settings"
	"github.com/scafo/ingress/internal/systemd"
	"github.com/scafo/ingress/node/client"
	"github.com/scafo/ingress/node/front"
)

// frontCommand is `scafo-node front`: the layer-4 front (node/front), configured by a
// file (--configFile) and flags, checked as strictly as the node's (a setting the front
// does not have is refused, naming it). It reads one variable, SCAFO_INGRESS_TOKEN, and
// no SCAFO_* setting variables: the node's variables are often in the same
// environment, and would be taken for the front's. A configuration it refuses exits 78,
// as the node's.
func frontCommand() *cli.Command {
	cfg := front.Defaults()
	return &cli.Command{
		Name: "front",
		Description: "Serve the layer-4 front: 443/tcp and 443/udp routed by the exact TLS server name to passthrough " +
			"applications, everything else to Traefik (docs/passthrough.md).",
		Configuration:  &cfg,
		Resources:      configLoaders(frontLoaders(os.Environ())),
		CustomHelpFunc: client.Help("scafo-node front [--configFile=FILE] [flags]", nil),
		Run:            func([]string) error { return serveFront(&cfg) },
	}
}

// frontLoaders is the front's settings chain. The token may also come from
// SCAFO_INGRESS_TOKEN (the variable Traefik's unit reads from /etc/scafo/ingress.env):
// read as token when no source sets token, never beside another value.
func frontLoaders(environ []string) []cli.ResourceLoader {
	return settings.Chain{
		// No variable is a setting of the front's (NotSetting takes every one).
		Environ: environ, EnvPrefix: "SCAFO_", NotSetting: func(string) bool { return true },
		Finish: func(c any, origins *settings.Origins) error {
			cfg, ok := c.(*front.Config)
			if !ok {
				return fmt.Errorf("front configuration: got %T", c)
			}
			if cfg.Token == "" {
				for _, kv := range environ {
					if v, ok := strings.CutPrefix(kv, "SCAFO_INGRESS_TOKEN="); ok {
						cfg.Token = v
					}
				}
			}
			return origins.Explain(cfg.Validate())
		},
	}.Loaders()
}

func serveFront(cfg *front.Config) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	socks, err := front.OpenSockets(cfg)
	if err != nil {
		return configError{err}
	}
	f, err := front.New(*cfg, nil, log)
	if err != nil {
		return configError{err}
	}
	return f.Serve(ctx, socks, func() {
		if err := systemd.Notify("READY=1"); err != nil {
			log.Warn("telling the service manager the front is ready", "err", err)
		}
	})
}
