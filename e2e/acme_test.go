package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
)

// Fleet certificates (DESIGN §10) against a real ACME server: Pebble with validation
// on, pebble-challtestsrv as its DNS. Every Traefik runs the shipped configuration on
// its own loopback address with the same ports (Pebble validates HTTP-01 on one port,
// at whatever address DNS gives), with the HTTPS redirection on web turned on, as an
// operator serving HTTPS would.

const acmePlatform = "apps.example.com"

// acmeTraefik is one Traefik of a fleet-certificate test.
type acmeTraefik struct {
	*traefik
	ip string
}

// startACMETraefik starts Traefik on the shipped configuration, polling n with
// ?prefer=self, web and websecure on ip:web and ip:websecure, web redirecting to
// websecure.
func startACMETraefik(t *testing.T, name, ip string, web, websecure int, n *node) *acmeTraefik {
	t.Helper()
	api := freePort(t, "127.0.0.1")
	cfgBytes, err := staticConfig(renderShipped(t, testIngressToken), overrides{
		ports:        traefikPorts{web: web, websecure: websecure, api: api},
		endpointHost: hostPort(n.ip, n.port),
	})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(cfgBytes, &cfg); err != nil {
		t.Fatal(err)
	}
	eps := cfg["entryPoints"].(map[string]any)
	webEP := eps["web"].(map[string]any)
	webEP["address"] = hostPort(ip, web)
	eps["websecure"].(map[string]any)["address"] = hostPort(ip, websecure)
	if webEP["allowACMEByPass"] != true {
		t.Fatalf("the shipped web entry point lacks allowACMEByPass: true")
	}
	// The shipped file's commented-out redirection, turned on.
	webEP["http"].(map[string]any)["redirections"] = map[string]any{
		"entryPoint": map[string]any{"to": "websecure", "scheme": "https"},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "traefik.yml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	tr := &traefik{
		name:  name,
		ports: traefikPorts{web: web, websecure: websecure, api: api},
		proc:  newProc(t, name, bins.traefik, []string{"--configFile=" + file}, nil),
		http: &http.Client{Timeout: 5 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
	tr.proc.MustStart(t)
	if err := tr.proc.WaitUntil(20*time.Second, func() error { _, err := tr.rawData(); return err }); err != nil {
		t.Fatalf("waiting for %s API: %v", name, err)
	}
	return &acmeTraefik{traefik: tr, ip: ip}
}

// commonFreePort is a port free on every one of ips right now.
func commonFreePort(t *testing.T, ips ...string) int {
	t.Helper()
	for range 50 {
		p := freePort(t, ips[0])
		ok := true
		for _, ip := range ips[1:] {
			ln, err := net.Listen("tcp", hostPort(ip, p))
			if err != nil {
				ok = false
				break
			}
			ln.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatalf("no port free on all of %v", ips)
	return 0
}

// certStatus is one name of /v1/status's certificates section.
type certStatus struct {
	Name         string `json:"name"`
	State        string `json:"state"`
	Serial       string `json:"serial"`
	LastError    string `json:"lastError"`
	ObtainedHere bool   `json:"obtainedHere"`
}

func (n *node) certs(t *testing.T) map[string]certStatus {
	t.Helper()
	var body struct {
		Certificates *struct {
			Names []certStatus `json:"names"`
		} `json:"certificates"`
	}
	n.call(t, http.MethodGet, "/v1/status", nil, &body)
	out := map[string]certStatus{}
	if body.Certificates != nil {
		for _, c := range body.Certificates.Names {
			out[c.Name] = c
		}
	}
	return out
}

// handshake connects to addr with SNI name, verifies the chain against roots and
// returns the leaf's serial (hex).
func handshake(addr, name string, roots *x509.CertPool) (string, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return strings.ToLower(conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)), nil
}

// TestFleetCertificatesOneNameIssuedOnceAndServedByEveryTraefik is the smallest
// end-to-end proof: two nodes on one store, two Traefiks (one per node, prefer=self) on
// 127.0.0.11 and 127.0.0.12. The name shop.apps.example.com resolves to Traefik 2;
// node 1 issues it (node 2's platform budget is 0, so it only loads), so Pebble's
// validation lands on a Traefik whose node did not start the order, goes through the
// challenge router (past the HTTPS redirection) to node 2, which answers from the
// store. Then: one certificate issued per name, both Traefiks serve the same serial
// over a real TLS handshake verified against Pebble's root, and a name removed from
// the document leaves the render.
func TestFleetCertificatesOneNameIssuedOnceAndServedByEveryTraefik(t *testing.T) {
	requireBinaries(t)
	ips := []string{"127.0.0.11", "127.0.0.12"}
	web, websecure := commonFreePort(t, ips...), commonFreePort(t, ips...)
	p := pebbletest.Start(t, pebbletest.Config{HTTPPort: web})
	const name = "shop." + acmePlatform
	p.AddA(t, name, ips[1])         // validation lands on Traefik 2
	p.AddA(t, acmePlatform, ips[0]) // the API apex (also fleet-issued), on Traefik 1

	f := startFleet(t, 2, nodeOptions{
		args: []string{
			"--platform.domains=" + acmePlatform,
			"--traefik.entryPoints=websecure",
			"--acme.enabled", "--acme.caServer=" + p.Directory, "--acme.caRoots=" + p.CARootsFile,
			"--acme.email=ops@example.com",
		},
		each: func(i int) []string {
			return []string{"--acme.platformBudget=" + strconv.Itoa(1-i)} // node 1: 1, node 2: 0
		},
	})
	trs := []*acmeTraefik{
		startACMETraefik(t, "traefik-1", ips[0], web, websecure, f.nodes[0]),
		startACMETraefik(t, "traefik-2", ips[1], web, websecure, f.nodes[1]),
	}
	f.deploy(t, "shop", "acme", f.nodes, "/healthz")

	// Both nodes hold a valid certificate for both names, with one serial per name.
	names := []string{acmePlatform, name}
	waitFor(t, "every node holds a valid certificate for every name", 90*time.Second, func() error {
		for _, n := range f.nodes {
			cs := n.certs(t)
			for _, nm := range names {
				if c := cs[nm]; c.State != "valid" {
					return fmt.Errorf("%s %s: %+v", n.name, nm, c)
				}
			}
		}
		return nil
	})
	logIssuance(t, f)
	c1, c2 := f.nodes[0].certs(t), f.nodes[1].certs(t)
	for _, nm := range names {
		if c1[nm].Serial != c2[nm].Serial {
			t.Fatalf("%s: node serials differ: %s vs %s", nm, c1[nm].Serial, c2[nm].Serial)
		}
	}
	if !c1[name].ObtainedHere || c2[name].ObtainedHere {
		t.Fatalf("%s: want it obtained by n1 only: n1 %+v, n2 %+v", name, c1[name], c2[name])
	}
	// Issued once per name: Pebble issued exactly as many certificates as names.
	if issued := p.Issued(); len(issued) != len(names) {
		t.Fatalf("Pebble issued %d certificates %v for %d names", len(issued), issued, len(names))
	}
	// The validation went through Traefik 2 to node 2, which answered from the store
	// (CertMagic's distributed solver: the challenge was not in its memory).
	if got := countLines(f.nodes[1].proc.Output(), "served key authentication", name, "distributed=true"); got == 0 {
		t.Fatalf("node 2 did not answer %s's challenge from the store; its log:\n%s", name, f.nodes[1].proc.Tail(40))
	}
	if got := countLines(f.nodes[0].proc.Output(), "served key authentication", name); got != 0 {
		t.Fatalf("node 1 answered %s's challenge %d times: the validation did not land on Traefik 2", name, got)
	}

	// Every Traefik serves the same certificate over a real handshake, verified against
	// Pebble's root.
	roots := p.IssuerRoot(t)
	for _, nm := range names {
		for _, tr := range trs {
			addr := hostPort(tr.ip, websecure)
			var serial string
			waitFor(t, tr.name+" serves the fleet certificate for "+nm, 30*time.Second, func() error {
				s, err := handshake(addr, nm, roots)
				serial = s
				return err
			})
			if serial != c1[nm].Serial {
				t.Fatalf("%s serves serial %s for %s, the fleet holds %s", tr.name, serial, nm, c1[nm].Serial)
			}
		}
	}
	// Removing the application takes its name out of the document: it leaves the
	// render (no certificate, no router) on every node.
	f.nodes[0].call(t, http.MethodDelete, "/v1/apps/shop", nil, nil)
	for _, n := range f.nodes {
		waitFor(t, n.name+" renders no certificate for "+name, 30*time.Second, func() error {
			body := n.ingress(t, "", "identity").body
			var cfg struct {
				TLS struct {
					Certificates []struct {
						CertFile string `json:"certFile"`
					} `json:"certificates"`
				} `json:"tls"`
			}
			if err := json.Unmarshal(body, &cfg); err != nil {
				return err
			}
			if len(cfg.TLS.Certificates) != 1 {
				return fmt.Errorf("%d certificates rendered, want 1 (the apex)", len(cfg.TLS.Certificates))
			}
			if strings.Contains(string(body), "shop_apps_example_com") {
				return fmt.Errorf("a router of %s is still rendered", name)
			}
			return nil
		})
		if _, ok := n.certs(t)[name]; ok {
			t.Fatalf("%s still lists %s", n.name, name)
		}
	}
}

// logIssuance logs the issuance lines of every node (for -v runs).
func logIssuance(t *testing.T, f *fleet) {
	for _, n := range f.nodes {
		for _, line := range strings.Split(n.proc.Output(), "\n") {
			for _, k := range []string{"obtain", "will retry", "served key", "could not get certificate", "lock acquired"} {
				if strings.Contains(line, k) {
					t.Logf("%s: %s", n.name, line)
					break
				}
			}
		}
	}
}
