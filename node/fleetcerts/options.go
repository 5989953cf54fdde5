package fleetcerts

import (
	"crypto/x509"
	"log/slog"
	"time"

	"github.com/caddyserver/certmagic"
)

// Hold-off defaults (Options.FailLimit, FailHold, FailHoldMax).
const (
	DefaultFailLimit   = 3
	DefaultFailHold    = time.Hour
	DefaultFailHoldMax = 24 * time.Hour
)

// Options configure a Manager.
type Options struct {
	// Storage is the fleet store's CertMagic storage (certstore.New).
	Storage certmagic.Storage
	// OnChange is called (without locks held) after the Set changed (nil: nobody is
	// told). The node hands in a kick its root drains (Current is the Set then).
	OnChange func()
	// CA is the ACME directory URL; Email the account contact (may be empty).
	CA, Email string
	// Roots, when not nil, are the roots trusted for the connection to CA.
	Roots *x509.CertPool
	// RenewalWindow is CertMagic's RenewalWindowRatio (0: its default).
	RenewalWindow float64
	// RenewCheckInterval is how often CertMagic's maintenance checks for renewals.
	RenewCheckInterval time.Duration
	// PlatformDomains and PlatformWildcard are the names policy; PlatformBudget the
	// platform hosts without a certificate taken on per hour.
	PlatformDomains  []string
	PlatformWildcard bool
	PlatformBudget   int
	// CustomBudget is the custom domains (neither platform hosts nor API hosts)
	// without a certificate taken on per hour; the rest wait, listed as backlog.
	CustomBudget int
	// FailLimit obtains of a name without a certificate failing in a row stop its
	// management for FailHold, doubled at every further hold up to FailHoldMax (0:
	// DefaultFailLimit, DefaultFailHold, DefaultFailHoldMax).
	FailLimit             int
	FailHold, FailHoldMax time.Duration
	// HTTPEntryPoints carry the challenge router in the render.
	HTTPEntryPoints []string
	Log             *slog.Logger
	// Poll is how often the held certificates are compared with CertMagic's cache (in
	// memory) and names missing a certificate are looked up in the store. Default 1s;
	// store lookups of missing names at most every 20 Polls.
	Poll time.Duration
	// Settle is how long a name must have been in the document before this node starts
	// an order for it, so every other node knows the name (and answers its challenge)
	// by the time the CA validates through its Traefik: a name is claimed through one
	// node and reaches the others on their next reconcile pass. The node sets it to
	// two reconcile intervals plus a second.
	Settle time.Duration
	// CertDir, when set, delivers certificates as files under it (files.go) instead of
	// inline PEM.
	CertDir string
	// DNS01, when set, issues the wildcards (and, with DNS01.Platform, the platform
	// apexes) by DNS-01 (dns01.go); nil: exact names only, by HTTP-01.
	DNS01 *DNS01
}
