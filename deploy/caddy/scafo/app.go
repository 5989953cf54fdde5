// Package scafo holds scafo's Caddy modules: Caddy as an ingress of a scafo fleet.
//
//   - scafo (an app): polls the fleet's routing document from the nodes (Poller) and
//     keeps the last good one, in memory and on disk.
//   - http.matchers.scafo: the request's host is in the document (exact host, then the
//     one-label wildcard once; the API apex without its denied paths). It records where
//     the request goes for the upstream source.
//   - http.reverse_proxy.upstreams.scafo: the selected route's ordered upstreams, for
//     reverse_proxy with lb_policy first (upstream order is failover order).
//   - tls.permission.scafo: on-demand TLS obtains a certificate only for a name the
//     current document names exactly, answered from the document held.
//   - caddy.storage.scafo: certificates, keys and locks in the fleet store through the
//     nodes' /v1/storage (node/storageclient); the ACME account stays on local disk.
//
// deploy/caddy/Caddyfile wires them; deploy/caddy/README.md explains the choices.
package scafo

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

func init() {
	caddy.RegisterModule(App{})
	httpcaddyfile.RegisterGlobalOption("scafo", parseGlobalScafo)
}

// DefaultTokenEnv is the environment variable the ingress token is read from when
// neither token nor token_env is set.
const DefaultTokenEnv = "SCAFO_INGRESS_TOKEN"

// Nodes is how a module reaches the fleet: node endpoints and the ingress token.
type Nodes struct {
	// Endpoints are node API base URLs, the node beside this Caddy first
	// ("http://127.0.0.1:7400"); the others are tried in order when it fails.
	Endpoints []string `json:"endpoints,omitempty"`
	// TokenEnv names the environment variable holding the ingress token (default
	// SCAFO_INGRESS_TOKEN). Token, when set, is used instead (placeholders such as
	// {env.X} or {file./path} are replaced).
	TokenEnv string `json:"token_env,omitempty"`
	Token    string `json:"token,omitempty"`
}

func (n Nodes) token() (string, error) {
	if n.Token != "" {
		t, err := caddy.NewReplacer().ReplaceOrErr(n.Token, true, true)
		if err != nil {
			return "", fmt.Errorf("token: %w", err)
		}
		return t, nil
	}
	env := n.TokenEnv
	if env == "" {
		env = DefaultTokenEnv
	}
	t := os.Getenv(env)
	if t == "" {
		return "", fmt.Errorf("no ingress token: %s is empty (set it, or token/token_env)", env)
	}
	return t, nil
}

// unmarshal reads one of the shared subdirectives; false when d's token is not one.
func (n *Nodes) unmarshal(d *caddyfile.Dispenser) (bool, error) {
	switch d.Val() {
	case "endpoints":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return true, d.ArgErr()
		}
		n.Endpoints = append(n.Endpoints, args...)
	case "token_env":
		if !d.AllArgs(&n.TokenEnv) {
			return true, d.ArgErr()
		}
	case "token":
		if !d.AllArgs(&n.Token) {
			return true, d.ArgErr()
		}
	default:
		return false, nil
	}
	return true, nil
}

// App is the scafo app: the routing document, polled from the nodes. The matcher, the
// upstream source and the permission module read it; it is shared across config
// reloads that configure it the same way (one poller, no gap, no second long-poll).
type App struct {
	Nodes
	// StateFile keeps the last good document (default <Caddy data dir>/scafo/routes.json).
	StateFile string `json:"state_file,omitempty"`
	// Name is this ingress's name in the nodes' ingress reports (default caddy-<hostname>).
	Name string `json:"name,omitempty"`
	// Group serves one ingress group's routes (the nodes' ?group=).
	Group string `json:"group,omitempty"`
	// Wait is the long-poll wait (default 30s); Interval the retry pause once every
	// endpoint failed (default 2s).
	Wait     caddy.Duration `json:"wait,omitempty"`
	Interval caddy.Duration `json:"interval,omitempty"`

	poller *Poller
	key    string
}

var pollers = caddy.NewUsagePool()

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "scafo", New: func() caddy.Module { return new(App) }}
}

// Provision starts (or joins) the poller of this configuration.
func (a *App) Provision(ctx caddy.Context) error {
	tok, err := a.token()
	if err != nil {
		return fmt.Errorf("scafo: %w", err)
	}
	cfg := PollerConfig{
		Endpoints: append([]string(nil), a.Endpoints...),
		Token:     tok,
		StateFile: a.StateFile,
		Name:      a.Name,
		Group:     a.Group,
		Wait:      time.Duration(a.Wait),
		Interval:  time.Duration(a.Interval),
		Logger:    ctx.Logger(),
	}
	if cfg.StateFile == "" {
		cfg.StateFile = filepath.Join(caddy.AppDataDir(), "scafo", "routes.json")
	}
	key, _ := json.Marshal(struct {
		E       []string
		T       [32]byte
		S, N, G string
		W, I    time.Duration
	}{cfg.Endpoints, sha256.Sum256([]byte(tok)), cfg.StateFile, cfg.Name, cfg.Group, cfg.Wait, cfg.Interval})
	sum := sha256.Sum256(key)
	a.key = hex.EncodeToString(sum[:])
	v, _, err := pollers.LoadOrNew(a.key, func() (caddy.Destructor, error) {
		p, err := NewPoller(cfg)
		if err != nil {
			return nil, err
		}
		p.Start()
		return p, nil
	})
	if err != nil {
		return err
	}
	a.poller = v.(*Poller)
	return nil
}

// Poller is the app's poller.
func (a *App) Poller() *Poller { return a.poller }

// Start and Stop: the poller runs from Provision to Cleanup (it must hold the last
// document while a reload provisions the next configuration).
func (a *App) Start() error { return nil }
func (a *App) Stop() error  { return nil }

// Cleanup releases this configuration's use of the poller.
func (a *App) Cleanup() error {
	if a.key != "" {
		_, err := pollers.Delete(a.key)
		return err
	}
	return nil
}

// UnmarshalCaddyfile reads
//
//	scafo {
//		endpoints <url>...
//		token_env <VAR> | token <value>
//		state_file <path>
//		name <ingress name>
//		group <group>
//		wait <duration>
//		interval <duration>
//	}
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		if ok, err := a.unmarshal(d); ok {
			if err != nil {
				return err
			}
			continue
		}
		switch d.Val() {
		case "state_file":
			if !d.AllArgs(&a.StateFile) {
				return d.ArgErr()
			}
		case "name":
			if !d.AllArgs(&a.Name) {
				return d.ArgErr()
			}
		case "group":
			if !d.AllArgs(&a.Group) {
				return d.ArgErr()
			}
		case "wait", "interval":
			opt := d.Val()
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil {
				return d.Errf("%s: %v", opt, err)
			}
			if opt == "wait" {
				a.Wait = caddy.Duration(dur)
			} else {
				a.Interval = caddy.Duration(dur)
			}
		default:
			return d.Errf("scafo: unknown option %q", d.Val())
		}
	}
	return nil
}

func parseGlobalScafo(d *caddyfile.Dispenser, _ any) (any, error) {
	var a App
	if err := a.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "scafo", Value: caddyconfig.JSON(a, nil)}, nil
}

// scafoApp returns the configuration's scafo app.
func scafoApp(ctx caddy.Context) (*App, error) {
	v, err := ctx.App("scafo")
	if err != nil {
		return nil, fmt.Errorf("scafo app: %w", err)
	}
	a, ok := v.(*App)
	if !ok || a.poller == nil {
		return nil, fmt.Errorf("scafo app: not configured (the global option scafo { endpoints … })")
	}
	return a, nil
}

var (
	_ caddy.App             = (*App)(nil)
	_ caddy.Provisioner     = (*App)(nil)
	_ caddy.CleanerUpper    = (*App)(nil)
	_ caddyfile.Unmarshaler = (*App)(nil)
)
