package client

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
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
	return verb("routes", "Every host of the published routing document with its application and ordered upstreams "+
		"(a host no upstream serves is marked: its router answers 503); path rows under their host.",
		"scafo-node routes [flags]", 0, cfg,
		func(c *client, _ []string) error { return cmdRoutes(c, cfg.JSON) })
}

func domainPathsCommand() *cli.Command {
	cfg := &readConfig{}
	cfg.SetDefaults()
	return verb("paths", "Print a host's path map as its application published it, marking each entry not in effect "+
		"in the routing document with the reason.",
		"scafo-node domains paths <host> [flags]", 1, cfg,
		func(c *client, args []string) error { return cmdDomainPaths(c, args[0], cfg.JSON) })
}

// failClosed says why a route of the document is served by the fail-closed 503 router
// (no server behind it), or "" when it has upstreams.
func failClosed(r routing.Route) string {
	switch {
	case r.Application == routing.UnownedApplication:
		return "503 (fail closed: a claim without a holder)"
	case len(r.Upstreams) == 0:
		return "503 (fail closed: no ready instance)"
	}
	return ""
}

func (c *client) routingDoc() (*routing.Document, json.RawMessage, error) {
	var raw json.RawMessage
	if err := c.do(http.MethodGet, "/v1/ingress/routes", nil, &raw); err != nil {
		return nil, nil, err
	}
	doc, err := routing.Decode(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding routing document: %w", err)
	}
	return doc, raw, nil
}

func cmdRoutes(c *client, asJSON bool) error {
	doc, raw, err := c.routingDoc()
	if err != nil {
		return err
	}
	if asJSON {
		return c.printJSON(raw)
	}
	// Path rows sit under their host and do not widen the columns.
	type row struct {
		cols  [3]string
		paths []string
	}
	rows := []row{{cols: [3]string{"HOST", "APPLICATION", "UPSTREAMS"}}}
	for _, r := range doc.Routes {
		ups := make([]string, len(r.Upstreams))
		for i, u := range r.Upstreams {
			ups[i] = u.Node + "=" + u.Address
		}
		served := strings.Join(ups, " > ")
		if why := failClosed(r); why != "" {
			served = why
		}
		rw := row{cols: [3]string{r.Host, r.Application, served}}
		for _, k := range slices.Sorted(maps.Keys(r.Paths)) {
			rw.paths = append(rw.paths, "  /"+k+" → "+r.Paths[k])
		}
		rows = append(rows, rw)
	}
	if doc.API != nil {
		ups := make([]string, len(doc.API.Upstreams))
		for i, u := range doc.API.Upstreams {
			ups[i] = u.Node + "=" + u.Address
		}
		for _, h := range doc.API.Hosts {
			rows = append(rows, row{cols: [3]string{h, "(node API)", strings.Join(ups, " > ")}})
		}
	}
	var w [2]int
	for _, r := range rows {
		w[0], w[1] = max(w[0], len(r.cols[0])), max(w[1], len(r.cols[1]))
	}
	var b strings.Builder
	for _, r := range rows {
		line := fmt.Sprintf("%-*s  %-*s  %s", w[0], r.cols[0], w[1], r.cols[1], r.cols[2])
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		for _, p := range r.paths {
			b.WriteString(p + "\n")
		}
	}
	fmt.Fprintf(&b, "revision %s\n", doc.Revision)
	_, err = io.WriteString(c.out, b.String())
	return err
}

// publishedPaths is GET /v1/apps/{app}/domains/{host}/paths.
type publishedPaths struct {
	Host    string            `json:"host"`
	Account string            `json:"account"`
	App     string            `json:"app"`
	Paths   map[string]string `json:"paths"`
}

// appOf finds the application holding host: its route in the document, else (a claim
// the reconcile pass has not folded in yet) the application whose claim it is.
func (c *client) appOf(doc *routing.Document, host string) (string, error) {
	for _, r := range doc.Routes {
		if r.Host == host && r.Application != routing.UnownedApplication {
			return r.Application, nil
		}
	}
	var list struct {
		Apps []struct{ Name string } `json:"apps"`
	}
	if err := c.do(http.MethodGet, "/v1/apps", nil, &list); err != nil {
		return "", err
	}
	for _, a := range list.Apps {
		if c.do(http.MethodGet, "/v1/apps/"+a.Name+"/domains/"+host, nil, nil) == nil {
			return a.Name, nil
		}
	}
	return "", fmt.Errorf("%s: no application holds that host", host)
}

// notInEffect says, for each entry of the published map that the routing document
// does not carry as published, why (the reconcile pass's reasons, read from the
// document and the applications' accounts).
func (c *client) notInEffect(doc *routing.Document, pub publishedPaths) (map[string]string, error) {
	routes := map[string]routing.Route{}
	for _, r := range doc.Routes {
		routes[r.Host] = r
	}
	own, hostRouted := routes[pub.Host]
	var accounts map[string]string
	out := map[string]string{}
	for k, target := range pub.Paths {
		if hostRouted && own.Paths[k] == target {
			continue
		}
		t, ok := routes[target]
		switch {
		case !hostRouted:
			out[k] = "the host has no route in revision " + doc.Revision + " yet (the next reconcile pass adds it)"
			continue
		case target == pub.Host:
			out[k] = "the target is this host itself"
			continue
		case !ok:
			out[k] = "the target is not a host of any application"
			continue
		case t.Application == routing.UnownedApplication:
			out[k] = "the target is a claimed host without a holder"
			continue
		}
		if accounts == nil {
			var list struct {
				Apps []struct{ Name, Account string } `json:"apps"`
			}
			if err := c.do(http.MethodGet, "/v1/apps", nil, &list); err != nil {
				return nil, err
			}
			accounts = map[string]string{}
			for _, a := range list.Apps {
				accounts[a.Name] = a.Account
			}
		}
		switch {
		case accounts[t.Application] != pub.Account:
			out[k] = "the target belongs to another account"
		case len(t.Upstreams) == 0:
			out[k] = "the target's application has no ready instance"
		default:
			out[k] = "published after revision " + doc.Revision + " (the next reconcile pass takes it)"
		}
	}
	return out, nil
}

func cmdDomainPaths(c *client, host string, asJSON bool) error {
	host = routing.FoldHost(host)
	doc, _, err := c.routingDoc()
	if err != nil {
		return err
	}
	app, err := c.appOf(doc, host)
	if err != nil {
		return err
	}
	var pub publishedPaths
	if err := c.do(http.MethodGet, "/v1/apps/"+app+"/domains/"+host+"/paths", nil, &pub); err != nil {
		return err
	}
	off, err := c.notInEffect(doc, pub)
	if err != nil {
		return err
	}
	if asJSON {
		b, _ := json.Marshal(map[string]any{"host": pub.Host, "app": pub.App, "account": pub.Account,
			"paths": pub.Paths, "notInEffect": off, "revision": doc.Revision})
		return c.printJSON(b)
	}
	fmt.Fprintf(c.out, "%s (%s, account %s)\n", escape(pub.Host), escape(pub.App), escape(pub.Account))
	tw := newTable(c.out)
	for _, k := range slices.Sorted(maps.Keys(pub.Paths)) {
		mark := ""
		if why, ok := off[k]; ok {
			mark = "not in effect: " + why
		}
		fmt.Fprintf(tw, "  /%s → %s\t%s\n", escape(k), escape(pub.Paths[k]), escape(mark))
	}
	fmt.Fprintf(tw, "revision %s\n", doc.Revision)
	return tw.Flush()
}

// table is a tabwriter whose Flush writes its lines to out without the spaces it pads
// an empty last cell with, every unsafe character but its layout escaped (cleanText).
type table struct {
	*tabwriter.Writer
	buf strings.Builder
	out io.Writer
}

func newTable(out io.Writer) *table {
	t := &table{out: out}
	t.Writer = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	return t
}

func (t *table) Flush() error {
	if err := t.Writer.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	for l := range strings.Lines(t.buf.String()) {
		body, nl := strings.CutSuffix(l, "\n")
		b.WriteString(strings.TrimRight(body, " "))
		if nl {
			b.WriteString("\n")
		}
	}
	t.buf.Reset()
	_, err := io.WriteString(t.out, cleanText(b.String()))
	return err
}
