// Package pebbletest gives tests a real ACME server: Pebble (Let's Encrypt's test CA)
// with validation on (never PEBBLE_VA_ALWAYS_VALID), and pebble-challtestsrv as its
// DNS server, so a test decides which loopback address each name resolves to and every
// HTTP-01 validation really connects there (to a Traefik, in the fleet tests).
//
// The binaries come from <repo>/.bin (`.ci/pebble.sh install`). Without them the test
// is skipped with instructions, except under CI (env CI set), where it fails.
//
//	p := pebbletest.Start(t, pebbletest.Config{HTTPPort: 8080})
//	p.AddA(t, "shop.example.com", "127.0.0.12")
//	// ACME directory p.Directory, trusting p.CARootsFile (Pebble's HTTPS listener);
//	// issued certificates chain to p.IssuerRoot(t).
package pebbletest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
)

// Config is one Pebble.
type Config struct {
	// HTTPPort is the port Pebble's VA connects to for HTTP-01 (its "httpPort"), on the
	// address the name resolves to. Required.
	HTTPPort int
	// Validity of issued certificates (default Pebble's 90 days). A short one makes
	// CertMagic renew soon.
	Validity time.Duration
	// VASleep keeps Pebble's random 0–5 s sleep before each validation (default off:
	// PEBBLE_VA_NOSLEEP=1; validation itself stays on).
	VASleep bool
	// DNSServer, when set (host:port), is the DNS server Pebble's VA asks (a real BIND
	// for DNS-01, node/rfc2136/bindtest) instead of a challtestsrv; AddA is then not
	// available. HTTPPort may be 0 (only DNS-01 is validated).
	DNSServer string
}

// Pebble is a running Pebble and challtestsrv.
type Pebble struct {
	// Directory is the ACME directory URL.
	Directory string
	// CARootsFile is a PEM file with the root of Pebble's HTTPS listener (for
	// --acme.caRoots); CARoots the same as a pool.
	CARootsFile string
	CARoots     *x509.CertPool

	mgmt, dnsMgmt string
	pebble        *proc.Proc
	chall         *proc.Proc
}

// Binaries finds pebble and pebble-challtestsrv in <repo>/.bin (the repo being the
// nearest parent directory holding go.mod).
func Binaries() (pebble, chall string, err error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			p, c := filepath.Join(d, ".bin", "pebble"), filepath.Join(d, ".bin", "pebble-challtestsrv")
			for _, b := range []string{p, c} {
				if _, err := os.Stat(b); err != nil {
					return "", "", fmt.Errorf("%s: %w", b, err)
				}
			}
			return p, c, nil
		}
		if filepath.Dir(d) == d {
			return "", "", errors.New("no go.mod above the working directory")
		}
	}
}

// Start runs Pebble and challtestsrv on free loopback ports for the calling test; both
// are killed when it ends.
func Start(t testing.TB, cfg Config) *Pebble {
	t.Helper()
	pebbleBin, challBin, err := Binaries()
	if err != nil {
		msg := fmt.Sprintf("no Pebble for tests: %v. Run `.ci/pebble.sh install`", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if cfg.HTTPPort == 0 && cfg.DNSServer == "" {
		t.Fatal("pebbletest: Config.HTTPPort is required")
	}
	if cfg.HTTPPort == 0 {
		cfg.HTTPPort = 80 // Pebble wants one; nothing validates by HTTP-01
	}
	dir := t.TempDir()
	ports := freePorts(t, 5)
	dnsAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p := &Pebble{
		Directory: fmt.Sprintf("https://127.0.0.1:%d/dir", ports[2]),
		mgmt:      fmt.Sprintf("https://127.0.0.1:%d", ports[3]),
		dnsMgmt:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
	}

	if cfg.DNSServer != "" {
		dnsAddr, p.dnsMgmt = cfg.DNSServer, ""
	} else {
		// challtestsrv: DNS only. No default AAAA answer (Pebble asks AAAA first and would
		// dial ::1), unknown names resolve to 127.0.0.1 unless a test adds an A record.
		p.chall = proc.New(t, "challtestsrv", challBin,
			"-dnsserver", dnsAddr, "-management", p.dnsMgmt[len("http://"):],
			"-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", "",
			"-defaultIPv4", "127.0.0.1", "-defaultIPv6", "")
		p.chall.MustStart(t)
		if err := p.chall.WaitPort(30*time.Second, p.dnsMgmt[len("http://"):]); err != nil {
			t.Fatalf("challtestsrv: %v", err)
		}
	}

	// Pebble's own HTTPS listener: a certificate from a CA made here.
	caPEM, certPEM, keyPEM := listenerCert(t)
	p.CARootsFile = filepath.Join(dir, "pebble-listener-ca.pem")
	writeFile(t, p.CARootsFile, caPEM)
	writeFile(t, filepath.Join(dir, "cert.pem"), certPEM)
	writeFile(t, filepath.Join(dir, "key.pem"), keyPEM)
	p.CARoots = x509.NewCertPool()
	p.CARoots.AppendCertsFromPEM(caPEM)

	validity := uint64(cfg.Validity / time.Second)
	conf := map[string]any{"pebble": map[string]any{
		"listenAddress":                  fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"managementListenAddress":        fmt.Sprintf("127.0.0.1:%d", ports[3]),
		"certificate":                    filepath.Join(dir, "cert.pem"),
		"privateKey":                     filepath.Join(dir, "key.pem"),
		"httpPort":                       cfg.HTTPPort,
		"tlsPort":                        ports[4],
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
		"retryAfter":                     map[string]int{"authz": 1, "order": 1},
		"keyAlgorithm":                   "ecdsa",
		"profiles": map[string]any{"default": map[string]any{
			"description": "scafo tests", "validityPeriod": validity,
		}},
	}}
	b, _ := json.Marshal(conf)
	confFile := filepath.Join(dir, "pebble.json")
	writeFile(t, confFile, b)
	p.pebble = proc.New(t, "pebble", pebbleBin, "-config", confFile, "-dnsserver", dnsAddr)
	env := os.Environ()
	if !cfg.VASleep {
		env = append(env, "PEBBLE_VA_NOSLEEP=1")
	}
	p.pebble.Env = env
	p.pebble.MustStart(t)
	if err := p.pebble.WaitLog(30*time.Second, 0, "Listening on:"); err != nil {
		t.Fatalf("pebble: %v", err)
	}
	if err := p.pebble.WaitPort(30*time.Second, fmt.Sprintf("127.0.0.1:%d", ports[2])); err != nil {
		t.Fatalf("pebble: %v", err)
	}
	return p
}

// AddA makes host resolve (for Pebble's VA) to addr; an earlier answer is replaced.
func (p *Pebble) AddA(t testing.TB, host, addr string) {
	t.Helper()
	if p.dnsMgmt == "" {
		t.Fatal("pebbletest: AddA with Config.DNSServer (edit that server's zones instead)")
	}
	p.post(t, "/clear-a", map[string]any{"host": host})
	p.post(t, "/add-a", map[string]any{"host": host, "addresses": []string{addr}})
}

func (p *Pebble) post(t testing.TB, path string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(p.dnsMgmt+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("challtestsrv %s: %v", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("challtestsrv %s: %s", path, resp.Status)
	}
}

// IssuerRoot is the root the certificates Pebble issues chain to (it is generated
// anew at every Pebble start).
func (p *Pebble) IssuerRoot(t testing.TB) *x509.CertPool {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.CARoots}}}
	resp, err := c.Get(p.mgmt + "/roots/0")
	if err != nil {
		t.Fatalf("pebble root: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if resp.StatusCode != http.StatusOK || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble root: %s %q", resp.Status, b)
	}
	return pool
}

// Issued counts the certificates Pebble has issued (its log's "Issued certificate
// serial" lines), and returns their serials in order.
func (p *Pebble) Issued() []string {
	var serials []string
	for _, line := range strings.Split(p.pebble.Output(), "\n") {
		_, rest, ok := strings.Cut(line, "Issued certificate serial ")
		if !ok {
			continue
		}
		serial, _, _ := strings.Cut(rest, " ")
		serials = append(serials, serial)
	}
	return serials
}

// IssuedCert is one certificate Pebble issued: its serial (as Issued gives it) and the
// DNS names it covers.
type IssuedCert struct {
	Serial string
	Names  []string
}

// IssuedNames is every certificate Pebble has issued (Issued's serials, in order) with
// the DNS names it covers, read from Pebble's management API (/cert-status-by-serial/):
// Pebble logs no names, and a test counting issuances per name (a renewal issued once
// among several names renewing) needs them.
func (p *Pebble) IssuedNames(t testing.TB) []IssuedCert {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.CARoots}}}
	var out []IssuedCert
	for _, serial := range p.Issued() {
		resp, err := c.Get(p.mgmt + "/cert-status-by-serial/" + serial)
		if err != nil {
			t.Fatalf("pebble certificate %s: %v", serial, err)
		}
		var st struct{ Certificate string }
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("pebble certificate %s: %s %v", serial, resp.Status, err)
		}
		blk, _ := pem.Decode([]byte(st.Certificate))
		if blk == nil {
			t.Fatalf("pebble certificate %s: not PEM", serial)
		}
		leaf, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatalf("pebble certificate %s: %v", serial, err)
		}
		out = append(out, IssuedCert{Serial: serial, Names: leaf.DNSNames})
	}
	return out
}

// Orders counts the orders Pebble has accepted (its log's "Added order" lines): an
// order is what a CA's rate limits count, whether or not it ends in a certificate.
func (p *Pebble) Orders() int {
	return strings.Count(p.pebble.Output(), "Added order ")
}

// Log is Pebble's output so far.
func (p *Pebble) Log() string { return p.pebble.Output() }

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// listenerCert makes a CA and a certificate for 127.0.0.1 and localhost signed by it.
func listenerCert(t testing.TB) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pebbletest listener CA"},
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
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
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
