package scafo

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// refusingIssuer records the names CertMagic asks it to issue for and issues nothing
// (ErrNoRetry: CertMagic does not retry).
type refusingIssuer struct {
	mu    sync.Mutex
	asked []string
}

func (r *refusingIssuer) Issue(_ context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	r.mu.Lock()
	r.asked = append(r.asked, csr.DNSNames...)
	r.mu.Unlock()
	return nil, certmagic.ErrNoRetry{Err: errors.New("the test's issuer issues nothing")}
}

func (*refusingIssuer) IssuerKey() string { return "refusing-test-issuer" }

// TestSNISpellingsReachThePermissionFoldedByCertMagic (issue 39, item 8): the module's
// exactness (TestAllowedIsExact) is not what an SNI meets. CertMagic folds the
// ClientHello's server name (strings.TrimSpace, then idna.Lookup.ToASCII: lower case,
// full-width letters to ASCII, IDNs to punycode) before it asks the permission, so
// "SHOP1.EXAMPLE.ORG" or full-width letters are asked, approved and ordered as the
// exact name (harmless: the same name); a trailing dot (or an ideographic full stop) is
// refused by CertMagic before the permission is asked; a port, a space inside or a NUL
// fails the folding; an IP literal, a look-alike (punycode) or a wildcard-covered name
// is asked and refused. Through CertMagic's own GetCertificate with on-demand TLS (its
// v0.25.6), the permission as its DecisionFunc: every name it is asked for and every
// name the issuer is asked for is a document name, spelled exactly.
func TestSNISpellingsReachThePermissionFoldedByCertMagic(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, _ := docPermission(t, renewalDoc(), -1, 0, &now) // no budget: only the document decides
	var mu sync.Mutex
	asked := map[string]bool{} // what the permission was asked, and its answer
	iss := &refusingIssuer{}
	cache := certmagic.NewCache(certmagic.CacheOptions{GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return nil, errors.New("none") }, Logger: zap.NewNop()})
	t.Cleanup(cache.Stop)
	cfg := certmagic.New(cache, certmagic.Config{
		Storage: &certmagic.FileStorage{Path: t.TempDir()},
		Logger:  zap.NewNop(),
		OnDemand: &certmagic.OnDemandConfig{DecisionFunc: func(ctx context.Context, name string) error {
			err := perm.CertificateAllowed(ctx, name)
			mu.Lock()
			asked[name] = err == nil
			mu.Unlock()
			return err
		}},
		Issuers: []certmagic.Issuer{iss},
	})
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	for _, c := range []struct {
		sni  string
		asks string // the name the permission is asked for ("": none)
		ok   bool
	}{
		{"shop1.example.org", "shop1.example.org", true},
		{"SHOP1.EXAMPLE.ORG", "shop1.example.org", true},
		{"Shop2.Example.Org", "shop2.example.org", true},
		{"ｓｈｏｐ3.ｅｘａｍｐｌｅ.ｏｒｇ", "shop3.example.org", true},   // full-width letters
		{" shop4.example.org ", "shop4.example.org", true}, // trimmed
		{"shop5.example.org。", "", false},                  // an ideographic full stop: a trailing dot
		{"shop5.example.org.", "", false},                  // CertMagic's SubjectQualifiesForCert: never asked
		{"shop5.example.org:443", "", false},
		{"shop5.example.org\x00", "", false},
		{"sh op5.example.org", "", false},
		{"127.0.0.1", "127.0.0.1", false},
		{"x.shop5.example.org", "x.shop5.example.org", false},
		{"ṡhop5.example.org", "xn--hop5-zh5a.example.org", false}, // a look-alike: punycode, another name
	} {
		mu.Lock()
		clear(asked)
		mu.Unlock()
		_, err := cfg.GetCertificate(&tls.ClientHelloInfo{ServerName: c.sni, Conn: c1})
		mu.Lock()
		got := slices.Sorted(func(yield func(string) bool) {
			for k := range asked {
				if !yield(k) {
					return
				}
			}
		})
		ok, was := asked[c.asks]
		mu.Unlock()
		switch {
		case c.asks == "" && len(got) != 0:
			t.Errorf("SNI %q: the permission was asked %v, want never", c.sni, got)
		case c.asks != "" && (len(got) != 1 || !was):
			t.Errorf("SNI %q: the permission was asked %v, want %q", c.sni, got, c.asks)
		case was && ok != c.ok:
			t.Errorf("SNI %q: the permission answered approved %v for %q, want %v", c.sni, ok, c.asks, c.ok)
		}
		if err == nil {
			t.Errorf("SNI %q: a certificate was served (the test's issuer issues none)", c.sni)
		}
	}
	iss.mu.Lock()
	defer iss.mu.Unlock()
	for _, name := range iss.asked {
		if _, ok := perm.app.poller.Table().ApplicationOf(name); !ok {
			t.Errorf("the issuer was asked for %q, not a document name", name)
		}
	}
	if want := []string{"shop1.example.org", "shop1.example.org", "shop2.example.org", "shop3.example.org", "shop4.example.org"}; !slices.Equal(slices.Sorted(slices.Values(iss.asked)), want) {
		t.Errorf("the issuer was asked for %v, want %v: each approved spelling ordered as its exact name", iss.asked, want)
	}
}
