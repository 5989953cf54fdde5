package render

import (
	"bytes"
	"compress/gzip"
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
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/scafo/ingress/render/routing"
)

// fleetCertsFor makes one certificate per exact host of doc, shaped like Let's
// Encrypt's: an ECDSA P-256 leaf plus its intermediate in the chain, a PKCS#8 key.
func fleetCertsFor(tb testing.TB, doc *routing.Document, n int) *FleetCerts {
	tb.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench intermediate R99"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	inter := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	fc := &FleetCerts{HTTPEntryPoints: []string{"web"}, Managed: map[string]bool{}}
	for i, r := range doc.Routes {
		if len(fc.Certificates) == n {
			break
		}
		if routing.IsWildcard(r.Host) {
			continue
		}
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader) // a key each: gzip must not fold them
		kb, _ := x509.MarshalPKCS8PrivateKey(key)
		keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}))
		leaf := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), DNSNames: []string{r.Host},
			NotBefore: time.Now(), NotAfter: time.Now().Add(90 * 24 * time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatal(err)
		}
		chain := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) + string(inter)
		fc.Managed[r.Host] = true
		fc.Certificates = append(fc.Certificates, Certificate{Names: []string{r.Host}, CertFile: chain, KeyFile: keyPEM})
	}
	if len(fc.Certificates) < n {
		tb.Fatalf("only %d exact hosts for %d certificates", len(fc.Certificates), n)
	}
	return fc
}

// BenchmarkRenderWithFleetCertificates: the render and one poll of the rendered body
// (the node serves cached bytes: an HTTP GET over loopback, identity and gzip, read to
// the end) for fleets of 100, 1 000 and 10 000 applications, without certificates and
// with one inline certificate per exact host, and with the file delivery (a path per
// certificate; Traefik then reads the same pairs from disk); plus decoding the body the way Traefik's
// HTTP provider does first (encoding/json into a generic value, an upper bound on its
// typed decode), and, with certificates, loading every pair as Traefik's pkg/tls does
// (tls.X509KeyPair). Reports the body sizes.
func BenchmarkRenderWithFleetCertificates(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		doc := generatedDoc(b, n, 0)
		fc := fleetCertsFor(b, doc, n)
		files := &FleetCerts{HTTPEntryPoints: fc.HTTPEntryPoints, Managed: fc.Managed}
		for i, c := range fc.Certificates {
			base := fmt.Sprintf("/var/lib/scafo/certs/%s.%x", c.Names[0], i+2)
			files.Certificates = append(files.Certificates, Certificate{Names: c.Names, CertFile: base + ".crt", KeyFile: base + ".key"})
		}
		for _, mode := range []string{"none", "inline", "files"} {
			var certs *FleetCerts
			switch mode {
			case "inline":
				certs = fc
			case "files":
				certs = files
			}
			name := fmt.Sprintf("certs=%d/%s", n, mode)
			body := mustTraefikFleet(b, doc, Options{}, certs)
			var zb bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
			zw.Write(body)
			zw.Close()
			b.Run(name+"/render", func(b *testing.B) {
				for b.Loop() {
					if _, err := TraefikFleet(doc, Options{}, certs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(body)), "bytes/body")
				b.ReportMetric(float64(zb.Len()), "bytes/gzip")
			})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Accept-Encoding") == "gzip" {
					w.Header().Set("Content-Encoding", "gzip")
					w.Write(zb.Bytes())
					return
				}
				w.Write(body)
			}))
			for _, enc := range []string{"identity", "gzip"} {
				b.Run(name+"/poll-"+enc, func(b *testing.B) {
					c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
					for b.Loop() {
						req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
						req.Header.Set("Accept-Encoding", enc)
						resp, err := c.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
			srv.Close()
			b.Run(name+"/decode", func(b *testing.B) {
				for b.Loop() {
					var v any
					if err := json.Unmarshal(body, &v); err != nil {
						b.Fatal(err)
					}
				}
			})
			if mode == "inline" {
				// What Traefik then does with each certificate of a changed body (pkg/tls
				// builds its store with tls.X509KeyPair).
				b.Run(name+"/x509keypair", func(b *testing.B) {
					for b.Loop() {
						for _, c := range certs.Certificates {
							if _, err := tls.X509KeyPair([]byte(c.CertFile), []byte(c.KeyFile)); err != nil {
								b.Fatal(err)
							}
						}
					}
				})
			}
		}
	}
}
