package httpapi

// The configuration sections the API reads, handed over whole by the composition root
// (docs/design.md §7): the root names sections, this file reads their fields.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/internal/statedir"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
)

// TokenConfig is the ingress, admin and readonly sections: a role's bearer token and
// those still accepted during a rotation (tokens.go checks requests against them).
type TokenConfig struct {
	Token string `description:"Bearer token; minted to the state dir when empty." json:"token,omitempty" loggable:"false"`
	// Previous tokens are still accepted, so a rotation has no window in which some
	// client holds a token the node refuses: add the new token, keep the old one here,
	// move every client, then drop it.
	Previous []string `description:"Tokens still accepted during a rotation (remove once every client has the new one)." json:"previous,omitempty" loggable:"false"`
}

// Sections are the node's settings the API reads, each section whole as the loader
// left it (validated, normalised). The tokens' Token is the one in force: the
// configured token, else the one read from or minted to the state dir.
type Sections struct {
	NodeName, NodeAddress string   // node.name, node.address
	StateDir              string   // stateDir: the adopt hint of /v1/status
	PlatformDomains       []string // platform.domains: names of the API apex

	Ingress, Admin, Readonly TokenConfig

	API       APIConfig
	Limits    LimitsConfig
	Writes    fleetwrite.WritesConfig
	Ports     fleetwrite.PortsConfig
	Reconcile reconcile.Config
	ACME      fleetcerts.Config
	Traefik   publish.TraefikConfig
}

// Config is what the API reads of the sections. Zero limits take their defaults
// (LimitsConfig.FillDefaults), as for a configuration built in code.
func (s Sections) Config() Config {
	lim := s.Limits
	lim.FillDefaults()
	return Config{
		NodeName: s.NodeName, NodeAddress: s.NodeAddress, StateDir: s.StateDir,
		Heartbeat:       time.Duration(s.Reconcile.Heartbeat),
		NodeTTL:         time.Duration(s.Reconcile.NodeTTL),
		PortsQuarantine: time.Duration(s.Ports.Quarantine),
		BodyTimeout:     time.Duration(lim.BodyTimeout),
		WriteTimeout:    time.Duration(lim.WriteTimeout),
		ConnMaxAge:      time.Duration(lim.ConnMaxAge),
		RejectLog:       time.Duration(lim.RejectLog),
		WriteRate:       s.Writes.Rate, WriteBurst: s.Writes.Burst,
		IngressToken: s.Ingress.Token, AdminToken: s.Admin.Token, ReadOnlyToken: s.Readonly.Token,
		IngressPrevious: s.Ingress.Previous, AdminPrevious: s.Admin.Previous, ReadOnlyPrevious: s.Readonly.Previous,
		ACMEInline: s.ACME.Enabled && s.ACME.Delivery == fleetcerts.DeliveryInline,
		Hosts:      append(slices.Clone(s.PlatformDomains), s.API.AllowedHosts...),
		// The middlewares the configuration declares: /v1/status warns of others.
		Middlewares: s.Traefik.Middlewares,
	}
}

// Validate lists what is wrong with the role's section (role: ingress, admin or
// readonly). A configured token (a minted one is 64 hex characters) is held to the
// previous tokens' minimum: "short" is not a secret. It reports and changes nothing;
// that no two roles share a token is the root's check (it spans sections).
func (t TokenConfig) Validate(role string) []error {
	var errs []error
	if tok := t.Token; tok != "" && len(strings.TrimSpace(tok)) < statedir.MinTokenLength {
		errs = append(errs, fmt.Errorf("%s.token: a token of at least %d characters (leave it empty and the node mints one)", role, statedir.MinTokenLength))
	}
	for i, tok := range t.Previous {
		if len(strings.TrimSpace(tok)) < statedir.MinTokenLength {
			errs = append(errs, fmt.Errorf("%s.previous[%d]: a token of at least %d characters", role, i, statedir.MinTokenLength))
		}
	}
	return errs
}
