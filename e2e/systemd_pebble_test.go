package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
)

// hubPebble is the ACME CA docs/install.md's "Turn on HTTPS" runs against: Pebble in the
// hub's network namespace, beside MinIO, at https://10.83.0.9:14000/dir, validating
// HTTP-01 on port 80 of whatever pebble-challtestsrv resolves a name to (every name:
// the machine named by answerIP).
type hubPebble struct {
	listenerCA  string // PEM file: the root of the directory's own TLS certificate
	issuingRoot []byte // PEM: the root Pebble's certificates chain to
}

const hubPebbleDir = "https://10.83.0.9:14000/dir"

func startHubPebble(t *testing.T, fleet *fleetNet, answerIP string) *hubPebble {
	t.Helper()
	pebbleBin, challBin, err := pebbletest.Binaries()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Pebble: %v", err)
		}
		t.Skipf("Pebble: %v", err)
	}
	dir := t.TempDir()
	caPEM, certPEM, keyPEM := hubListenerCert(t, net.IPv4(10, 83, 0, 9))
	hp := &hubPebble{listenerCA: filepath.Join(dir, "pebble-ca.pem")}
	for name, b := range map[string][]byte{"pebble-ca.pem": caPEM, "cert.pem": certPEM, "key.pem": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chall := newProc(t, "challtestsrv", "ip", []string{"netns", "exec", fleet.hub, challBin,
		"-dnsserver", "10.83.0.9:8053", "-management", "10.83.0.9:8055",
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", "",
		"-defaultIPv4", answerIP, "-defaultIPv6", ""}, nil)
	chall.MustStart(t)
	conf, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress":                  "10.83.0.9:14000",
		"managementListenAddress":        "10.83.0.9:15000",
		"certificate":                    filepath.Join(dir, "cert.pem"),
		"privateKey":                     filepath.Join(dir, "key.pem"),
		"httpPort":                       80,
		"tlsPort":                        443,
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
		"retryAfter":                     map[string]int{"authz": 1, "order": 1},
	}})
	confFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(confFile, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	p := newProc(t, "pebble", "ip", []string{"netns", "exec", fleet.hub, pebbleBin,
		"-config", confFile, "-dnsserver", "10.83.0.9:8053"}, []string{"PEBBLE_VA_NOSLEEP=1"})
	p.MustStart(t)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c := fleet.client(5 * time.Second)
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	if err := p.WaitUntil(60*time.Second, func() error {
		resp, err := c.Get("https://10.83.0.9:15000/roots/0")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("roots/0: %s", resp.Status)
		}
		hp.issuingRoot = b
		return proc.HTTPOK(c, hubPebbleDir)
	}); err != nil {
		t.Fatalf("Pebble in %s: %v", fleet.hub, err)
	}
	return hp
}

// hubListenerCert is a CA and a server certificate for ip, for Pebble's own listener.
func hubListenerCert(t *testing.T, ip net.IP) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hub Pebble listener CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{ip},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}
