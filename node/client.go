package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/render/routing"
)

// ClientConfig is the CLI's configuration: which node, which token.
type ClientConfig struct {
	URL      string `description:"Node API base URL." json:"url,omitempty"`
	Token    string `description:"Bearer token (default: SCAFO_TOKEN, SCAFO_ADMIN_TOKEN, then <stateDir>/admin-token)." json:"token,omitempty"`
	StateDir string `description:"State directory to read the admin token from." json:"stateDir,omitempty"`
	JSON     bool   `description:"Print JSON instead of aligned text." json:"json,omitempty"`
}

// SetDefaults sets the CLI defaults.
func (c *ClientConfig) SetDefaults() {
	c.URL = "http://127.0.0.1:7400"
	c.StateDir = NewConfig().StateDir
}

// client talks to a node's API.
type client struct {
	cfg  *ClientConfig
	http *http.Client
	out  io.Writer
}

func newClient(cfg *ClientConfig) (*client, error) {
	if cfg.Token == "" {
		cfg.Token = os.Getenv("SCAFO_TOKEN")
	}
	if cfg.Token == "" {
		cfg.Token = os.Getenv("SCAFO_ADMIN_TOKEN")
	}
	if cfg.Token == "" {
		b, err := os.ReadFile(filepath.Join(cfg.StateDir, "admin-token"))
		if err != nil {
			return nil, fmt.Errorf("no token: pass --token, set SCAFO_TOKEN, or run where %s/admin-token is readable", cfg.StateDir)
		}
		cfg.Token = strings.TrimSpace(string(b))
	}
	return &client{cfg: cfg, http: &http.Client{Timeout: 30 * time.Second}, out: os.Stdout}, nil
}

// do sends a request and decodes a JSON answer into out (when non-nil). Error bodies
// become errors carrying the server's message.
func (c *client) do(method, path string, body io.Reader, out any) error {
	req, err := http.NewRequest(method, strings.TrimSuffix(c.cfg.URL, "/")+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e apiError
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s %s: %s: %s %s", method, path, resp.Status, e.Error, e.Detail)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = b
			return nil
		}
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *client) printJSON(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	_, err := fmt.Fprintln(c.out, string(b))
	return err
}

// ClientCommands are the CLI verbs that talk to a running node.
func ClientCommands(version string) []*cli.Command {
	cmds := []*cli.Command{
		{
			Name:        "version",
			Description: "Print the version.",
			Run: func([]string) error {
				fmt.Println("scafo-node", version)
				return nil
			},
		},
		clientCommand("routes", "Every host with its application and ordered upstreams; path rows under their host.", false, cmdRoutes),
		{
			Name:        "domains",
			Description: "Custom domains: paths <host>, claim <app> <host>, release <app> <host>.",
			Run: func([]string) error {
				return errors.New("usage: scafo-node domains paths <host> | claim <app> <host> | release <app> <host>")
			},
		},
	}
	dom := cmds[2]
	_ = dom.AddCommand(clientCommand("paths", "Print a host's path map.", true, cmdDomainPaths))
	for _, c := range extraClientCommands() {
		if c.parent == "" {
			cmds = append(cmds, c.cmd)
		} else if c.parent == "domains" {
			_ = dom.AddCommand(c.cmd)
		}
	}
	return cmds
}

// subcommand lets other files register CLI verbs.
type subcommand struct {
	parent string
	cmd    *cli.Command
}

// clientCommand wraps a verb with the client configuration (--url, --token, --json).
func clientCommand(name, desc string, allowArg bool, run func(c *client, args []string) error) *cli.Command {
	cfg := &ClientConfig{}
	cfg.SetDefaults()
	return &cli.Command{
		Name:          name,
		Description:   desc,
		Configuration: cfg,
		AllowArg:      allowArg,
		Run: func(args []string) error {
			pos, flags := splitArgs(args)
			if len(flags) > 0 {
				if _, err := (&cli.FlagLoader{}).Load(flags, &cli.Command{Configuration: cfg}); err != nil {
					return err
				}
			}
			c, err := newClient(cfg)
			if err != nil {
				return err
			}
			return run(c, pos)
		},
	}
}

// splitArgs separates positional arguments from --flags.
func splitArgs(args []string) (pos, flags []string) {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
		} else {
			pos = append(pos, a)
		}
	}
	return pos, flags
}

func cmdRoutes(c *client, _ []string) error {
	var raw json.RawMessage
	if err := c.do(http.MethodGet, "/v1/ingress/routes", nil, &raw); err != nil {
		return err
	}
	if c.cfg.JSON {
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

func cmdDomainPaths(c *client, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: scafo-node domains paths <host>")
	}
	host := routing.FoldHost(args[0])
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
		if c.cfg.JSON {
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
