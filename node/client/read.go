package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/render/routing"
)

// readConfig is the configuration of the verbs that print: which node, text or JSON.
type readConfig struct {
	Conn
	Output
}

func routesCommand() *cli.Command {
	cfg := &readConfig{}
	cfg.SetDefaults()
	return verb("routes", "Every host with its application and ordered upstreams; path rows under their host.",
		"scafo-node routes [flags]", 0, cfg,
		func(c *client, _ []string) error { return cmdRoutes(c, cfg.JSON) })
}

func domainPathsCommand() *cli.Command {
	cfg := &readConfig{}
	cfg.SetDefaults()
	return verb("paths", "Print a host's published path map.",
		"scafo-node domains paths <host> [flags]", 1, cfg,
		func(c *client, args []string) error { return cmdDomainPaths(c, args[0], cfg.JSON) })
}

func cmdRoutes(c *client, asJSON bool) error {
	var raw json.RawMessage
	if err := c.do(http.MethodGet, "/v1/ingress/routes", nil, &raw); err != nil {
		return err
	}
	if asJSON {
		return c.printJSON(raw)
	}
	doc, err := routing.Decode(raw)
	if err != nil {
		return fmt.Errorf("decoding routing document: %w", err)
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "HOST\tAPPLICATION\tUPSTREAMS\n")
	for _, r := range doc.Routes {
		ups := make([]string, len(r.Upstreams))
		for i, u := range r.Upstreams {
			ups[i] = u.Node + "=" + u.Address
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Host, r.Application, strings.Join(ups, " > "))
		keys := make([]string, 0, len(r.Paths))
		for k := range r.Paths {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "  /%s → %s\t\t\n", k, r.Paths[k])
		}
	}
	if doc.API != nil {
		ups := make([]string, len(doc.API.Upstreams))
		for i, u := range doc.API.Upstreams {
			ups[i] = u.Node + "=" + u.Address
		}
		for _, h := range doc.API.Hosts {
			fmt.Fprintf(tw, "%s\t(node API)\t%s\n", h, strings.Join(ups, " > "))
		}
	}
	fmt.Fprintf(tw, "revision %s\n", doc.Revision)
	return tw.Flush()
}

func cmdDomainPaths(c *client, host string, asJSON bool) error {
	host = routing.FoldHost(host)
	var raw json.RawMessage
	if err := c.do(http.MethodGet, "/v1/ingress/routes", nil, &raw); err != nil {
		return err
	}
	doc, err := routing.Decode(raw)
	if err != nil {
		return fmt.Errorf("decoding routing document: %w", err)
	}
	for _, r := range doc.Routes {
		if r.Host != host {
			continue
		}
		if asJSON {
			b, _ := json.Marshal(map[string]any{"host": r.Host, "paths": r.Paths})
			return c.printJSON(b)
		}
		keys := make([]string, 0, len(r.Paths))
		for k := range r.Paths {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "%s\t(%s)\n", r.Host, r.Application)
		for _, k := range keys {
			fmt.Fprintf(tw, "  /%s → %s\n", k, r.Paths[k])
		}
		return tw.Flush()
	}
	return fmt.Errorf("%s: no route for that host", host)
}
