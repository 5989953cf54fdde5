package scafo

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
)

// pebbleIssuer points the adapted configuration's ACME issuer at Pebble: Pebble's own
// HTTPS listener as the CA (the shipped file reads ACME_CA) and trusted, and HTTP-01 only (Pebble validates TLS-ALPN-01 on a port of
// its own, not Caddy's). Everything else stays as shipped.
func pebbleIssuer(t *testing.T, p *pebbletest.Pebble) func(map[string]any) {
	return func(m map[string]any) {
		policies := m["apps"].(map[string]any)["tls"].(map[string]any)["automation"].(map[string]any)["policies"].([]any)
		n := 0
		for _, pol := range policies {
			for _, iss := range pol.(map[string]any)["issuers"].([]any) {
				im := iss.(map[string]any)
				if im["module"] != "acme" {
					continue
				}
				im["ca"] = p.Directory
				im["trusted_roots_pem_files"] = []string{p.CARootsFile}
				ch := im["challenges"].(map[string]any)
				ch["tls-alpn"] = map[string]any{"disabled": true}
				n++
			}
		}
		if n == 0 {
			t.Fatal("the shipped Caddyfile has no ACME issuer")
		}
	}
}

// tlsHandshake makes a TLS connection to addr for name, verified against roots (the
// handshake waits for an order: 90 s).
func tlsHandshake(addr, name string, roots *x509.CertPool) (*tls.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: &tls.Config{ServerName: name, RootCAs: roots}}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return conn.(*tls.Conn), nil
}

// On-demand TLS through the shipped Caddyfile against Pebble with validation on: a name
// the document names gets a certificate at its first handshake (HTTP-01, answered by
// this Caddy), stored in the fleet store through the node and served for the route; a
// name only a wildcard covers, or not in the document at all, gets none: the handshake
// fails and no order is placed. The ACME account stays on the ingress's disk.
// Restarted with the node down, the Caddy routes from its saved document and serves the
// certificate it held.
func TestOnDemandTLSObtainsOnlyDocumentNamesFromPebble(t *testing.T) {
	f := startRoutingFleet(t)
	httpPort := freePort(t)
	peb := pebbletest.Start(t, pebbletest.Config{HTTPPort: httpPort})
	home := t.TempDir()
	c := startShippedCaddyOn(t, f.node.url, httpPort, home, pebbleIssuer(t, peb))
	waitTable(t, activePoller(t), "the node's revision", func(tab *Table) bool { return tab.Doc.Revision == f.doc.Revision })
	roots := peb.IssuerRoot(t)

	handshake := func(name string) (*tls.Conn, error) { return tlsHandshake(c.httpsAddr, name, roots) }

	for _, name := range []string{"a.shop.example.org", "nope.example.com"} {
		if conn, err := handshake(name); err == nil {
			conn.Close()
			t.Fatalf("%s: the handshake succeeded; the document does not name it exactly", name)
		}
	}
	if n := len(peb.Issued()); n != 0 {
		t.Fatalf("Pebble issued %d certificates for names the document does not name", n)
	}

	conn, err := handshake("go.tito.io")
	if err != nil {
		t.Fatalf("go.tito.io: %v\nPebble: %s", err, peb.Log())
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if !slices.Equal(leaf.DNSNames, []string{"go.tito.io"}) {
		t.Fatalf("certificate names %q, want exactly go.tito.io", leaf.DNSNames)
	}
	if n := len(peb.Issued()); n != 1 {
		t.Fatalf("Pebble issued %d certificates, want 1", n)
	}

	// The route answers over HTTPS with it.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, c.httpsAddr)
		},
	}}
	resp, err := hc.Get("https://go.tito.io/over-tls")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "tito-go" {
		t.Fatalf("https://go.tito.io: %d from %q (%s)", resp.StatusCode, resp.Header.Get("X-Upstream"), body)
	}

	// The fleet store holds the certificate; the account is not there.
	nc := nodeClient(t, f.node)
	keys, err := nc.List(t.Context(), "certificates", true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, "/go.tito.io/go.tito.io.crt") }) {
		t.Fatalf("the fleet store's certificates: %q, want go.tito.io's", keys)
	}
	if nc.Exists(t.Context(), "acme") {
		t.Fatal("the ACME account reached the fleet store")
	}

	// That Caddy restarted while its node is down (its memory empty): it routes from the
	// document it saved and serves the certificate it held (its storage cache), with no
	// node answering. (Another Caddy of the fleet loading the certificate through the
	// node, with no second order: TestOnDemandTLSBudgetHoldsBackOnlyNamesWithNoCertificate.)
	held := activePoller(t).Table()
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	f.node.stop()
	c3 := startShippedCaddyOn(t, f.node.url, httpPort, home, pebbleIssuer(t, peb))
	if tab := activePoller(t).Table(); tab == nil || tab.Doc.Revision != held.Doc.Revision {
		t.Fatalf("restarted with the node down: held document %+v, want revision %s from the state file", tab, held.Doc.Revision)
	}
	c.httpsAddr = c3.httpsAddr
	hc.CloseIdleConnections() // they were to the Caddy before the restart
	resp, err = hc.Get("https://go.tito.io/node-down")
	if err != nil {
		t.Fatalf("restarted with the node down: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "tito-go" || resp.TLS.PeerCertificates[0].SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Fatalf("restarted with the node down: %d from %q", resp.StatusCode, resp.Header.Get("X-Upstream"))
	}
}
