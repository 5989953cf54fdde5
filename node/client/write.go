package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/traefik/paerser/cli"
)

// The write verbs: apps put|get|rm, domains claim|release. No verb writes a path map:
// the publishing application is the only writer of that state (through its token and
// the API).

// appPutConfig is the configuration of `apps put`: the application's settings as
// flags (or key=value arguments), plus which node and the output format.
type appPutConfig struct {
	Conn
	Output
	Account   string   `description:"Account that owns the application (required)." json:"account,omitempty"`
	Placement []string `description:"Nodes the application runs on, in order of preference (n1,n2)." json:"placement,omitempty"`
	Health    string   `description:"Health check path of the application's instances (e.g. /healthz)." json:"health,omitempty"`
}

// keyValues takes account=, placement= and health= arguments: the form kept from
// before these were flags.
func (a *appPutConfig) keyValues(args []string) ([]string, error) {
	var rest []string
	for _, kv := range args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			rest = append(rest, kv)
			continue
		}
		switch k {
		case "account":
			a.Account = v
		case "placement":
			a.Placement = nil
			if v != "" {
				a.Placement = strings.Split(v, ",")
			}
		case "health":
			a.Health = v
		default:
			return nil, fmt.Errorf("argument %q: unknown key %q (account, placement, health)", kv, k)
		}
	}
	return rest, nil
}

func appPutCommand() *cli.Command {
	cfg := &appPutConfig{}
	cfg.SetDefaults()
	return verb("put", "Create or replace an application.",
		"scafo-node apps put <app> --account=<acct> [--placement=<n1,n2>] [--health=<path>] [flags]\n"+
			"       (account=<acct> placement=<n1,n2> health=<path> arguments are also accepted)",
		1, cfg, func(c *client, args []string) error { return cmdAppsPut(c, args[0], cfg) })
}

func appGetCommand() *cli.Command {
	cfg := &readConfig{}
	cfg.SetDefaults()
	return verb("get", "Show an application.", "scafo-node apps get <app> [flags]", 1, cfg,
		func(c *client, args []string) error { return cmdAppsGet(c, args[0], cfg.JSON) })
}

func appRmCommand() *cli.Command {
	cfg := &Conn{}
	cfg.SetDefaults()
	return verb("rm", "Delete an application.", "scafo-node apps rm <app> [flags]", 1, cfg,
		func(c *client, args []string) error { return cmdAppsRm(c, args[0]) })
}

func domainClaimCommand() *cli.Command {
	cfg := &Conn{}
	cfg.SetDefaults()
	return verb("claim", "Claim a custom domain for an application.", "scafo-node domains claim <app> <host> [flags]", 2, cfg,
		func(c *client, args []string) error { return cmdDomainsClaim(c, args[0], args[1]) })
}

func domainReleaseCommand() *cli.Command {
	cfg := &Conn{}
	cfg.SetDefaults()
	return verb("release", "Release an application's custom domain.", "scafo-node domains release <app> <host> [flags]", 2, cfg,
		func(c *client, args []string) error { return cmdDomainsRelease(c, args[0], args[1]) })
}

func cmdAppsPut(c *client, app string, a *appPutConfig) error {
	if a.Account == "" {
		return errors.New("apps put: --account is required")
	}
	body := map[string]any{"account": a.Account, "placement": a.Placement}
	if a.Placement == nil {
		body["placement"] = []string{}
	}
	if a.Health != "" {
		body["health"] = map[string]string{"path": a.Health}
	}
	b, _ := json.Marshal(body)
	var raw json.RawMessage
	if err := c.do(http.MethodPut, "/v1/apps/"+app, strings.NewReader(string(b)), &raw); err != nil {
		return err
	}
	return c.printApp(raw, a.JSON)
}

func cmdAppsGet(c *client, app string, asJSON bool) error {
	var raw json.RawMessage
	if err := c.do(http.MethodGet, "/v1/apps/"+app, nil, &raw); err != nil {
		return err
	}
	return c.printApp(raw, asJSON)
}

func (c *client) printApp(raw []byte, asJSON bool) error {
	if asJSON {
		return c.printJSON(raw)
	}
	var a struct {
		Name, Account string
		Placement     []string
		Health        *struct{ Path string }
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\naccount\t%s\nplacement\t%s\n", a.Name, a.Account, strings.Join(a.Placement, " > "))
	if a.Health != nil {
		fmt.Fprintf(tw, "health\t%s\n", a.Health.Path)
	}
	return tw.Flush()
}

func cmdAppsRm(c *client, app string) error {
	if err := c.do(http.MethodDelete, "/v1/apps/"+app, nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "deleted %s\n", app)
	return nil
}

func cmdDomainsClaim(c *client, app, host string) error {
	if err := c.do(http.MethodPut, "/v1/apps/"+app+"/domains/"+host, nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s claimed by %s\n", host, app)
	return nil
}

func cmdDomainsRelease(c *client, app, host string) error {
	if err := c.do(http.MethodDelete, "/v1/apps/"+app+"/domains/"+host, nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s released by %s\n", host, app)
	return nil
}
