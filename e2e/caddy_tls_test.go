package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/node/storageclient"
)

// startCaddyForPebble runs Caddy as a process on the shipped Caddyfile adapted to JSON
// by `caddy adapt` with this Caddy's environment, with its ACME issuer pointed at
// Pebble and trusting Pebble's listener, and TLS-ALPN-01 off (Pebble validates it on a
// port of its own, not this Caddy's): the same three changes the in-process Pebble test
// makes (deploy/caddy/scafo/tls_test.go). endpoints are the nodes in this Caddy's
// order. It waits until Caddy routes host to want over plain HTTP. edits change the
// adapted JSON further (the websecure port is the traefik's ports.websecure).
func startCaddyForPebble(t *testing.T, name string, web int, endpoints []*node, peb *pebbletest.Pebble, host, want string, edits ...func(cfg map[string]any, websecure int)) *traefik {
	t.Helper()
	requireBinaries(t)
	bin := caddyBinary(t)
	var eps []string
	for _, n := range endpoints {
		eps = append(eps, nodeBase(n))
	}
	dir := t.TempDir()
	websecure := freePort(t, "127.0.0.1")
	env := []string{
		"SCAFO_INGRESS_TOKEN=" + testIngressToken,
		"SCAFO_ENDPOINTS=" + strings.Join(eps, " "),
		"CADDY_HTTP_PORT=" + strconv.Itoa(web),
		"CADDY_HTTPS_PORT=" + strconv.Itoa(websecure),
		"ACME_CA=" + peb.Directory,
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HOME=" + dir,
	}
	adapt := exec.Command(bin, "adapt", "--config", filepath.Join(bins.root, "deploy", "caddy", "Caddyfile"), "--adapter", "caddyfile")
	adapt.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	adapt.Stderr = &stderr
	out, err := adapt.Output()
	if err != nil {
		t.Fatalf("%s: caddy adapt: %v\n%s", name, err, stderr.String())
	}
	var cfg map[string]any
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("%s: caddy adapt: %v", name, err)
	}
	issuers := 0
	for _, pol := range cfg["apps"].(map[string]any)["tls"].(map[string]any)["automation"].(map[string]any)["policies"].([]any) {
		for _, iss := range pol.(map[string]any)["issuers"].([]any) {
			im := iss.(map[string]any)
			if im["module"] != "acme" {
				continue
			}
			if im["ca"] != peb.Directory {
				t.Fatalf("%s: the adapted issuer's CA is %v, want ACME_CA's %s", name, im["ca"], peb.Directory)
			}
			im["trusted_roots_pem_files"] = []string{peb.CARootsFile}
			ch, _ := im["challenges"].(map[string]any)
			if ch == nil {
				ch = map[string]any{}
				im["challenges"] = ch
			}
			ch["tls-alpn"] = map[string]any{"disabled": true}
			issuers++
		}
	}
	if issuers == 0 {
		t.Fatalf("%s: the shipped Caddyfile adapts to no ACME issuer", name)
	}
	for _, e := range edits {
		e(cfg, websecure)
	}
	b, _ := json.Marshal(cfg)
	conf := writeConfig(t, dir, "caddy.json", b)
	c := newIngress(t, name, traefikPorts{web: web, websecure: websecure}, bin, []string{"run", "--config", conf}, dir, env)
	p := c.proc
	p.MustStart(t)
	if err := p.WaitUntil(routeTimeout, func() error { return c.servedBy(host, "/", want) }); err != nil {
		t.Fatalf("%s: waiting for %s to reach %s: %v\n%s", name, host, want, err, p.Output())
	}
	return c
}

// Issue 26: two Caddy processes of one fleet at the same time, each beside its own node
// (two nodes over one store), on-demand TLS against Pebble with validation on. The
// first handshake for a name the document names goes to both Caddys at once: the name
// is ordered once (Pebble's order and issuance counts), one Caddy obtains it (under the
// fleet's issuance lock, through its node), the other serves the same serial, loaded
// through its node; Pebble validates HTTP-01 at the first Caddy's port whichever Caddy
// ordered (the challenge is in the fleet store: CertMagic's distributed solving). The
// node's store holds the certificate served. A name the document does not name fails
// the handshake on both, and no order is placed for it.
func TestTwoCaddysAtOnceOrderANameOnce(t *testing.T) {
	f := startFleet(t, 2, nodeOptions{args: ownPorts()})
	n1, n2 := f.nodes[0], f.nodes[1]
	f.deploy(t, "site", "acme", []*node{n1, n2}, "/healthz")
	const name = "tls.example.org"
	n1.claim(t, "site", name)
	const second = "tls2.example.org" // ordered by caddy-b alone
	n1.claim(t, "site", second)

	web1 := freePort(t, "127.0.0.1")
	peb := pebbletest.Start(t, pebbletest.Config{HTTPPort: web1}) // unknown names resolve to 127.0.0.1
	a := startCaddyForPebble(t, "caddy-a", web1, []*node{n1, n2}, peb, name, "site@n1")
	b := startCaddyForPebble(t, "caddy-b", freePort(t, "127.0.0.1"), []*node{n2, n1}, peb, name, "site@n2")
	roots := peb.IssuerRoot(t)

	leaf := func(c *traefik, server string) (*x509.Certificate, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second) // the handshake waits for the order
		defer cancel()
		conn, err := (&tls.Dialer{NetDialer: &net.Dialer{}, Config: &tls.Config{ServerName: server, RootCAs: roots}}).
			DialContext(ctx, "tcp", hostPort("127.0.0.1", c.ports.websecure))
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
	}

	// Not in the document: refused by both, no order.
	for _, c := range []*traefik{a, b} {
		if _, err := leaf(c, "nope.example.org"); err == nil {
			t.Fatalf("%s: a handshake for a name the document does not name succeeded", c.name)
		}
	}
	if n := peb.Orders(); n != 0 {
		t.Fatalf("Pebble has %d orders for names the document does not name", n)
	}

	// Both Caddys, at once.
	var wg sync.WaitGroup
	leaves := make([]*x509.Certificate, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	for i, c := range []*traefik{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			leaves[i], errs[i] = leaf(c, name)
		}()
	}
	close(start)
	wg.Wait()
	for i, c := range []*traefik{a, b} {
		if errs[i] != nil {
			t.Fatalf("%s: %s: %v\n%s\nPebble:\n%s", c.name, name, errs[i], c.proc.Output(), peb.Log())
		}
		if len(leaves[i].DNSNames) != 1 || leaves[i].DNSNames[0] != name {
			t.Fatalf("%s: certificate for %q, want exactly %s", c.name, leaves[i].DNSNames, name)
		}
	}
	if leaves[0].SerialNumber.Cmp(leaves[1].SerialNumber) != 0 {
		t.Fatalf("caddy-a serves serial %x, caddy-b %x: want one certificate for the fleet", leaves[0].SerialNumber, leaves[1].SerialNumber)
	}
	if o, i := peb.Orders(), len(peb.Issued()); o != 1 || i != 1 {
		t.Fatalf("Pebble: %d orders, %d certificates issued; want the name ordered once\n%s", o, i, peb.Log())
	}
	// One of them obtained it; the other loaded it (through its node).
	obtained := 0
	for _, c := range []*traefik{a, b} {
		if strings.Contains(c.proc.Output(), "certificate obtained successfully") {
			obtained++
			t.Logf("%s obtained the certificate", c.name)
		}
	}
	if obtained != 1 {
		t.Fatalf("%d Caddys logged obtaining the certificate, want 1", obtained)
	}

	// A name only caddy-b is asked for: caddy-b orders it, and Pebble validates HTTP-01
	// at caddy-a's port (the only one it knows), which answers from the fleet store.
	// caddy-a then serves the same serial, loaded through its node.
	bLeaf, err := leaf(b, second)
	if err != nil {
		t.Fatalf("caddy-b: %s: %v\n%s\nPebble:\n%s", second, err, b.proc.Output(), peb.Log())
	}
	aLeaf, err := leaf(a, second)
	if err != nil || aLeaf.SerialNumber.Cmp(bLeaf.SerialNumber) != 0 {
		t.Fatalf("caddy-a: %s: %v; want caddy-b's serial %x", second, err, bLeaf.SerialNumber)
	}
	if o, i := peb.Orders(), len(peb.Issued()); o != 2 || i != 2 {
		t.Fatalf("Pebble: %d orders, %d certificates issued; want 2 and 2 after %s\n%s", o, i, second, peb.Log())
	}
	if !strings.Contains(b.proc.Output(), "certificate obtained successfully") {
		t.Fatalf("caddy-b never logged obtaining %s", second)
	}

	// The fleet's store, read through each node, holds the certificate served.
	for _, n := range []*node{n1, n2} {
		sc, err := storageclient.New(nodeBase(n), testIngressToken, storageclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		keys, err := sc.List(t.Context(), "certificates", true)
		if err != nil {
			t.Fatalf("%s: listing certificates: %v", n.name, err)
		}
		var crt string
		for _, k := range keys {
			if strings.HasSuffix(k, "/"+name+"/"+name+".crt") {
				crt = k
			}
		}
		if crt == "" {
			t.Fatalf("%s: the store's certificates are %q, want %s's", n.name, keys, name)
		}
		pemBytes, err := sc.Load(t.Context(), crt)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(pemBytes)
		if blk == nil {
			t.Fatalf("%s: %s is not PEM", n.name, crt)
		}
		stored, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if stored.SerialNumber.Cmp(leaves[0].SerialNumber) != 0 {
			t.Fatalf("%s: the store holds serial %x, the Caddys serve %x", n.name, stored.SerialNumber, leaves[0].SerialNumber)
		}
		if sc.Exists(t.Context(), "acme") {
			t.Fatalf("%s: an ACME account reached the fleet store", n.name)
		}
	}
}
