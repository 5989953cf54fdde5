package scafo

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"path"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
)

// heldCerts answers tls.permission.scafo's "does this name hold a certificate in the
// storage, and until when" from memory for heldFor, so a handshake for a document name
// with no certificate costs no storage request (it listed the whole certificates/
// namespace through the node each time: ~100 ms of node CPU per anonymous ClientHello
// at 1 000 certificates). Guarded by TestHandshakesForANameWithNoCertificateReadTheStorageOnceAMinute.
//
// What it reads: the issuers (the directories under certificates/, listed at most every
// issuersFor and after each approval; the last listing is kept when a listing fails;
// an issuer directory another Caddy creates is seen within issuersFor), then
// certificates/<issuer>/<name>/<name>.crt under each (a Load: the storage's cache
// answers it while no node can be reached, so a Caddy restarted in a node outage still
// finds the certificates it held). A storage error is remembered for errorFor only.
// At most maxHeldCerts names are remembered (they are document names: the permission
// asks only for those); past it an arbitrary one is forgotten.
//
// Safe for concurrent use; the storage is read outside its lock.
type heldCerts struct {
	mu        sync.Mutex
	names     map[string]heldCert
	issuers   []string
	issuersAt time.Time // zero: never listed
	// forgets counts forget calls: a read that began before one is answered but not
	// remembered (its "no certificate" may predate the order the approval made;
	// TestAReadOlderThanAForgetIsNotRemembered).
	forgets uint64
}

// heldCert is what the storage said of one name at a moment.
type heldCert struct {
	at       time.Time
	held     bool      // a parsable certificate for the name, from some issuer
	notAfter time.Time // the latest such certificate's expiry (held only)
	err      error     // the storage could not say (neither held nor not)
}

const (
	heldFor      = time.Minute
	errorFor     = 10 * time.Second
	issuersFor   = time.Minute
	maxHeldCerts = 20000
)

// lookup is what the storage says of name, at most heldFor old (errorFor for an
// error). now is the permission's clock.
func (h *heldCerts) lookup(ctx context.Context, st certmagic.Storage, name string, now time.Time) heldCert {
	h.mu.Lock()
	c, ok := h.names[name]
	gen := h.forgets
	h.mu.Unlock()
	ttl := heldFor
	if c.err != nil {
		ttl = errorFor
	}
	if ok && now.Sub(c.at) < ttl && !c.at.After(now) {
		return c
	}
	c = h.read(ctx, st, name, now)
	if errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded) {
		return c // the caller's, not the storage's: not remembered
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.forgets != gen {
		return c
	}
	if h.names == nil {
		h.names = map[string]heldCert{}
	}
	if _, ok := h.names[name]; !ok && len(h.names) >= maxHeldCerts {
		for k, v := range h.names {
			if now.Sub(v.at) >= heldFor {
				delete(h.names, k)
			}
		}
		for k := range h.names {
			if len(h.names) < maxHeldCerts {
				break
			}
			delete(h.names, k)
		}
	}
	h.names[name] = c
	return c
}

// forget drops what is remembered of name, and the issuers' listing: after an
// approval an order may land, maybe under an issuer directory not listed yet (the first
// certificate of a fresh store). One listing per approval: approvals are budgeted.
func (h *heldCerts) forget(name string) {
	h.mu.Lock()
	delete(h.names, name)
	h.issuersAt = time.Time{}
	h.forgets++
	h.mu.Unlock()
}

// read asks the storage.
func (h *heldCerts) read(ctx context.Context, st certmagic.Storage, name string, now time.Time) heldCert {
	c := heldCert{at: now}
	if st == nil {
		return c
	}
	issuers, err := h.issuerDirs(ctx, st, now)
	if err != nil {
		c.err = err
		return c
	}
	var loadErr error
	for _, dir := range issuers {
		b, err := st.Load(ctx, path.Join(dir, name, name+".crt"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			loadErr = err
			continue
		}
		if na, ok := leafNotAfter(b); ok {
			if !c.held || na.After(c.notAfter) {
				c.notAfter = na
			}
			c.held = true
		}
	}
	if !c.held && loadErr != nil {
		c.err = loadErr
	}
	return c
}

// issuerDirs is the listing of certificates/, at most issuersFor old; the last one
// when a listing fails.
func (h *heldCerts) issuerDirs(ctx context.Context, st certmagic.Storage, now time.Time) ([]string, error) {
	h.mu.Lock()
	dirs, at, gen := h.issuers, h.issuersAt, h.forgets
	h.mu.Unlock()
	if !at.IsZero() && now.Sub(at) < issuersFor && !at.After(now) {
		return dirs, nil
	}
	listed, err := st.List(ctx, "certificates", false)
	if errors.Is(err, fs.ErrNotExist) {
		listed, err = nil, nil
	}
	if err != nil {
		if !at.IsZero() {
			return dirs, nil
		}
		return nil, err
	}
	h.mu.Lock()
	if h.forgets == gen { // a listing older than a forget may lack the issuer of its order
		h.issuers, h.issuersAt = listed, now
	}
	h.mu.Unlock()
	return listed, nil
}

// leafNotAfter is the expiry of the first certificate of a PEM bundle.
func leafNotAfter(b []byte) (time.Time, bool) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return time.Time{}, false
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		leaf, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return time.Time{}, false
		}
		return leaf.NotAfter, true
	}
}
