package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/scafo/ingress/internal/settings"
	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/store"

	"github.com/scafo/ingress/node/internal/statedir"
	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/render/routing"
)

// EnvPrefix is the prefix of every environment variable the node reads.
const EnvPrefix = "SCAFO_"

// Config is the node's configuration. Names are part of the interface: flags are
// --<path> (e.g. --platform.domains), environment variables SCAFO_<PATH> (e.g.
// SCAFO_PLATFORM_DOMAINS), file keys the same paths in YAML or TOML.
type Config struct {
	ConfigFile string                  `description:"Configuration file (YAML or TOML)." json:"configFile,omitempty"`
	Listen     string                  `description:"API listen address." json:"listen,omitempty"`
	StateDir   string                  `description:"State directory (tokens, port allocations, the default dir store)." json:"stateDir,omitempty"`
	Node       NodeConfig              `description:"This node." json:"node"`
	Ingress    TokenConfig             `description:"Ingress token (read access to routing)." json:"ingress"`
	Admin      TokenConfig             `description:"Admin token (full access)." json:"admin"`
	Readonly   TokenConfig             `description:"Read-only token (status, applications, the audit log and the routing document; changes nothing): the status page's." json:"readonly"`
	Platform   PlatformConfig          `description:"Platform domains." json:"platform"`
	API        APIConfig               `description:"Platform API apex, and the names the API answers to." json:"api"`
	Store      store.Config            `description:"Fleet-state store." json:"store"`
	Traefik    TraefikConfig           `description:"Traefik render options." json:"traefik"`
	ACME       ACMEConfig              `description:"Fleet certificates: ACME issuance on the fleet store (config_acme.go)." json:"acme"`
	Reconcile  reconcile.Config        `description:"Reconcile loop timings." json:"reconcile"`
	Ports      fleetwrite.PortsConfig  `description:"Instance port allocation." json:"ports"`
	Probe      probe.Config            `description:"Probes of this node's instances (their readiness in the node's record)." json:"probe"`
	Writes     fleetwrite.WritesConfig `description:"Limits on writes through the API." json:"writes"`
	Audit      fleetwrite.AuditConfig  `description:"The audit log in the store." json:"audit"`
	Limits     LimitsConfig            `description:"What one client may hold: connections, time to send a request, log lines." json:"limits"`
	Ingresses  ingress.Config          `description:"Ingress reports: what each Traefik applied (or was served)." json:"ingresses"`
	Log        LogConfig               `description:"Logging." json:"log"`

	// origins says which source set each setting (the loader's, finish); nil for a
	// configuration built in code. Validate's errors name those sources.
	origins *settings.Origins
}

// NodeConfig names this node.
type NodeConfig struct {
	Name    string `description:"Node name (a DNS label, unique in the fleet)." json:"name,omitempty"`
	Address string `description:"This node's IP on the fleet's private network." json:"address,omitempty"`
	APIPort int    `description:"Port peers and ingresses reach this node's API on (default: the listen port)." json:"apiPort,omitempty"`
}

// TokenConfig is the ingress, admin and readonly sections: a role's token and those
// still accepted during a rotation (package httpapi, whose guards check them).
type TokenConfig = httpapi.TokenConfig

// PlatformConfig lists the platform domains.
type PlatformConfig struct {
	Domains []string `description:"Platform domains: <app>.<domain> routes to app." json:"domains,omitempty"`
	// Groups maps platform domains to ingress groups, one "domain=group" entry each
	// (a list rather than a map: a domain's dots would split a paerser map key). A
	// mapped domain yields hosts for the applications of its group only; an unmapped
	// one belongs to the group "default".
	Groups []string `description:"Ingress group of a platform domain, as domain=group (e.g. eu1.apps.example.com=eu-1); unmapped domains are in group default." json:"groups,omitempty"`
}

// DomainGroups returns platform.groups as a map, domain → group (nil when empty).
// Validate has checked every entry; a malformed one is left out here.
func (p PlatformConfig) DomainGroups() map[string]string {
	if len(p.Groups) == 0 {
		return nil
	}
	m := make(map[string]string, len(p.Groups))
	for _, e := range p.Groups {
		if d, g, ok := strings.Cut(e, "="); ok {
			m[routing.FoldHost(strings.TrimSpace(d))] = strings.TrimSpace(g)
		}
	}
	return m
}

// validateGroups checks platform.groups: each entry "domain=group", the domain one of
// the platform domains (folded), the group a valid group name, no domain twice.
func (p PlatformConfig) validateGroups() []error {
	var errs []error
	seen := map[string]bool{}
	for i, e := range p.Groups {
		field := fmt.Sprintf("platform.groups[%d]", i)
		d, g, ok := strings.Cut(e, "=")
		d, g = routing.FoldHost(strings.TrimSpace(d)), strings.TrimSpace(g)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s %q: must be domain=group", field, e))
		case !slices.Contains(p.Domains, d):
			errs = append(errs, fmt.Errorf("%s %q: %q is not one of platform.domains", field, e, d))
		case seen[d]:
			errs = append(errs, fmt.Errorf("%s %q: domain %q is mapped twice", field, e, d))
		default:
			if err := routing.ValidateGroup(field, g); err != nil {
				errs = append(errs, err)
			}
		}
		seen[d] = true
	}
	return errs
}

// APIConfig controls the platform API apex and the names the API answers to (package
// httpapi, whose Host guard enforces them).
type APIConfig = httpapi.APIConfig

// The store's settings (package store), by their names here.
type (
	StoreConfig    = store.Config
	DirStoreConfig = store.DirConfig
	S3StoreConfig  = store.S3Config
)

// The traefik.* settings are package publish's (the render options it renders with),
// by their names here.
type (
	TraefikConfig     = publish.TraefikConfig
	RetryConfig       = publish.RetryConfig
	HealthCheckConfig = publish.HealthCheckConfig
)

// ProbeConfig times the probes of this node's own instances (package probe).
type ProbeConfig = probe.Config

// LimitsConfig bounds what clients can hold: the API's connections and request
// deadlines (package httpapi, whose guards enforce them).
type LimitsConfig = httpapi.LimitsConfig

// LogConfig selects the log format and level.
type LogConfig struct {
	Level  string `description:"debug, info, warn or error." json:"level,omitempty"`
	Format string `description:"text or json." json:"format,omitempty"`
}

// logLevels are log.level's values (any case), logFormats log.format's.
var (
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
)

func (l LogConfig) validate() []error {
	var errs []error
	if !slices.Contains(logLevels, strings.ToLower(l.Level)) {
		errs = append(errs, fmt.Errorf("log.level %q: one of %s", l.Level, strings.Join(logLevels, ", ")))
	}
	if !slices.Contains(logFormats, l.Format) {
		errs = append(errs, fmt.Errorf("log.format %q: one of %s", l.Format, strings.Join(logFormats, ", ")))
	}
	return errs
}

// apiPort is node.apiPort, or the listen port where it is 0 (as normalize fills it).
func (c *Config) apiPort() int {
	if c.Node.APIPort != 0 {
		return c.Node.APIPort
	}
	return portOf(c.Listen)
}

// SlogLevel is log.level as a slog.Level (Validate has checked it).
func (l LogConfig) SlogLevel() slog.Level {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(strings.ToUpper(l.Level)))
	return lvl
}

// MinTokenLength is the shortest ingress or admin token the node accepts, configured,
// previous or read from its file.
const MinTokenLength = statedir.MinTokenLength

// SetDefaults fills every default (paerser calls it, and so does NewConfig).
func (c *Config) SetDefaults() {
	c.Listen = ":7400"
	c.StateDir = DefaultStateDir()
	host, _ := os.Hostname()
	c.Node = NodeConfig{Name: sanitizeHostname(host), Address: "127.0.0.1"}
	c.Platform.Domains = []string{"apps.localhost"}
	c.API = httpapi.DefaultAPI()
	c.Traefik = publish.TraefikDefaults()
	c.ACME = fleetcerts.Defaults()
	c.Reconcile = reconcile.Defaults()
	c.Probe = probe.Defaults()
	c.Writes = fleetwrite.DefaultWrites()
	c.Audit = fleetwrite.DefaultAudit()
	c.Ports = fleetwrite.DefaultPorts()
	c.Limits = httpapi.DefaultLimits()
	c.Log = LogConfig{Level: "info", Format: "text"}
	c.Ingresses = ingress.Defaults()
}

// DefaultStateDir is the state directory when none is configured: /var/lib/scafo as
// root, else ./scafo-state.
func DefaultStateDir() string { return statedir.Default() }

// NewConfig returns a Config with every default set.
func NewConfig() *Config {
	c := &Config{}
	c.SetDefaults()
	return c
}

// sanitizeHostname turns the OS hostname into a node name: its first label, lowercased.
func sanitizeHostname(h string) string {
	h, _, _ = strings.Cut(h, ".")
	h = strings.ToLower(h)
	if routing.ValidateLabel("node.name", h) != nil {
		return "node"
	}
	return h
}

// Validate lists what is wrong with the configuration, each error naming the setting
// and, for a configuration the loader read, where each setting it names came from (a
// file's key, a variable, a flag, or the default: settings.Origins.Explain). It reports
// and changes nothing: the loader has normalised c first (normalize).
func (c *Config) Validate() error {
	errs := c.problems()
	for i, err := range errs {
		errs[i] = c.origins.Explain(err)
	}
	return errors.Join(errs...)
}

// problems lists what is wrong with the configuration, each error naming the settings
// at fault (the sections' Validate, and what spans sections).
func (c *Config) problems() []error {
	var errs []error
	if err := routing.ValidateLabel("node.name", c.Node.Name); err != nil {
		errs = append(errs, err)
	}
	if ip := net.ParseIP(c.Node.Address); ip == nil {
		errs = append(errs, fmt.Errorf("node.address %q: must be an IP address", c.Node.Address))
	}
	if len(c.Platform.Domains) == 0 {
		errs = append(errs, errors.New("platform.domains: at least one platform domain is required"))
	}
	for _, d := range c.Platform.Domains { // folded by the loader (normalize)
		if err := routing.ValidateHost("platform.domains", d); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.Platform.validateGroups()...)
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen %q: %w", c.Listen, err))
	}
	errs = append(errs, c.Store.Validate()...)
	for _, t := range []struct {
		name string
		tok  TokenConfig
	}{{"ingress", c.Ingress}, {"admin", c.Admin}, {"readonly", c.Readonly}} {
		errs = append(errs, t.tok.Validate(t.name)...)
	}
	// The configured tokens (a token file is read by New, which checks them all again);
	// Validate's caller names their sources.
	errs = append(errs, rolesOverlap(roleTokens("ingress", c.Ingress, c.Ingress.Token, "", ""), roleTokens("admin", c.Admin, c.Admin.Token, "", ""),
		roleTokens("readonly", c.Readonly, c.Readonly.Token, "", ""))...)
	errs = append(errs, c.Log.validate()...)
	errs = append(errs, c.Traefik.Validate()...)
	errs = append(errs, c.Writes.Validate()...)
	errs = append(errs, c.Audit.Validate()...)
	errs = append(errs, c.Reconcile.Validate()...)
	errs = append(errs, c.Ports.Validate()...)
	if p := c.apiPort(); p >= c.Ports.Min && p <= c.Ports.Max {
		errs = append(errs, fmt.Errorf("node.apiPort %d: inside ports.min..ports.max (%d..%d): an application could be given the API's port", p, c.Ports.Min, c.Ports.Max))
	}
	// A released port must outlive every ingress's copy of the old document: several
	// reconcile intervals plus a typical poll interval.
	if floor := 5*time.Duration(c.Reconcile.Interval) + 5*time.Second; time.Duration(c.Ports.Quarantine) < floor {
		errs = append(errs, fmt.Errorf("ports.quarantine %s: must be at least 5 x reconcile.interval + 5s (%s)", time.Duration(c.Ports.Quarantine), floor))
	}
	errs = append(errs, c.Probe.Validate()...)
	errs = append(errs, c.Limits.Validate()...)
	errs = append(errs, c.API.Validate()...)
	errs = append(errs, c.Ingresses.Validate()...)
	errs = append(errs, c.validateACME()...)
	errs = append(errs, c.validateBounds(portOf(c.Listen))...)
	return errs
}
