package fleetcerts_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/node/rfc2136/bindtest"
)

// TestACMEDNS01PlatformWildcardIsRenderedForTheCoveredHosts: a node with
// --acme.dns01.platform on a real BIND (the key from SCAFO_ACME_DNS01_RFC2136_TSIGSECRET's
// way in: the config) and a Pebble validating against it issues *.apps.example.com and
// the apex by DNS-01; the rendered Traefik configuration carries the wildcard in
// tls.certificates, the platform hosts' routers take it (tls {} without a resolver)
// and no certificate of their own, and the pair loads as Traefik loads it and
// verifies for the platform host. The TSIG secret is in no status, metrics, routing
// document, rendered configuration or log line.
func TestACMEDNS01PlatformWildcardIsRenderedForTheCoveredHosts(t *testing.T) {
	t.Parallel()
	b := bindtest.Start(t, bindtest.Config{Zones: []string{"example.com"}, Resolver: true})
	p := pebbletest.Start(t, pebbletest.Config{DNSServer: b.Addr})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, st := shopOverACME(t, func(cfg *node.Config) {
		withPebble(cfg, p, ln)
		cfg.ACME.DNS01.Platform = true
		cfg.ACME.DNS01.Resolvers = []string{b.Addr}
		cfg.ACME.DNS01.PropagationTimeout = ptypes.Duration(30 * time.Second)
		cfg.ACME.DNS01.RFC2136 = node.RFC2136Config{Server: b.Addr, Zones: []string{"example.com"}, KeyName: b.Key.Name, TSIGSecret: b.Key.Secret}
	})
	n := testnode.StartOn(t, cfg, st, ln)
	n.WaitReady()
	const wild, apex, host = "*.apps.example.com", "apps.example.com", "shop.apps.example.com"
	nodetest.WaitFor(t, 90*time.Second, "the wildcard and the apex valid", func() bool {
		s := acmeStatus(t, n)
		return s[wild].State == fleetcerts.StateValid && s[apex].State == fleetcerts.StateValid
	})
	s := acmeStatus(t, n)
	if _, listed := s[host]; listed || s[wild].Challenge != "dns-01" || s[apex].Challenge != "dns-01" {
		t.Fatalf("status %+v: the covered host is not a name of its own, both by dns-01", s)
	}
	if n := len(p.Issued()); n != 2 {
		t.Fatalf("Pebble issued %d, want 2", n)
	}

	_, rendered := n.Get("/v1/ingress/traefik", testnode.IngressToken)
	var out struct {
		HTTP struct {
			Routers map[string]struct {
				Rule string `json:"rule"`
				TLS  *struct {
					CertResolver string `json:"certResolver"`
				} `json:"tls"`
			} `json:"routers"`
		} `json:"http"`
		TLS struct {
			Certificates []struct{ CertFile, KeyFile string } `json:"certificates"`
		} `json:"tls"`
	}
	if err := json.Unmarshal(rendered, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.TLS.Certificates) != 2 {
		t.Fatalf("%d certificates rendered, want 2 (the wildcard and the apex)", len(out.TLS.Certificates))
	}
	found := false
	for _, c := range out.TLS.Certificates {
		pair, err := tls.X509KeyPair([]byte(c.CertFile), []byte(c.KeyFile))
		if err != nil {
			t.Fatalf("rendered pair does not load: %v", err)
		}
		leaf, _ := x509.ParseCertificate(pair.Certificate[0])
		if len(leaf.DNSNames) == 1 && leaf.DNSNames[0] == wild {
			inter := x509.NewCertPool()
			for _, der := range pair.Certificate[1:] {
				c, _ := x509.ParseCertificate(der)
				inter.AddCert(c)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: p.IssuerRoot(t), Intermediates: inter}); err != nil {
				t.Fatalf("the wildcard does not verify for %s: %v", host, err)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no wildcard certificate rendered")
	}
	hostRouters := 0
	for name, r := range out.HTTP.Routers {
		if strings.Contains(r.Rule, "`"+host+"`") {
			hostRouters++
			if r.TLS == nil || r.TLS.CertResolver != "" {
				t.Fatalf("router %s of %s: tls %+v, want {} (the fleet's wildcard)", name, host, r.TLS)
			}
		}
	}
	if hostRouters == 0 {
		t.Fatalf("no router for %s", host)
	}

	haystacks := map[string]string{"rendered": string(rendered), "log": n.Logs.String()}
	for _, path := range []string{"/v1/status", "/v1/ingress/routes", "/metrics"} {
		resp, body := n.Get(path, testnode.IngressToken)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		haystacks[path] = string(body)
	}
	for where, hay := range haystacks {
		if strings.Contains(hay, b.Key.Secret) {
			t.Errorf("%s carries the TSIG secret", where)
		}
	}
	if !strings.Contains(haystacks["/metrics"], `scafo_certificate_state{name="*.apps.example.com",state="valid"} 1`) {
		t.Errorf("metrics do not list the wildcard valid")
	}
	// The whole node registers the renewal series beside the state (RegisterMetrics).
	if !strings.Contains(haystacks["/metrics"], `scafo_certificate_renewal_failing{name="*.apps.example.com"} 0`) {
		t.Errorf("metrics do not say the wildcard's renewal is not failing:\n%s", testnode.GrepLines(haystacks["/metrics"], "scafo_certificate"))
	}
}
