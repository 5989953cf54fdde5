package fleetcerts

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"
	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node/certstore"
	"github.com/scafo/ingress/node/rfc2136"
)

// LetsEncryptProduction is the default acme.caServer.
const LetsEncryptProduction = "https://acme-v02.api.letsencrypt.org/directory"

// acme.customBudget: the default, and the most accepted (beyond it pacing means
// nothing: Let's Encrypt allows 300 new orders per account per 3 hours).
const (
	DefaultCustomBudget = 50
	MaxCustomBudget     = 10000
)

// Certificate delivery modes (acme.delivery).
const (
	DeliveryInline = "inline"
	DeliveryFiles  = "files"
)

// Config is fleet certificate issuance, the node's acme.* settings (docs/design.md §10):
// every node runs CertMagic on the fleet store, issues each non-wildcard name of the
// document once (HTTP-01 through any Traefik), and renders the certificates into
// tls.certificates. The checks that involve other sections (api.public, the platform
// domains, traefik.platformWildcardCerts) are the node's (node/config_acme.go).
type Config struct {
	Enabled bool   `description:"Issue certificates for the document's names with ACME (HTTP-01) and deliver them in the rendered configuration." json:"enabled,omitempty"`
	Email   string `description:"ACME account contact address." json:"email,omitempty"`
	// CAServer is the ACME directory URL.
	CAServer string `description:"ACME directory URL (default Let's Encrypt production)." json:"caServer,omitempty"`
	// CARoots is a PEM file of roots trusted for the connection to the CA server (a
	// private CA, Pebble); empty: the system roots.
	CARoots string `description:"PEM file of roots trusted for the connection to caServer (a private CA or Pebble); default the system roots." json:"caRoots,omitempty"`
	// RenewalWindow is the share of a certificate's lifetime left when it is renewed;
	// 0 is CertMagic's default (1/3).
	RenewalWindow float64 `description:"Renew when this share of the certificate's lifetime is left (0: CertMagic's default, 1/3)." json:"renewalWindow,omitempty"`
	// PlatformBudget paces platform hosts (<app>.<platform domain>) when
	// traefik.platformWildcardCerts is off: at most this many platform hosts without a
	// certificate in the store are taken on per hour by this node; the rest wait
	// (status: backlog). The API apex is never paced.
	PlatformBudget int `description:"Platform hosts without a certificate this node starts issuing per hour (the rest wait, listed as backlog); the API apex is not paced." json:"platformBudget,omitempty"`
	// CustomBudget paces custom domains (claimed names outside the platform domains)
	// the same way: the fleet shares one ACME account, so a run of claimed domains
	// whose DNS points elsewhere would otherwise spend every tenant's order limit.
	CustomBudget int `description:"Custom domains without a certificate this node starts issuing per hour (the rest wait, listed as backlog), 0 to 10000; the API apex is not paced." json:"customBudget,omitempty"`
	// HTTPEntryPoints carry the ACME challenge router (plain HTTP, port 80).
	HTTPEntryPoints []string `description:"Traefik entry points (plain HTTP, port 80) that carry the ACME challenge router." json:"httpEntryPoints,omitempty"`
	// RenewCheckInterval is how often CertMagic checks certificates for renewal.
	RenewCheckInterval ptypes.Duration `description:"How often certificates are checked for renewal." json:"renewCheckInterval,omitempty"`
	// LockLease is how long an issuance lock outlives its holder's last renewal: a
	// node that dies mid-order is taken over by another after at most this long.
	LockLease ptypes.Duration `description:"Issuance lock lease: a node that dies while issuing is taken over after at most this long." json:"lockLease,omitempty"`
	// Delivery is how the render carries certificates: "inline" (the PEM in the body)
	// or "files" (written under <stateDir>/certs, the render naming them: only for a
	// Traefik on the same machine, reading the node's state dir).
	Delivery string `description:"inline: the PEM in the rendered configuration; files: written under <stateDir>/certs and named by the render (a Traefik on the node's machine only)." json:"delivery,omitempty"`
	// DNS01 issues the wildcards by DNS-01 from the nodes (docs/certificates-dns01.md).
	DNS01 DNS01Config `description:"DNS-01 from the nodes: the platform wildcard and apex, custom wildcards by delegation (docs/certificates-dns01.md)." json:"dns01"`
}

// DNS01Config is DNS-01 issuance (acme.dns01.*, issue 27): on when Platform or
// DelegationZone is set.
type DNS01Config struct {
	Platform       bool   `description:"Issue each platform domain's wildcard (*.<domain>) and apex once for the fleet by DNS-01 (replaces traefik.platformWildcardCerts, where every Traefik orders its own)." json:"platform,omitempty"`
	DelegationZone string `description:"Zone the fleet's DNS provider edits for custom wildcard claims: the customer points _acme-challenge.<name> by CNAME at <label>.<zone> (named in /v1/status); empty: custom wildcards get no fleet certificate." json:"delegationZone,omitempty"`
	Provider       string `description:"DNS provider: rfc2136 (RFC 2136 dynamic updates with TSIG; the one built in)." json:"provider,omitempty"`
	// Resolvers answer the zone lookup, the propagation check and the delegation
	// check.
	Resolvers          []string        `description:"DNS servers (host:port) for the zone lookup, the propagation check and delegation CNAMEs (default: the system's; propagation then asks the zone's authoritative servers)." json:"resolvers,omitempty"`
	PropagationTimeout ptypes.Duration `description:"Longest wait for a TXT record to be visible before the CA is asked to validate." json:"propagationTimeout,omitempty"`
	RFC2136            rfc2136.Config  `description:"The rfc2136 provider." json:"rfc2136"`
}

// Defaults are the acme.* defaults.
func Defaults() Config {
	return Config{
		CAServer:           LetsEncryptProduction,
		PlatformBudget:     10,
		CustomBudget:       DefaultCustomBudget,
		HTTPEntryPoints:    []string{"web"},
		RenewCheckInterval: ptypes.Duration(10 * time.Minute),
		LockLease:          ptypes.Duration(2 * time.Minute),
		Delivery:           DeliveryInline,
		DNS01:              DNS01Config{Provider: "rfc2136", PropagationTimeout: ptypes.Duration(2 * time.Minute)},
	}
}

// Enabled reports whether any name is issued by DNS-01.
func (c DNS01Config) Enabled() bool { return c.Platform || c.DelegationZone != "" }

// Normalize reads the TSIG secret from its file when DNS-01 is on (the loader's one
// normalisation of the section): the file is read once, and New builds the provider
// from the secret.
func (c *Config) Normalize() error {
	if !c.Enabled || !c.DNS01.Enabled() {
		return nil
	}
	if err := c.DNS01.RFC2136.ReadSecret(); err != nil {
		return fmt.Errorf("acme.dns01.%w", err)
	}
	return nil
}

// DNSProvider builds the DNS provider named by acme.dns01.provider: any libdns provider
// (certmagic.DNSProvider) plugs in here, with its own settings section beside RFC2136
// (docs/certificates-dns01.md).
func (c DNS01Config) DNSProvider() (certmagic.DNSProvider, error) {
	switch c.Provider {
	case "rfc2136":
		p, err := c.RFC2136.Provider()
		if err != nil {
			return nil, fmt.Errorf("acme.dns01.%w", err)
		}
		return p, nil
	default:
		return nil, fmt.Errorf("acme.dns01.provider %q: rfc2136 is the one built in (docs/certificates-dns01.md: adding a libdns provider)", c.Provider)
	}
}

// Validate lists what is wrong with the section (nil when it is valid, or disabled: a
// disabled section is inert). It reports and changes nothing.
func (c Config) Validate() []error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.Email != "" {
		if _, err := mail.ParseAddress(c.Email); err != nil || strings.ContainsAny(c.Email, "<> ") {
			errs = append(errs, fmt.Errorf("acme.email %q: not an e-mail address", c.Email))
		}
	}
	if u, err := url.Parse(c.CAServer); err != nil || u.Scheme != "https" || u.Host == "" {
		errs = append(errs, fmt.Errorf("acme.caServer %q: must be an https:// URL", c.CAServer))
	}
	if c.RenewalWindow < 0 || c.RenewalWindow >= 1 {
		errs = append(errs, fmt.Errorf("acme.renewalWindow %v: a share of the lifetime, 0 (default) or in (0, 1)", c.RenewalWindow))
	}
	if c.PlatformBudget < 0 {
		errs = append(errs, fmt.Errorf("acme.platformBudget %d: must not be negative", c.PlatformBudget))
	}
	if c.CustomBudget < 0 || c.CustomBudget > MaxCustomBudget {
		errs = append(errs, fmt.Errorf("acme.customBudget %d: from 0 to %d per hour", c.CustomBudget, MaxCustomBudget))
	}
	if len(c.HTTPEntryPoints) == 0 {
		errs = append(errs, errors.New("acme.httpEntryPoints: at least one entry point (the challenge arrives on port 80)"))
	}
	for i, ep := range c.HTTPEntryPoints {
		if ep == "" || strings.ContainsAny(ep, "@ \t\r\n") {
			errs = append(errs, fmt.Errorf("acme.httpEntryPoints[%d] %q: an entry point name", i, ep))
		}
	}
	if c.Delivery != DeliveryInline && c.Delivery != DeliveryFiles {
		errs = append(errs, fmt.Errorf("acme.delivery %q: inline or files", c.Delivery))
	}
	if c.LockLease < ptypes.Duration(certstore.MinLockLease) || c.LockLease > ptypes.Duration(certstore.DefaultMaxLockLease) {
		// At most what /v1/storage grants: a lock expiring beyond twice that is taken
		// over as corrupt (certstore), so a longer lease would be lost to peers.
		errs = append(errs, fmt.Errorf("acme.lockLease %s: from %s to %s", time.Duration(c.LockLease), certstore.MinLockLease, certstore.DefaultMaxLockLease))
	}
	if c.RenewCheckInterval <= 0 {
		errs = append(errs, errors.New("acme.renewCheckInterval: must be positive"))
	}
	if d := c.DNS01; d.Enabled() {
		if d.PropagationTimeout <= 0 || d.PropagationTimeout > ptypes.Duration(30*time.Minute) {
			errs = append(errs, fmt.Errorf("acme.dns01.propagationTimeout %s: from 1s to 30m", time.Duration(d.PropagationTimeout)))
		}
		for i, r := range d.Resolvers {
			if _, _, err := net.SplitHostPort(r); err != nil {
				errs = append(errs, fmt.Errorf("acme.dns01.resolvers[%d] %q: host:port", i, r))
			}
		}
		if _, err := d.DNSProvider(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Options are the Manager's options the section sets: the CA roots read and the DNS-01
// provider built, each once (the node calls it in New, and adds what other sections
// and the node decide: storage, platform domains, settling, delivery directory, log).
// A roots file that is not there or holds no certificate is an error naming the setting.
func (c Config) Options() (Options, error) {
	roots, err := c.roots()
	if err != nil {
		return Options{}, err
	}
	var dns01 *DNS01
	if d := c.DNS01; d.Enabled() {
		prov, err := d.DNSProvider()
		if err != nil {
			return Options{}, err
		}
		dns01 = &DNS01{Provider: prov, Platform: d.Platform, DelegationZone: d.DelegationZone,
			Resolvers: d.Resolvers, PropagationTimeout: time.Duration(d.PropagationTimeout)}
	}
	return Options{
		CA: c.CAServer, Email: c.Email, Roots: roots,
		RenewalWindow:      c.RenewalWindow,
		RenewCheckInterval: time.Duration(c.RenewCheckInterval),
		PlatformBudget:     c.PlatformBudget,
		CustomBudget:       c.CustomBudget,
		HTTPEntryPoints:    c.HTTPEntryPoints,
		DNS01:              dns01,
	}, nil
}

// roots reads CARoots into a pool (nil when unset: the system roots).
func (c Config) roots() (*x509.CertPool, error) {
	if c.CARoots == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.CARoots)
	if err != nil {
		return nil, fmt.Errorf("acme.caRoots: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("acme.caRoots %s: no PEM certificate in it", c.CARoots)
	}
	return pool, nil
}
