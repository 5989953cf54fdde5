package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/traefik/paerser/cli"
)

// The instance verbs a deploy script calls on the node that runs the process (docs/design.md
// §13): allocate (the application's port pair on this node), move (the instance to the
// other port of the pair, or a given one, and wait until every live ingress dials it),
// release.

func instancesCommand() *cli.Command {
	return Group("instances", "This node's instances of applications: allocate a port pair, move (deploy), release.",
		instanceAllocateCommand(), instanceMoveCommand(), instanceReleaseCommand())
}

// instance is the node's answer for one instance.
type instance struct {
	App   string `json:"app"`
	Node  string `json:"node"`
	Port  int    `json:"port"`
	Ports [2]int `json:"ports"`
	Ready bool   `json:"ready"`
}

// other is the port of the pair the instance is not on (0 when the node names no pair).
func (i instance) other() int {
	switch i.Port {
	case i.Ports[0]:
		return i.Ports[1]
	case i.Ports[1]:
		return i.Ports[0]
	}
	return 0
}

type instanceReadConfig struct {
	Conn
	JSON bool `description:"Print the node's JSON answer." json:"json,omitempty"`
}

func instanceAllocateCommand() *cli.Command {
	cfg := &instanceReadConfig{}
	cfg.SetDefaults()
	return verb("allocate", "Allocate (or show) the application's port pair on this node; prints the port to start the next release on.",
		"scafo-node instances allocate <app> [flags]", 1, cfg, func(c *client, args []string) error {
			var raw json.RawMessage
			if err := c.do(http.MethodPost, "/v1/node/instances/"+args[0], nil, &raw); err != nil {
				return err
			}
			return c.printInstance(raw, cfg.JSON)
		})
}

// instanceMoveConfig is the configuration of `instances move`.
type instanceMoveConfig struct {
	Conn
	Waiting
	Port       int  `description:"The port to move to (default: the other port of the application's pair on this node)." json:"port,omitempty"`
	NotReady   bool `description:"Declare the instance not ready (default: ready)." json:"notReady,omitempty"`
	Force      bool `description:"Move even if nothing serves on the new port (the node checks the application's health path, or a TCP connect, before it moves a ready instance, and refuses otherwise)." json:"force,omitempty"`
	NoRollback bool `description:"With --wait, leave the instance on the new port when the move is not live in time (default: move it back to the port it was on, and exit 5)." json:"noRollback,omitempty"`
	JSON       bool `description:"Print the node's JSON answer." json:"json,omitempty"`
}

func instanceMoveCommand() *cli.Command {
	cfg := &instanceMoveConfig{}
	cfg.SetDefaults()
	return verb("move", "Move the application's instance on this node to a port (a deploy: the new release already listens there; the node "+
		"refuses the move if that port does not serve), waiting if asked until every live ingress dials it, and moving it back if not.",
		"scafo-node instances move <app> [--port=<port>] [--wait=30s] [flags]", 1, cfg,
		func(c *client, args []string) error { return cmdInstancesMove(c, args[0], cfg) })
}

// cmdInstancesMove moves app's instance; with --wait, a move that is not live in time
// is moved back to where the instance was (its port and readiness, forced: the old
// state is restored as it was), unless --noRollback: a deploy either ends with the new
// release serving on every live ingress, or with the instance back where it was, and
// the exit status says which (ExitOK, ExitRolledBack; ExitNotLive when the rollback
// failed, or was not asked).
func cmdInstancesMove(c *client, app string, cfg *instanceMoveConfig) error {
	// Where the instance is now (POST allocates, or shows the allocation): the port
	// to move back to.
	var cur instance
	if err := c.do(http.MethodPost, "/v1/node/instances/"+app, nil, &cur); err != nil {
		return err
	}
	port := cfg.Port
	if port == 0 {
		if port = cur.other(); port == 0 {
			return fmt.Errorf("instances move %s: the node names no port pair for it (port %d, pair %v); give --port", app, cur.Port, cur.Ports)
		}
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("instances move %s: --port %d: must be 1..65535", app, port)
	}
	var q url.Values
	if cfg.Force {
		q = url.Values{"force": {"true"}}
	}
	ready := !cfg.NotReady
	body, _ := json.Marshal(map[string]any{"port": port, "ready": ready})
	raw, live, err := c.write(http.MethodPut, "/v1/node/instances/"+app, q, nil, strings.NewReader(string(body)), cfg.Waiting)
	if err != nil {
		return err
	}
	if err := c.printInstance(raw, cfg.JSON); err != nil {
		return err
	}
	err = live()
	if ExitCode(err) != ExitNotLive || cfg.NoRollback || (cur.Port == port && cur.Ready == ready) {
		return err
	}
	back, _ := json.Marshal(map[string]any{"port": cur.Port, "ready": cur.Ready})
	if rerr := c.do(http.MethodPut, "/v1/node/instances/"+app+"?force=true", strings.NewReader(string(back)), nil); rerr != nil {
		return exitErrf(ExitNotLive, "%v; rolling back to port %d failed (%v): the instance stays on port %d", err, cur.Port, rerr, port)
	}
	return exitErrf(ExitRolledBack, "%v; rolled back to port %d (ready %v)", err, cur.Port, cur.Ready)
}

func instanceReleaseCommand() *cli.Command {
	cfg := &writeConfig{}
	cfg.SetDefaults()
	return verb("release", "Release the application's instance on this node (its ports are quarantined), waiting if asked until no live ingress dials it.",
		"scafo-node instances release <app> [flags]", 1, cfg, func(c *client, args []string) error {
			_, live, err := c.write(http.MethodDelete, "/v1/node/instances/"+args[0], nil, nil, nil, cfg.Waiting)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.out, "released %s\n", args[0])
			return live()
		})
}

func (c *client) printInstance(raw []byte, asJSON bool) error {
	if asJSON {
		return c.printJSON(raw)
	}
	var i instance
	if err := json.Unmarshal(raw, &i); err != nil {
		return err
	}
	if i.App == "" {
		return errors.New("the node's answer names no instance")
	}
	fmt.Fprintf(c.out, "%s on %s: port %d, ready %v", i.App, i.Node, i.Port, i.Ready)
	if o := i.other(); o != 0 {
		fmt.Fprintf(c.out, "; next release on port %d", o)
	}
	fmt.Fprintln(c.out)
	return nil
}
