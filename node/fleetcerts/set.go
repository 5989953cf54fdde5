package fleetcerts

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/render"
)

// heldCert is a certificate taken from CertMagic's cache, encoded for the render.
type heldCert struct {
	serial   string
	notAfter time.Time
	certPEM  string
	keyPEM   string
}

// refresh compares the held certificates with CertMagic's cache and publishes a new
// Set when anything the render reads moved.
func (m *Manager) refresh() {
	m.mu.Lock()
	now := m.now()
	m.takeMgmtErrs(now)
	managedNames, changed := m.refreshHeld(now)
	unbridge, bridgesChanged := m.refreshBridges(now)
	changed = changed || bridgesChanged
	if len(unbridge) > 0 {
		defer m.cache.RemoveManaged(unbridge) // after m.mu is released (deferred calls run last-in first-out)
	}
	rendered := make(map[string]bool, len(managedNames)+len(m.covered))
	for n := range managedNames {
		rendered[n] = true
	}
	for n := range m.covered {
		rendered[n] = true
	}
	if !changed && sameKeys(rendered, m.set.FleetCerts.Managed) {
		m.mu.Unlock()
		return
	}
	m.set = m.buildSet(managedNames, rendered)
	m.mu.Unlock()
	if m.opt.OnChange != nil {
		m.opt.OnChange()
	}
}

// refreshHeld takes, for every wanted name, the best certificate CertMagic's cache
// holds (m.mu held). It returns the managed names and whether a held certificate
// moved.
func (m *Manager) refreshHeld(now time.Time) (managedNames map[string]bool, changed bool) {
	managedNames = make(map[string]bool, len(m.wanted))
	for n := range m.wanted {
		managedNames[n] = true
		st := m.names[n]
		if st == nil {
			st = &nameState{}
			m.names[n] = st
		}
		best := m.bestCert(n, now)
		switch {
		case best == nil && st.cert != nil:
			st.cert, changed = nil, true
		case best != nil && (st.cert == nil || st.cert.serial != serialOf(best)):
			hc, err := encode(best)
			if err != nil {
				st.lastErr = "encoding the certificate for delivery: " + err.Error()
				continue
			}
			st.cert, changed = hc, true
			st.renewErr = "" // another certificate: whatever failed to renew is replaced
		}
		if st.cert == nil {
			st.renewErr = ""
		}
	}
	return managedNames, changed
}

// refreshBridges takes the bridged certificates of covered hosts (their own
// certificate, until their wildcard is held) and drops the ones no longer needed
// (m.mu held). It returns the hosts CertMagic stops managing (to remove once m.mu is
// released) and whether a bridge moved.
func (m *Manager) refreshBridges(now time.Time) (unbridge []certmagic.SubjectIssuer, changed bool) {
	for h := range m.covered {
		_, parent, _ := strings.Cut(h, ".")
		if w := m.names["*."+parent]; w != nil && w.cert != nil {
			if _, ok := m.bridge[h]; ok {
				// The wildcard is held: the host's own certificate is no longer delivered
				// nor renewed.
				delete(m.bridge, h)
				unbridge = append(unbridge, certmagic.SubjectIssuer{Subject: h})
				changed = true
			}
			continue
		}
		best := m.bestCert(h, now)
		switch {
		case best == nil && m.bridge[h] != nil:
			delete(m.bridge, h)
			changed = true
		case best != nil && (m.bridge[h] == nil || m.bridge[h].serial != serialOf(best)):
			if hc, err := encode(best); err == nil {
				m.bridge[h], changed = hc, true
			}
		}
	}
	for h := range m.bridge {
		if !m.covered[h] {
			delete(m.bridge, h)
			changed = true
			if !m.wanted[h] {
				unbridge = append(unbridge, certmagic.SubjectIssuer{Subject: h})
			}
		}
	}
	return unbridge, changed
}

// buildSet builds the Set of the held and bridged certificates (m.mu held), writing
// their files with file delivery.
func (m *Manager) buildSet(managedNames, rendered map[string]bool) *render.CertSet {
	bridged := make([]string, 0, len(m.bridge))
	for h := range m.bridge {
		bridged = append(bridged, h)
	}
	slices.Sort(bridged)
	fc := &render.FleetCerts{HTTPEntryPoints: m.opt.HTTPEntryPoints, Managed: rendered}
	keep := map[string]bool{} // files of this set (file delivery)
	h := sha256.New()
	names := make([]string, 0, len(managedNames))
	for n := range managedNames {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		h.Write([]byte(n + "\x00"))
		if c := m.names[n].cert; c != nil {
			cert, key := c.certPEM, c.keyPEM
			if m.opt.CertDir != "" {
				var err error
				if cert, key, err = certFiles(m.opt.CertDir, n, c); err != nil {
					m.names[n].lastErr = "delivering the certificate: " + err.Error()
					m.log.Error("fleet certificate: writing its files", "name", n, "err", err)
					h.Write([]byte{2})
					continue
				}
				keep[cert], keep[key] = true, true
			}
			fc.Certificates = append(fc.Certificates, render.Certificate{Names: []string{n}, CertFile: cert, KeyFile: key})
			h.Write([]byte(c.serial))
		}
		h.Write([]byte{1})
	}
	covered := make([]string, 0, len(m.covered))
	for n := range m.covered {
		covered = append(covered, n)
	}
	slices.Sort(covered)
	for _, n := range covered {
		h.Write([]byte(n + "\x00\x03"))
	}
	for _, n := range bridged {
		c := m.bridge[n]
		cert, key := c.certPEM, c.keyPEM
		if m.opt.CertDir != "" {
			var err error
			if cert, key, err = certFiles(m.opt.CertDir, n, c); err != nil {
				m.log.Error("fleet certificate: writing its files", "name", n, "err", err)
				continue
			}
			keep[cert], keep[key] = true, true
		}
		fc.Certificates = append(fc.Certificates, render.Certificate{Names: []string{n}, CertFile: cert, KeyFile: key})
		h.Write([]byte(n + "\x00\x04" + c.serial))
	}
	fp := ""
	if len(names) > 0 || len(covered) > 0 {
		fp = hex.EncodeToString(h.Sum(nil)[:12])
	}
	if m.opt.CertDir != "" {
		// The previous set's files stay for a Traefik that fetched it a moment ago.
		for _, c := range m.set.FleetCerts.Certificates {
			keep[c.CertFile], keep[c.KeyFile] = true, true
		}
		pruneCertFiles(m.opt.CertDir, keep)
	}
	return &render.CertSet{Fingerprint: fp, FleetCerts: fc}
}

// bestCert is the unexpired certificate in CertMagic's cache for exactly name with the
// latest NotAfter (a renewal and its predecessor can both be cached for a moment).
func (m *Manager) bestCert(name string, now time.Time) *certmagic.Certificate {
	var best *certmagic.Certificate
	for _, c := range m.cache.AllMatchingCertificates(name) {
		if c.Leaf == nil || !now.Before(c.Leaf.NotAfter) || !slices.Contains(c.Names, name) || len(c.Names) != 1 {
			continue
		}
		if best == nil || c.Leaf.NotAfter.After(best.Leaf.NotAfter) {
			c := c
			best = &c
		}
	}
	return best
}

func serialOf(c *certmagic.Certificate) string {
	return strings.ToLower(c.Leaf.SerialNumber.Text(16))
}

// encode turns a cached certificate into the PEM the render inlines: the chain as
// issued and the key as PKCS#8. Deterministic, so every node holding the same
// certificate renders the same bytes.
func encode(c *certmagic.Certificate) (*heldCert, error) {
	var chain bytes.Buffer
	for _, der := range c.Certificate.Certificate {
		pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return nil, err
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return &heldCert{serial: serialOf(c), notAfter: c.Leaf.NotAfter, certPEM: chain.String(), keyPEM: string(key)}, nil
}

func sameKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// Current is the Set the render reads now.
func (m *Manager) Current() *render.CertSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.set
}
