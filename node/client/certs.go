package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/node/api"
)

// certsCommand is `scafo-node certs`: the fleet certificates of /v1/status, one row per
// name (never key material: the status carries none).
func certsCommand() *cli.Command {
	cfg := &readConfig{}
	cfg.SetDefaults()
	return verb("certs", "Fleet certificates (when the node runs with acme.enabled): every name the fleet issues, its state "+
		"(pending, valid, failed, backlog), expiry, last error and next attempt.",
		"scafo-node certs [flags]", 0, cfg,
		func(c *client, _ []string) error { return cmdCerts(c, cfg.JSON) })
}

// certName is one name as `certs --json` prints it (the CLI's output; the wire is
// api.CertName).
type certName struct {
	Name         string     `json:"name"`
	State        string     `json:"state"`
	NotAfter     *time.Time `json:"notAfter"`
	Serial       string     `json:"serial"`
	LastError    string     `json:"lastError"`
	NextAttempt  *time.Time `json:"nextAttempt"`
	ObtainedHere bool       `json:"obtainedHere"`
}

func cmdCerts(c *client, asJSON bool) error {
	var status api.Status
	var raw json.RawMessage
	if err := c.do(http.MethodGet, api.PathStatus, nil, &raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &status); err != nil {
		return fmt.Errorf("decoding /v1/status: %w", err)
	}
	if asJSON {
		out := map[string]any{"enabled": status.Certificates != nil}
		if cs := status.Certificates; cs != nil {
			var names []certName
			if cs.Names != nil {
				names = make([]certName, len(cs.Names))
			}
			for i, n := range cs.Names {
				names[i] = certName{Name: n.Name, State: n.State, NotAfter: n.NotAfter, Serial: n.Serial,
					LastError: n.LastError, NextAttempt: n.NextAttempt, ObtainedHere: n.ObtainedHere}
			}
			out["counts"], out["names"] = cs.Counts, names
		}
		b, _ := json.Marshal(out)
		return c.printJSON(b)
	}
	if status.Certificates == nil {
		_, err := io.WriteString(c.out, "fleet certificates are off on this node (acme.enabled is false)\n")
		return err
	}
	t := newTable(c.out)
	fmt.Fprintln(t, "NAME\tSTATE\tNOT AFTER\tNEXT ATTEMPT\tLAST ERROR")
	for _, n := range status.Certificates.Names {
		notAfter, next := "-", "-"
		if n.NotAfter != nil {
			notAfter = n.NotAfter.UTC().Format(time.RFC3339)
		}
		if n.NextAttempt != nil {
			next = n.NextAttempt.UTC().Format(time.RFC3339)
		}
		lastErr := n.LastError
		if len(lastErr) > 120 {
			lastErr = lastErr[:117] + "..."
		}
		if lastErr == "" {
			lastErr = "-"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\n", n.Name, n.State, notAfter, next, escape(lastErr))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	var parts []string
	for _, s := range []string{"valid", "pending", "failed", "backlog"} {
		parts = append(parts, fmt.Sprintf("%d %s", status.Certificates.Counts[s], s))
	}
	_, err := io.WriteString(c.out, strings.Join(parts, ", ")+"\n")
	return err
}
