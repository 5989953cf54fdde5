package fleetcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// TestAFailingRenewalIsReportedWhileTheNameStaysValid: a held certificate whose renewal
// fails (CertMagic's cert_failed with renewal true, which it emits only inside the
// renewal window) is listed by Renewals as failing, with the error, while Status still
// lists the name valid; a renewal that succeeds clears it, and so does another node's
// renewal taken from the store (another serial held), and the certificate leaving. A failed first obtain of a name
// without a certificate is not a failing renewal, and a name without a certificate is
// not listed. Before, nothing told a held certificate failing to renew from one that
// renews: the alert guessed from the days left.
func TestAFailingRenewalIsReportedWhileTheNameStaysValid(t *testing.T) {
	m, err := New(Options{Storage: &certmagic.FileStorage{Path: t.TempDir()}, PlatformDomains: []string{"apps.example.com"}, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.Sync(docWith("held.example.org", "new.example.org"))
	m.mu.Lock()
	m.names["held.example.org"] = &nameState{cert: &heldCert{serial: "aa", notAfter: time.Now().Add(72 * time.Hour)}}
	m.names["new.example.org"] = &nameState{}
	m.mu.Unlock()
	ev := func(event, name string, renewal bool) {
		t.Helper()
		data := map[string]any{"identifier": name, "renewal": renewal}
		if event == "cert_failed" {
			data["error"] = errors.New("acme: urn:ietf:params:acme:error:rateLimited")
		}
		if err := m.onEvent(t.Context(), event, data); err != nil {
			t.Fatal(err)
		}
	}
	renewals := func() []Renewal {
		var out []Renewal
		for _, r := range m.Renewals() {
			if r.Name != "apps.example.com" { // the API apex: no certificate here
				out = append(out, r)
			}
		}
		return out
	}
	quiet := []Renewal{{Name: "held.example.org"}}
	if got := renewals(); !slices.Equal(got, quiet) {
		t.Fatalf("before any renewal: %+v, want %+v", got, quiet)
	}

	ev("cert_obtaining", "held.example.org", true)
	ev("cert_failed", "held.example.org", true)
	ev("cert_obtaining", "new.example.org", false)
	ev("cert_failed", "new.example.org", false)
	failing := []Renewal{{Name: "held.example.org", Failing: true, Error: "acme: urn:ietf:params:acme:error:rateLimited"}}
	if got := renewals(); !slices.Equal(got, failing) {
		t.Fatalf("after a failed renewal: %+v, want %+v", got, failing)
	}
	if s := stateOf(m, "held.example.org"); s.State != StateValid {
		t.Fatalf("a held certificate failing to renew: state %q, want %q (it is valid until NotAfter)", s.State, StateValid)
	}

	ev("cert_obtaining", "held.example.org", true)
	ev("cert_obtained", "held.example.org", true)
	if got := renewals(); !slices.Equal(got, quiet) {
		t.Fatalf("after a renewal that succeeded: %+v, want %+v", got, quiet)
	}

	// Failing again; then a peer's renewal arrives: the store holds a newer certificate,
	// which refresh takes from CertMagic's cache (another serial), and the failure is over.
	ev("cert_failed", "held.example.org", true)
	if got := renewals(); !slices.Equal(got, failing) {
		t.Fatalf("after a second failed renewal: %+v, want %+v", got, failing)
	}
	if _, err := m.cfg.CacheUnmanagedTLSCertificate(t.Context(), selfSigned(t, "held.example.org", 90*24*time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	m.refresh()
	if got := renewals(); !slices.Equal(got, quiet) {
		t.Fatalf("after a peer's renewal was taken: %+v, want %+v", got, quiet)
	}
	if s := stateOf(m, "held.example.org"); s.Serial == "aa" || s.State != StateValid {
		t.Fatalf("the peer's certificate was not taken: %+v", s)
	}

	// Failing once more; the certificate then leaves the cache (expired): no longer listed,
	// and its failure not kept for a later certificate.
	ev("cert_failed", "held.example.org", true)
	for _, c := range m.cache.AllMatchingCertificates("held.example.org") {
		m.cache.Remove([]string{c.Hash()})
	}
	m.refresh()
	if got := renewals(); len(got) != 0 {
		t.Fatalf("after the held certificate was dropped: %+v, want none listed", got)
	}
	m.mu.Lock()
	left := m.names["held.example.org"].renewErr
	m.mu.Unlock()
	if left != "" {
		t.Fatalf("the dropped certificate's renewal error stays: %q", left)
	}
}

// selfSigned is a certificate for name valid for d from now.
func selfSigned(t *testing.T, name string, d time.Duration) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(0xbb), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(d)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}
