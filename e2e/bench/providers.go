package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/traefikprovider/localplugin"
)

// A real Traefik reading a real node, with either provider, on the shipped static
// configuration (deploy/traefik/traefik.yml or traefik-plugin.yml): only listen
// addresses, the node endpoints, the endpoint query and the token change; the provider
// throttle, poll intervals, watch settings and entry-point settings stay as shipped.

// providerKind is how Traefik reads the node.
type providerKind string

const (
	// providerPlugin is the scafo provider plugin (traefik-plugin.yml, long-poll).
	providerPlugin providerKind = "plugin"
	// providerHTTP is Traefik's built-in HTTP provider (traefik.yml, pollInterval 1s).
	providerHTTP providerKind = "http"
)

// shippedPluginConfig is the plugin-based static configuration.
var shippedPluginConfig = filepath.Join(repoRoot, "deploy", "traefik", "traefik-plugin.yml")

// pluginKey is the plugin's key under experimental.localPlugins and providers.plugin.
const pluginKey = "scafo"

// providerLaunch says what one Traefik reads and how.
type providerLaunch struct {
	kind providerKind
	// endpoints are node base URLs ("http://127.0.0.1:7400"): the HTTP provider polls
	// the first; the plugin gets them all, in order.
	endpoints []string
	// query replaces the HTTP provider endpoint's query (shipped: "prefer=self") when
	// set; for issue 17's "group=…".
	query string
	// plugin are extra providers.plugin.scafo settings (issue 17's group setting);
	// prefer is removed from the shipped placeholder unless set here.
	plugin map[string]any
	// pluginSrc is the plugin's source directory (default: this tree's traefikprovider;
	// another for an older build of the plugin).
	pluginSrc string
	// noProbe drops the HTTP provider's shipped X-Scafo-Applied-Probe header (the node
	// then counts what it served; the control of the applied rows).
	noProbe bool
	// logLevel replaces the shipped log.level when set (DEBUG: Traefik logs every
	// configuration it receives, and the plugin every configuration it emits).
	logLevel string
}

// providerStatic turns the shipped static configuration of l.kind into the bench's:
// entry points on loopback ports web and websecure, the node endpoints and query, the
// token in the HTTP provider's header (the plugin reads it from the environment), no
// ACME resolver, no access log nor operator files, and Traefik's API on loopback port api. It refuses a shipped file lacking a key it replaces.
func providerStatic(shipped []byte, l providerLaunch, web, websecure, api int) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(shipped, &cfg); err != nil {
		return nil, fmt.Errorf("parsing the shipped static configuration: %w", err)
	}
	for name, port := range map[string]int{"web": web, "websecure": websecure} {
		ep, ok := dig(cfg, "entryPoints", name).(map[string]any)
		if !ok || ep["address"] == nil {
			return nil, fmt.Errorf("shipped configuration has no entryPoints.%s.address", name)
		}
		ep["address"] = addr(port)
	}
	if _, ok := cfg["certificatesResolvers"]; !ok {
		return nil, fmt.Errorf("shipped configuration has no certificatesResolvers")
	}
	delete(cfg, "certificatesResolvers")
	// No operator files and no access log: a line per request would be the bench's
	// largest cost (the e2e suite's TestOperatorRoutesBesideTheFleets runs both).
	delete(cfg, "accessLog")
	if p, ok := cfg["providers"].(map[string]any); ok {
		delete(p, "file")
	}
	if len(l.endpoints) == 0 {
		return nil, fmt.Errorf("no node endpoints")
	}
	switch l.kind {
	case providerHTTP:
		hp, ok := dig(cfg, "providers", "http").(map[string]any)
		if !ok {
			return nil, fmt.Errorf("shipped configuration has no providers.http")
		}
		ep, _ := hp["endpoint"].(string)
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("shipped providers.http.endpoint %q is not a URL", ep)
		}
		base, err := url.Parse(l.endpoints[0])
		if err != nil {
			return nil, err
		}
		u.Scheme, u.Host = base.Scheme, base.Host
		if l.query != "" {
			u.RawQuery = l.query
		}
		hp["endpoint"] = u.String()
		headers, ok := hp["headers"].(map[string]any)
		if !ok || headers["Authorization"] == nil {
			return nil, fmt.Errorf("shipped configuration has no providers.http.headers.Authorization")
		}
		headers["Authorization"] = "Bearer " + benchIngressToken
		if _, ok := headers["X-Scafo-Ingress"]; ok {
			headers["X-Scafo-Ingress"] = "bench-http" // render-config.sh's part: a report name
		}
		// The applied probe reaches this Traefik's web entry point.
		if _, ok := headers["X-Scafo-Applied-Probe"]; ok {
			headers["X-Scafo-Applied-Probe"] = "http://" + addr(web)
			if l.noProbe {
				delete(headers, "X-Scafo-Applied-Probe")
			}
		}
	case providerPlugin:
		plug, ok := dig(cfg, "providers", "plugin", pluginKey).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("shipped configuration has no providers.plugin.%s", pluginKey)
		}
		if dig(cfg, "experimental", "localPlugins", pluginKey, "moduleName") != localplugin.ModuleName {
			return nil, fmt.Errorf("shipped configuration does not load %s as experimental.localPlugins.%s", localplugin.ModuleName, pluginKey)
		}
		if _, ok := plug["endpoints"]; !ok {
			return nil, fmt.Errorf("shipped configuration has no providers.plugin.%s.endpoints", pluginKey)
		}
		eps := make([]any, len(l.endpoints))
		for i, e := range l.endpoints {
			eps[i] = e
		}
		plug["endpoints"] = eps
		delete(plug, "prefer") // the shipped value is a placeholder node name
		// The applied probe reaches this Traefik's web entry point.
		if _, ok := plug["appliedProbe"]; ok {
			plug["appliedProbe"] = "http://" + addr(web)
		}
		for k, v := range l.plugin {
			if v == nil {
				delete(plug, k) // a shipped setting taken away (the probe's control)
				continue
			}
			plug[k] = v
		}
	default:
		return nil, fmt.Errorf("unknown provider kind %q", l.kind)
	}
	if l.logLevel != "" {
		lg, ok := cfg["log"].(map[string]any)
		if !ok || lg["level"] == nil {
			return nil, fmt.Errorf("shipped configuration has no log.level")
		}
		lg["level"] = l.logLevel
	}
	// Traefik's API on a loopback entry point of its own, so the bench can read how many
	// routers and services Traefik holds (api.insecure serves it on entry point "traefik").
	eps := cfg["entryPoints"].(map[string]any)
	if _, clash := eps["traefik"]; clash {
		return nil, fmt.Errorf("shipped configuration defines entry point traefik, which the bench uses for the API")
	}
	eps["traefik"] = map[string]any{"address": addr(api)}
	apiCfg, ok := cfg["api"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("shipped configuration has no api section")
	}
	apiCfg["insecure"] = true
	return yaml.Marshal(cfg)
}

// providerTraefik is one Traefik process reading a node.
type providerTraefik struct {
	kind      providerKind
	web, api  int
	proc      *proc.Proc
	staticCfg []byte
}

// startProviderTraefik starts Traefik on the shipped configuration of l.kind. It does not
// wait for routes: the caller knows what it expects to be routed.
func startProviderTraefik(t *task, name string, l providerLaunch) *providerTraefik {
	shippedPath := shippedConfig
	if l.kind == providerPlugin {
		shippedPath = shippedPluginConfig
	}
	shipped, err := os.ReadFile(shippedPath)
	if err != nil {
		t.Fatal(err)
	}
	web, websecure, api := freePort(t), freePort(t), freePort(t)
	static, err := providerStatic(shipped, l, web, websecure, api)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "traefik.yml")
	if err := os.WriteFile(file, static, 0o600); err != nil {
		t.Fatal(err)
	}
	p := newProc(t, name, bins.traefik, "--configFile="+file)
	if l.kind == providerPlugin {
		src := l.pluginSrc
		if src == "" {
			src = filepath.Join(bins.root, "traefikprovider")
		}
		if _, err := localplugin.Install(src, filepath.Join(dir, "plugins-local")); err != nil {
			t.Fatalf("installing the plugin from %s: %v", src, err)
		}
		p.Dir = dir // Traefik loads local plugins from ./plugins-local
		p.Env = append(p.Env, "SCAFO_INGRESS_TOKEN="+benchIngressToken)
	}
	p.MustStart(t)
	return &providerTraefik{kind: l.kind, web: web, api: api, proc: p, staticCfg: static}
}

// get sends GET host+path through Traefik and returns the status and the body.
func (tr *providerTraefik) get(host, path string) (int, string, error) {
	return traefikGet(tr.web, traefikRequest{host: host, path: path})
}

// nodeBaseURL is a bench node's base URL, as the plugin's endpoints take it.
func nodeBaseURL(n *benchNode) string { return "http://" + addr(n.port) }

// traefikOverview is what Traefik's /api/overview says it holds.
type traefikOverview struct {
	HTTP struct {
		Routers  overviewCount `json:"routers"`
		Services overviewCount `json:"services"`
	} `json:"http"`
}

type overviewCount struct {
	Total    int `json:"total"`
	Warnings int `json:"warnings"`
	Errors   int `json:"errors"`
}

// overview reads Traefik's /api/overview.
func (tr *providerTraefik) overview() (traefikOverview, error) {
	var o traefikOverview
	resp, err := traefikClient.Get("http://" + addr(tr.api) + "/api/overview")
	if err != nil {
		return o, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return o, fmt.Errorf("/api/overview: %d", resp.StatusCode)
	}
	return o, json.NewDecoder(resp.Body).Decode(&o)
}
