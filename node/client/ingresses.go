package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/node/api"
)

func ingressesCommand() *cli.Command {
	cfg := &readConfig{}
	cfg.SetDefaults()
	return verb("ingresses", "Every ingress of the fleet (each Traefik polling a node): its kind (plugin or http), the node it polls, "+
		"the serial and revision it applied (plugin) or was served (http), how many serials behind, its state (current, behind, refused: its last poll was refused, lost) and when it was last heard from.",
		"scafo-node ingresses [flags]", 0, cfg,
		func(c *client, _ []string) error { return cmdIngresses(c, cfg.JSON) })
}

// ingressRow is one ingress as `ingresses --json` prints it (the CLI's output, which
// predates the wire's omitempty fields and groups; the wire is api.Ingress).
type ingressRow struct {
	Name    string    `json:"name"`
	Kind    string    `json:"kind"`
	Node    string    `json:"node"`
	Applied *heldRow  `json:"applied"`
	Served  *heldRow  `json:"served"`
	Behind  uint64    `json:"behind"`
	State   string    `json:"state"`
	Refused string    `json:"refused,omitempty"` // why its last poll was refused (state refused, or lost after one)
	Seen    time.Time `json:"seen"`
	Age     float64   `json:"ageSeconds"`
}

type heldRow struct {
	Serial   uint64 `json:"serial"`
	Revision string `json:"revision"`
}

// ingressRowOf is in as `ingresses --json` prints it.
func ingressRowOf(in api.Ingress) ingressRow {
	row := ingressRow{Name: in.Name, Kind: in.Kind, Node: in.Node, Behind: in.Behind, State: in.State, Refused: in.Refused, Seen: in.Seen, Age: in.Age}
	if h := in.Applied; h != nil {
		row.Applied = &heldRow{Serial: h.Serial, Revision: h.Revision}
	}
	if h := in.Served; h != nil {
		row.Served = &heldRow{Serial: h.Serial, Revision: h.Revision}
	}
	return row
}

func cmdIngresses(c *client, asJSON bool) error {
	var st api.Status
	if err := c.do(http.MethodGet, api.PathStatus, nil, &st); err != nil {
		return err
	}
	if st.Ingresses == nil {
		st.Ingresses = []api.Ingress{}
	}
	if asJSON {
		rows := make([]ingressRow, len(st.Ingresses))
		for i, in := range st.Ingresses {
			rows[i] = ingressRowOf(in)
		}
		b, err := json.Marshal(map[string]any{"ingresses": rows, "skipped": st.IngressesSkipped, "error": st.IngressesError})
		if err != nil {
			return err
		}
		return c.printJSON(b)
	}
	rows := [][]string{{"NAME", "KIND", "NODE", "HOLDS", "REVISION", "BEHIND", "STATE", "LAST SEEN"}}
	for _, in := range st.Ingresses {
		held, verb := in.Applied, "applied"
		if held == nil {
			held, verb = in.Served, "served"
		}
		holds, rev := "nothing "+verb+" yet", "-"
		if held != nil && (held.Serial > 0 || held.Revision != "") {
			holds = verb + " " + strconv.FormatUint(held.Serial, 10)
		}
		if held != nil && held.Revision != "" {
			rev = held.Revision
		}
		state := in.State
		if in.Refused != "" {
			state += " (" + in.Refused + ")"
		}
		rows = append(rows, []string{escape(in.Name), escape(in.Kind), escape(in.Node), holds, escape(rev), strconv.FormatUint(in.Behind, 10), escape(state),
			strconv.FormatFloat(in.Age, 'f', 0, 64) + "s ago"})
	}
	var b strings.Builder
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, col := range r {
			widths[i] = max(widths[i], len(col))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, col := range r {
			fmt.Fprintf(&line, "%-*s  ", widths[i], col)
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	for _, sk := range st.IngressesSkipped {
		fmt.Fprintf(&b, "skipped %s: %s\n", escape(sk.Object), escape(sk.Reason))
	}
	if st.IngressesError != "" {
		fmt.Fprintf(&b, "only the ingresses polling this node: %s\n", escape(st.IngressesError))
	}
	_, err := io.WriteString(c.out, b.String())
	return err
}
