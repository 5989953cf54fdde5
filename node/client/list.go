package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/render/routing"
)

// The listing verbs: apps list, domains list, audit.

func appListCommand() *cli.Command {
	cfg := &readConfig{}
	cfg.SetDefaults()
	return verb("list", "List the applications: name, account, placement, health path.",
		"scafo-node apps list [flags]", 0, cfg, func(c *client, _ []string) error { return cmdAppsList(c, cfg.JSON) })
}

func cmdAppsList(c *client, asJSON bool) error {
	var raw json.RawMessage
	if err := c.do(http.MethodGet, "/v1/apps", nil, &raw); err != nil {
		return err
	}
	if asJSON {
		return c.printJSON(raw)
	}
	var list struct {
		Apps []struct {
			Name, Account string
			Placement     []string
			Health        *struct{ Path string }
		} `json:"apps"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("%s: the node's answer is not a list of applications: %w", c.verb, err)
	}
	t := newTable(c.out)
	fmt.Fprintln(t, "NAME\tACCOUNT\tPLACEMENT\tHEALTH")
	for _, a := range list.Apps {
		health := "-"
		if a.Health != nil {
			health = a.Health.Path
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", escape(a.Name), escape(a.Account), escape(strings.Join(a.Placement, " > ")), escape(health))
	}
	return t.Flush()
}

// domainListConfig is the configuration of `domains list`.
type domainListConfig struct {
	Conn
	Output
	App string `description:"Only this application's custom domains." json:"app,omitempty"`
}

func domainListCommand() *cli.Command {
	cfg := &domainListConfig{}
	cfg.SetDefaults()
	return verb("list", "List the custom domains (claims) of the published routing document: host, application, how many path "+
		"prefixes its map holds, and whether a ready instance serves it (one claim read per host of the document).",
		"scafo-node domains list [flags]", 0, cfg, func(c *client, _ []string) error { return cmdDomainsList(c, cfg) })
}

// claimRow is one custom domain as `domains list --json` prints it.
type claimRow struct {
	Host        string `json:"host"`
	Application string `json:"app"`
	Paths       int    `json:"paths"`
	Served      bool   `json:"served"`
}

// cmdDomainsList reads the routing document and keeps the hosts that are claims (the
// node answers the claim of host by its application): a platform host is no claim.
func cmdDomainsList(c *client, cfg *domainListConfig) error {
	doc, _, err := c.routingDoc()
	if err != nil {
		return err
	}
	var cands []routing.Route
	for _, r := range doc.Routes {
		if r.Application == routing.UnownedApplication || (cfg.App != "" && r.Application != cfg.App) {
			continue
		}
		cands = append(cands, r)
	}
	claimed := make([]bool, len(cands))
	errs := make([]error, len(cands))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, r := range cands {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := c.do(http.MethodGet, "/v1/apps/"+url.PathEscape(r.Application)+"/domains/"+url.PathEscape(r.Host), nil, nil)
			switch ExitCode(err) {
			case ExitOK:
				claimed[i] = true
			case ExitRefused: // 404: not a claim (a platform host)
			default:
				errs[i] = err
			}
		})
	}
	wg.Wait()
	rows := []claimRow{}
	for i, r := range cands {
		if errs[i] != nil {
			return errs[i]
		}
		if claimed[i] {
			rows = append(rows, claimRow{Host: r.Host, Application: r.Application, Paths: len(r.Paths), Served: len(r.Upstreams) > 0})
		}
	}
	if cfg.JSON {
		b, _ := json.Marshal(map[string]any{"domains": rows, "revision": doc.Revision})
		return c.printJSON(b)
	}
	t := newTable(c.out)
	fmt.Fprintln(t, "HOST\tAPPLICATION\tPATHS\tSERVED")
	for _, r := range rows {
		served := "yes"
		if !r.Served {
			served = "503 (no ready instance)"
		}
		fmt.Fprintf(t, "%s\t%s\t%d\t%s\n", escape(r.Host), escape(r.Application), r.Paths, served)
	}
	fmt.Fprintf(t, "revision %s\n", doc.Revision)
	return t.Flush()
}

// auditConfig is the configuration of `audit`.
type auditConfig struct {
	Conn
	Output
	App    string `description:"Only the records of this application." json:"app,omitempty"`
	Actor  string `description:"Only the records of this actor (admin, token:<id>)." json:"actor,omitempty"`
	Action string `description:"Only the records of this action (app.put, app.delete, domain.claim, domain.release, paths.put, token.create, token.revoke, instance.move, instance.ready)." json:"action,omitempty"`
	Since  string `description:"Only the records at or after this time: a duration back from now (1h, 30m) or an RFC 3339 time." json:"since,omitempty"`
	Limit  int    `description:"At most this many records, newest first (1..10000)." json:"limit,omitempty"`
}

func auditCommand() *cli.Command {
	cfg := &auditConfig{Limit: 50}
	cfg.SetDefaults()
	return verb("audit", "The audit log, newest first: every change made through the API (time, actor, node, action, account, "+
		"application, host, path prefixes, an instance move's ports), filtered.",
		"scafo-node audit [flags]", 0, cfg, func(c *client, _ []string) error { return cmdAudit(c, cfg) })
}

// auditRecord is one record as GET /v1/audit answers it.
type auditRecord struct {
	Time     time.Time `json:"time"`
	Actor    string    `json:"actor"`
	Node     string    `json:"node"`
	Action   string    `json:"action"`
	Account  string    `json:"account"`
	App      string    `json:"app"`
	Host     string    `json:"host"`
	Prefixes int       `json:"prefixes"`
	Token    string    `json:"token"`
	FromPort int       `json:"fromPort"`
	ToPort   int       `json:"toPort"`
	Forced   bool      `json:"forced"`
}

func cmdAudit(c *client, cfg *auditConfig) error {
	q := url.Values{"limit": {strconv.Itoa(cfg.Limit)}}
	for k, v := range map[string]string{"app": cfg.App, "actor": cfg.Actor, "action": cfg.Action, "since": cfg.Since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var raw json.RawMessage
	if err := c.do(http.MethodGet, "/v1/audit?"+q.Encode(), nil, &raw); err != nil {
		return err
	}
	if cfg.JSON {
		return c.printJSON(raw)
	}
	var ans struct {
		Records   []auditRecord `json:"records"`
		Truncated bool          `json:"truncated"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return fmt.Errorf("%s: the node's answer is not an audit log: %w", c.verb, err)
	}
	t := newTable(c.out)
	fmt.Fprintln(t, "TIME\tACTOR\tNODE\tACTION\tACCOUNT\tAPP\tWHAT")
	for _, r := range ans.Records {
		var what []string
		if r.Host != "" {
			what = append(what, escape(r.Host))
		}
		if r.Action == "paths.put" || r.Prefixes > 0 {
			what = append(what, strconv.Itoa(r.Prefixes)+" prefixes")
		}
		if r.Token != "" {
			what = append(what, "token "+escape(r.Token))
		}
		if r.ToPort != 0 {
			m := fmt.Sprintf("port %d → %d", r.FromPort, r.ToPort)
			if r.FromPort == 0 {
				m = fmt.Sprintf("port → %d", r.ToPort)
			}
			if r.Forced {
				m += " (forced)"
			}
			what = append(what, m)
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.UTC().Format(time.RFC3339), escape(r.Actor), escape(r.Node), escape(r.Action),
			dash(escape(r.Account)), dash(escape(r.App)), dash(strings.Join(what, ", ")))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if ans.Truncated {
		fmt.Fprintf(c.errOut, "scafo-node: audit: the node stopped after examining its most records at once: older matches may exist (narrow --since)\n")
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
