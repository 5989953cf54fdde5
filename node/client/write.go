package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

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
	Replace   bool     `description:"Replace the application even if that clears settings it has and this put leaves out (a health check, an ingress group, passthrough); they are named on stderr. Without it such a put is refused, naming them, and nothing is written." json:"replace,omitempty"`
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
			"       The application is replaced as a whole: give every setting it keeps. A put that would clear\n"+
			"       a setting the application has (no --health where it has a health check; apps get shows\n"+
			"       what is set) is refused naming it, unless --replace is given.",
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
		func(c *client, args []string) error { return cmdAppsRm(c, args[0], cfg.Waiting) })
}

func domainClaimCommand() *cli.Command {
	cfg := &writeConfig{}
	cfg.SetDefaults()
	return verb("claim", "Claim a custom domain for an application.", "scafo-node domains claim <app> <host> [flags]", 2, cfg,
		func(c *client, args []string) error { return cmdDomainsClaim(c, args[0], args[1], cfg.Waiting) })
}

func domainReleaseCommand() *cli.Command {
	cfg := &writeConfig{}
	cfg.SetDefaults()
	return verb("release", "Release an application's custom domain.", "scafo-node domains release <app> <host> [flags]", 2, cfg,
		func(c *client, args []string) error { return cmdDomainsRelease(c, args[0], args[1], cfg.Waiting) })
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
	// What the put would clear, from the application as it is: the put then replaces that
	// very version (If-Match), so what is said is what is cleared.
	var cur json.RawMessage
	hdr, err := c.doWith(http.MethodGet, "/v1/apps/"+app, nil, nil, &cur)
	var ifMatch http.Header
	switch {
	case err == nil:
		cleared := clearedBy(cur, body)
		if len(cleared) > 0 && !a.Replace {
			return fmt.Errorf("apps put %s: would clear %s, which the application has and this put leaves out: give them again, or --replace to clear them; nothing was written",
				app, strings.Join(cleared, ", "))
		}
		if len(cleared) > 0 {
			fmt.Fprintf(c.errOut, "apps put %s: clears: %s\n", app, strings.Join(cleared, ", "))
		}
		if etag := hdr.Get("ETag"); etag != "" {
			ifMatch = http.Header{"If-Match": {etag}}
		}
	case ExitCode(err) == ExitRefused && strings.Contains(err.Error(), "(404 "):
		// a new application: nothing to clear
	default:
		return err
	}
	b, _ := json.Marshal(body)
	raw, live, err := c.write(http.MethodPut, "/v1/apps/"+app, nil, ifMatch, strings.NewReader(string(b)), a.Waiting)
	if err != nil {
		return err
	}
	if err := c.printApp(raw, a.JSON); err != nil {
		return err
	}
	return live()
}

// clearedBy names the settings of the application cur (its JSON) that the put body
// leaves out: a health check the body has none of, a placement it empties, and any other
// setting cur has that this verb cannot give (ingress.group, passthrough, …).
func clearedBy(cur json.RawMessage, body map[string]any) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(cur, &m) != nil {
		return nil
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := strings.TrimSpace(string(m[k]))
		switch {
		case k == "name" || k == "id" || k == "account" || k == "warnings":
		case v == "" || v == "null" || v == "false" || v == "0" || v == `""` || v == "[]" || v == "{}":
		case k == "health":
			if _, ok := body["health"]; !ok {
				var h struct{ Path string }
				_ = json.Unmarshal(m[k], &h)
				out = append(out, "health ("+h.Path+")")
			}
		case k == "placement":
			if p, _ := body["placement"].([]string); len(p) == 0 {
				out = append(out, "placement")
			}
		default:
			out = append(out, k)
		}
	}
	return out
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
	tw := newTable(c.out)
	fmt.Fprintf(tw, "name\t%s\naccount\t%s\nplacement\t%s\n", escape(a.Name), escape(a.Account), escape(strings.Join(a.Placement, " > ")))
	if a.Health != nil {
		fmt.Fprintf(tw, "health\t%s\n", escape(a.Health.Path))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range a.Warnings {
		fmt.Fprintf(c.errOut, "scafo-node: warning: %s\n", escape(w))
	}
	return nil
}

func cmdAppsRm(c *client, app string, wait Waiting) error {
	_, live, err := c.write(http.MethodDelete, "/v1/apps/"+app, nil, nil, nil, wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "deleted %s\n", app)
	return live()
}

func cmdDomainsClaim(c *client, app, host string, wait Waiting) error {
	_, live, err := c.write(http.MethodPut, "/v1/apps/"+app+"/domains/"+host, nil, nil, nil, wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s claimed by %s\n", host, app)
	return live()
}

func cmdDomainsRelease(c *client, app, host string, wait Waiting) error {
	_, live, err := c.write(http.MethodDelete, "/v1/apps/"+app+"/domains/"+host, nil, nil, nil, wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s released by %s\n", host, app)
	return live()
}

// Waiting is the --wait switch of the write verbs.
type Waiting struct {
	Wait           string `description:"Wait until the write is live (published, and held by every live ingress), at most this long (e.g. 10s, at most 60s); if it is not, the command says the write is in and which ingresses are behind, and exits 3." json:"wait,omitempty"`
	AllowNoIngress bool   `description:"With --wait, take a fleet that no ingress polls as done (exit 0); without it such a wait exits 3: no ingress polls this fleet." json:"allowNoIngress,omitempty"`
}

// writeConfig is the configuration of the write verbs without other settings.
type writeConfig struct {
	Conn
	Waiting
}

// write sends a write (query: its own parameters, hdr: its headers, or nil); with w.Wait (a duration),
// as ?wait=applied&timeout=w.Wait. It returns the write's own answer and live, which
// says on stderr that the write is live everywhere, or fails with ExitNotLive saying
// the write is in and what is not live (call it after printing the answer). A write
// the node refused fails with ExitRefused, one it could not be asked or answered 5xx
// with ExitUnreachable (do).
func (c *client) write(method, path string, query url.Values, hdr http.Header, body io.Reader, w Waiting) (json.RawMessage, func() error, error) {
	none := func() error { return nil }
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	if w.Wait == "" {
		var raw json.RawMessage
		_, err := c.doWith(method, withQuery(path, q), body, hdr, &raw)
		return raw, none, err
	}
	d, err := time.ParseDuration(w.Wait)
	if err != nil || d <= 0 {
		return nil, none, fmt.Errorf("%s: --wait %q: want a positive duration such as 30s", c.verb, w.Wait)
	}
	c.http.Timeout = d + 30*time.Second // the answer comes after the wait
	q.Set("wait", "applied")
	q.Set("timeout", w.Wait)
	var env api.Applied
	if _, err := c.doWith(method, withQuery(path, q), body, hdr, &env); err != nil {
		return nil, none, err
	}
	live := func() error {
		switch {
		case env.Applied && !env.NoIngress:
			// On stderr: stdout stays the write's answer (--json included).
			fmt.Fprintf(c.errOut, "live: published at serial %d, held by all %d live ingresses\n", env.Serial, env.Ingresses)
			return nil
		case env.Applied && w.AllowNoIngress:
			fmt.Fprintf(c.errOut, "published at serial %d; no ingress polls this fleet (--allowNoIngress: taken as done)\n", env.Serial)
			return nil
		case env.Applied:
			return exitErrf(ExitNotLive, "%s: written, not live: no ingress polls this fleet (published at serial %d, no live ingress holds it; --allowNoIngress takes that as done)",
				c.verb, env.Serial)
		}
		var names []string
		for _, in := range env.Behind {
			names = append(names, in.Name+" ("+in.Kind+" on "+in.Node+")")
		}
		if len(names) == 0 {
			return exitErrf(ExitNotLive, "%s: written, not live: %s", c.verb, env.Detail)
		}
		return exitErrf(ExitNotLive, "%s: written, not live on: %s (%d of %d live ingresses behind after %s, serial %d)",
			c.verb, strings.Join(names, ", "), len(names), env.Ingresses, w.Wait, env.Serial)
	}
	return env.Result, live, nil
}

// withQuery is path with q's parameters (none: path).
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
