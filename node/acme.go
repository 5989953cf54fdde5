package node

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/node/certstore"
	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/store"
)

// Fleet certificates (docs/design.md §10, --acme.*): the node's side. fleetcerts runs
// CertMagic; this file connects it to the store, the publisher (a new certificate
// republishes the rendered configuration), the challenge route, /v1/status and the
// metrics.

// certStorage is CertMagic's storage over the fleet store: certificates, keys, the
// ACME account, challenge tokens and issuance locks under the store's certificate
// namespace (package certstore), locked with the store's conditional writes and a
// lease, so a node that dies holding a lock is taken over after acme.lockLease.
func certStorage(cfg *Config, st store.Store, log *slog.Logger) certmagic.Storage {
	return certstore.New(st, certstore.Options{
		Owner:     cfg.Node.Name,
		LockLease: time.Duration(cfg.ACME.LockLease),
		// CertMagic holds a name's lock through its whole retry backoff (minutes to
		// hours when a name fails), and every other node blocks in Lock for that name
		// meanwhile: each waiting node polls the lock object. 10 s between polls keeps
		// a failing name at 0.1 store reads a second per waiting node (2 s would be
		// 0.5); a waiting node then loads a finished certificate up to 10 s later.
		PollMax: lockPollMax,
		Logger:  log,
	})
}

// lockPollMax bounds the wait between a blocked node's lock attempts (certStorage).
const lockPollMax = 10 * time.Second

// newCertManager builds the fleet-certificate manager when --acme.enabled (nil
// otherwise), reading the CA roots and building the DNS-01 provider (each once, here).
// onChange is told every new certificate set: the root drains it into the publisher
// (kicks.certs), which, built after, tells the manager every document (publishCerts).
func newCertManager(cfg *Config, st store.Store, log *slog.Logger, onChange func()) (*fleetcerts.Manager, error) {
	c := cfg.ACME
	if !c.Enabled {
		return nil, nil
	}
	opt, err := c.Options() // the CA roots and the DNS-01 provider
	if err != nil {
		return nil, err
	}
	opt.Storage = certStorage(cfg, st, log.With("component", "certstore"))
	opt.OnChange = onChange
	if c.Delivery == DeliveryFiles {
		opt.CertDir = filepath.Join(cfg.StateDir, "certs")
		if abs, err := filepath.Abs(opt.CertDir); err == nil {
			opt.CertDir = abs // Traefik resolves a relative path against its own directory
		}
	}
	opt.PlatformDomains, opt.PlatformWildcard = cfg.Platform.Domains, cfg.Traefik.PlatformWildcardCerts
	// Peers learn a new name on their next reconcile pass; an order started before
	// would send the CA to nodes that do not answer for the name yet.
	opt.Settle = 2*time.Duration(cfg.Reconcile.Interval) + time.Second
	opt.Log = log.With("component", "fleetcerts")
	m, err := fleetcerts.New(opt)
	if err != nil {
		return nil, fmt.Errorf("fleet certificates: %w", err)
	}
	return m, nil
}

// startCerts begins issuance once the API listens (CertMagic's HTTP-01 solver finds the
// API's port taken and leaves the answering to the API's challenge route); a nil m is
// no ACME.
func startCerts(m *fleetcerts.Manager, pub *publish.Publisher, addr net.Addr) {
	if m == nil {
		return
	}
	m.Start(addr)
	if snap := pub.Current(); snap != nil {
		m.Sync(snap.Doc())
	}
}

func stopCerts(m *fleetcerts.Manager) {
	if m != nil {
		m.Close()
	}
}
