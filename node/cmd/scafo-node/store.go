package main

import (
	"fmt"
	"os"
	"time"

	"github.com/traefik/paerser/cli"
	"github.com/traefik/paerser/flag"

	"github.com/scafo/ingress/internal/settings"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/client"
)

// storeCommand is `scafo-node store`: operator actions on the node's store, run on the
// node's machine (they act on its state dir, not through its API).
func storeCommand() *cli.Command {
	adopt := storeAdoptCommand()
	usage := "scafo-node store <command> [flags]"
	verbs := []*cli.Command{adopt, storeInitCommand()}
	g := &cli.Command{
		Name:           "store",
		Description:    "The node's store: create it, or adopt a store that is not the one the node served.",
		CustomHelpFunc: client.Help(usage, verbs),
		AllowArg:       true,
		Run:            client.GroupRun("store", usage, verbs),
	}
	for _, c := range verbs {
		if err := g.AddCommand(c); err != nil {
			panic(err)
		}
	}
	return g
}

// adoptConfig is `scafo-node store adopt`'s configuration.
type adoptConfig struct {
	StateDir string `description:"The node's state directory (default: SCAFO_STATEDIR, then the node's default)." json:"stateDir,omitempty"`
}

// flagsLoader decodes a verb's flags into its Configuration and refuses anything else:
// each flag the verb does not take is named, with the closest one it does.
type flagsLoader struct{}

func (flagsLoader) Load(args []string, cmd *cli.Command) (bool, error) {
	if len(args) == 0 {
		return true, nil
	}
	if err := settings.NewKnown(cmd.Configuration, "").CheckFlags(args, nil); err != nil {
		return false, err
	}
	if err := flag.Decode(args, cmd.Configuration); err != nil {
		return false, fmt.Errorf("parsing flags: %w", err)
	}
	return true, nil
}

// storeAdoptCommand is `scafo-node store adopt`: the operator's acceptance of the store
// a node finds, when it is not the one the node served (an empty or replaced disk, a
// new bucket, a restored copy). The node keeps serving its last document and refuses
// writes until then; see node.RequestStoreAdopt.
func storeAdoptCommand() *cli.Command {
	cfg := &adoptConfig{StateDir: os.Getenv("SCAFO_STATEDIR")}
	if cfg.StateDir == "" {
		cfg.StateDir = node.DefaultStateDir()
	}
	usage := "scafo-node store adopt [flags]"
	return &cli.Command{
		Name: "adopt",
		Description: "Make the node on this state dir accept its store as it is, forgetting the store it served " +
			"(a running node at its next reconcile pass, a stopped one when it starts).",
		Configuration:  cfg,
		Resources:      []cli.ResourceLoader{flagsLoader{}},
		CustomHelpFunc: client.Help(usage, nil),
		Run: func([]string) error {
			mem, ok, err := node.RememberedStore(cfg.StateDir)
			if err != nil {
				fmt.Fprintf(os.Stdout, "the state dir's memory of the store is unreadable (%v): it is forgotten\n", err)
			}
			if err := node.RequestStoreAdopt(cfg.StateDir); err != nil {
				return err
			}
			if ok {
				fmt.Fprintf(os.Stdout, "the node remembers serving epoch %q, serial %d (revision %s, saved %s)\n",
					mem.Epoch, mem.Serial, mem.Revision, mem.SavedAt.Format(time.RFC3339))
			}
			fmt.Fprintf(os.Stdout, "store adopt requested in %s: if the store the node finds is not the one it served, "+
				"it accepts it as it is at its next reconcile pass (a stopped node: when it starts) and GET /v1/status "+
				"shows store.foreign false; if it is the one it served, the request is dropped\n", cfg.StateDir)
			return nil
		},
	}
}
