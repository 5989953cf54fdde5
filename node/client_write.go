package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/traefik/paerser/cli"
)

// appPutArgs is the input of `apps put`.
type appPutArgs struct {
	account   string
	placement []string
	health    string
}

// extraClientCommands are the write verbs: apps put|get|rm, domains claim|release.
// No verb writes a path map: the publishing application is the only writer of that
// state (through its token and the API).
func extraClientCommands() []subcommand {
	apps := &cli.Command{
		Name:        "apps",
		Description: "Applications: put <app> --account=… --placement=a,b [--health=/healthz], get <app>, rm <app>.",
		Run: func([]string) error {
			return errors.New("usage: scafo-node apps put|get|rm <app>")
		},
	}
	_ = apps.AddCommand(clientCommand("put", "Create or replace an application: put <app> account=<acct> placement=<n1,n2> [health=/path].", true, cmdAppsPut))
	_ = apps.AddCommand(clientCommand("get", "Show an application.", true, cmdAppsGet))
	_ = apps.AddCommand(clientCommand("rm", "Delete an application.", true, cmdAppsRm))
	return []subcommand{
		{cmd: apps},
		{parent: "domains", cmd: clientCommand("claim", "Claim a custom domain: claim <app> <host>.", true, cmdDomainsClaim)},
		{parent: "domains", cmd: clientCommand("release", "Release a custom domain: release <app> <host>.", true, cmdDomainsRelease)},
	}
}

// cmdAppsPut takes key=value arguments (paerser flags are bound to ClientConfig).
func cmdAppsPut(c *client, args []string) error {
	if len(args) < 2 {
		return errors.New("usage: scafo-node apps put <app> account=<acct> [placement=<n1,n2>] [health=/path]")
	}
	app := args[0]
	var a appPutArgs
	for _, kv := range args[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("argument %q: want key=value", kv)
		}
		switch k {
		case "account":
			a.account = v
		case "placement":
			if v != "" {
				a.placement = strings.Split(v, ",")
			}
		case "health":
			a.health = v
		default:
			return fmt.Errorf("argument %q: unknown key %q (account, placement, health)", kv, k)
		}
	}
	body := map[string]any{"account": a.account, "placement": a.placement}
	if a.placement == nil {
		body["placement"] = []string{}
	}
	if a.health != "" {
		body["health"] = map[string]string{"path": a.health}
	}
	b, _ := json.Marshal(body)
	var raw json.RawMessage
	if err := c.do(http.MethodPut, "/v1/apps/"+app, strings.NewReader(string(b)), &raw); err != nil {
		return err
	}
	return c.printApp(raw)
}

func cmdAppsGet(c *client, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: scafo-node apps get <app>")
	}
	var raw json.RawMessage
	if err := c.do(http.MethodGet, "/v1/apps/"+args[0], nil, &raw); err != nil {
		return err
	}
	return c.printApp(raw)
}

func (c *client) printApp(raw []byte) error {
	if c.cfg.JSON {
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

func cmdAppsRm(c *client, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: scafo-node apps rm <app>")
	}
	if err := c.do(http.MethodDelete, "/v1/apps/"+args[0], nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "deleted %s\n", args[0])
	return nil
}

func cmdDomainsClaim(c *client, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: scafo-node domains claim <app> <host>")
	}
	if err := c.do(http.MethodPut, "/v1/apps/"+args[0]+"/domains/"+args[1], nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s claimed by %s\n", args[1], args[0])
	return nil
}

func cmdDomainsRelease(c *client, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: scafo-node domains release <app> <host>")
	}
	if err := c.do(http.MethodDelete, "/v1/apps/"+args[0]+"/domains/"+args[1], nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s released by %s\n", args[1], args[0])
	return nil
}
