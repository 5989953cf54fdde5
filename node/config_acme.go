package node

import (
	"errors"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/rfc2136"
)

// The acme section's settings, defaults and checks are package fleetcerts's (its
// Config; the rfc2136 provider's settings are package rfc2136's), by their names here.
// What the section cannot check alone, for it involves other sections, is below.
type (
	ACMEConfig    = fleetcerts.Config
	DNS01Config   = fleetcerts.DNS01Config
	RFC2136Config = rfc2136.Config
)

// Certificate delivery modes (acme.delivery), by their names here.
const (
	DeliveryInline = fleetcerts.DeliveryInline
	DeliveryFiles  = fleetcerts.DeliveryFiles
)

// validateACME checks the acme section (only when enabled: a disabled section is
// inert): its own checks (fleetcerts.Config.Validate), then those with other sections.
func (c *Config) validateACME() []error {
	a := c.ACME
	if !a.Enabled {
		return nil
	}
	var errs []error
	if !c.API.Public {
		// The challenge router sends challenges to the API chain, which the document
		// carries only with the platform API apex.
		errs = append(errs, errors.New("acme.enabled: needs api.public (the ACME challenge router points at the node API chain of the document)"))
	}
	errs = append(errs, a.Validate()...)
	if a.DNS01.Platform && c.Traefik.PlatformWildcardCerts {
		errs = append(errs, errors.New("acme.dns01.platform and traefik.platformWildcardCerts: one of them (the fleet issues the platform wildcard once, or every Traefik orders its own)"))
	}
	if a.DNS01.Platform && len(c.Platform.Domains) == 0 {
		errs = append(errs, errors.New("acme.dns01.platform: needs at least one platform domain"))
	}
	return errs
}
