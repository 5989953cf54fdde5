package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/node/api"
)

// The write verbs: apps put|get|rm, domains claim|release. No verb writes a path map:
// the publishing application is the only writer of that state (through its token and
// the API).

// appPutConfig is the configuration of `apps put`: the application's settings as
// flags (or key=value arguments), plus which node and the output format.
type appPutConfig struct {
	Conn
	Output
	Waiting
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
	return verb("put", "Create or replace an application, whole: a setting not given is cleared, not kept.",
		"scafo-node apps put <app> --account=<acct> [--placement=<n1,n2>] [--health=<path>] [flags]\n"+
			"       (account=<acct> placement=<n1,n2> health=<path> arguments are also accepted)\n"+
			"       The application is replaced as a whole: give every setting it keeps (a put without\n"+
			"       --health removes the health check; apps get shows what is set).",
		1, cfg, func(c *client, args []string) error { return cmdAppsPut(c, args[0], cfg) })
}

func appGetCommand() *cli.Command {
	cfg := &readConfig{}
	cfg.SetDefaults()
	return verb("get", "Show an application.", "scafo-node apps get <app> [flags]", 1, cfg,
		func(c *client, args []string) error { return cmdAppsGet(c, args[0], cfg.JSON) })
}

func appRmCommand() *cli.Command {
	cfg := &writeConfig{}
	cfg.SetDefaults()
	return verb("rm", "Delete an application.", "scafo-node apps rm <app> [flags]", 1, cfg,
		func(c *client, args []string) error { return cmdAppsRm(c, args[0], cfg.Wait) })
}

func domainClaimCommand() *cli.Command {
	cfg := &writeConfig{}
	cfg.SetDefaults()
	return verb("claim", "Claim a custom domain for an application.", "scafo-node domains claim <app> <host> [flags]", 2, cfg,
		func(c *client, args []string) error { return cmdDomainsClaim(c, args[0], args[1], cfg.Wait) })
}

func domainReleaseCommand() *cli.Command {
	cfg := &writeConfig{}
	cfg.SetDefaults()
	return verb("release", "Release an application's custom domain.", "scafo-node domains release <app> <host> [flags]", 2, cfg,
		func(c *client, args []string) error { return cmdDomainsRelease(c, args[0], args[1], cfg.Wait) })
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
	raw, live, err := c.write(http.MethodPut, "/v1/apps/"+app, strings.NewReader(string(b)), a.Wait)
	if err != nil {
		return err
	}
	if err := c.printApp(raw, a.JSON); err != nil {
		return err
	}
	return live()
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
		Warnings      []string // a write's: accepted, but the writer should know
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("%s: the node's answer is not an application: %w", c.verb, err)
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\naccount\t%s\nplacement\t%s\n", a.Name, a.Account, strings.Join(a.Placement, " > "))
	if a.Health != nil {
		fmt.Fprintf(tw, "health\t%s\n", a.Health.Path)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range a.Warnings {
		fmt.Fprintf(c.errOut, "scafo-node: warning: %s\n", w)
	}
	return nil
}

func cmdAppsRm(c *client, app, wait string) error {
	_, live, err := c.write(http.MethodDelete, "/v1/apps/"+app, nil, wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "deleted %s\n", app)
	return live()
}

func cmdDomainsClaim(c *client, app, host, wait string) error {
	_, live, err := c.write(http.MethodPut, "/v1/apps/"+app+"/domains/"+host, nil, wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s claimed by %s\n", host, app)
	return live()
}

func cmdDomainsRelease(c *client, app, host, wait string) error {
	_, live, err := c.write(http.MethodDelete, "/v1/apps/"+app+"/domains/"+host, nil, wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s released by %s\n", host, app)
	return live()
}

// Waiting is the --wait switch of the write verbs.
type Waiting struct {
	Wait string `description:"Wait until the write is live (published, and reported by every live ingress), at most this long (e.g. 10s, at most 60s); the command fails naming the ingresses still behind." json:"wait,omitempty"`
}

// writeConfig is the configuration of the write verbs without other settings.
type writeConfig struct {
	Conn
	Waiting
}

// write sends a write; with wait (a duration), as ?wait=applied&timeout=wait. It
// returns the write's own answer and live, which prints whether it is live everywhere
// and fails when it is not (call it after printing the answer).
func (c *client) write(method, path string, body io.Reader, wait string) (json.RawMessage, func() error, error) {
	none := func() error { return nil }
	if wait == "" {
		var raw json.RawMessage
		err := c.do(method, path, body, &raw)
		return raw, none, err
	}
	var env api.Applied
	if err := c.do(method, path+"?wait=applied&timeout="+url.QueryEscape(wait), body, &env); err != nil {
		return nil, none, err
	}
	live := func() error {
		if env.Applied {
			// On stderr: stdout stays the write's answer (--json included).
			fmt.Fprintf(os.Stderr, "live: published at serial %d, held by all %d live ingresses\n", env.Serial, env.Ingresses)
			return nil
		}
		var names []string
		for _, in := range env.Behind {
			names = append(names, in.Name+" ("+in.Kind+" on "+in.Node+")")
		}
		return fmt.Errorf("not live everywhere after %s (serial %d): %d of %d live ingresses behind: %s",
			wait, env.Serial, len(env.Behind), env.Ingresses, strings.Join(names, ", "))
	}
	return env.Result, live, nil
}
