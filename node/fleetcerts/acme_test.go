package fleetcerts_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

func acmeStatus(t *testing.T, n *testnode.Node) map[string]api.CertName {
	t.Helper()
	resp, b := n.Get("/v1/status", testnode.IngressToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: %d %s", resp.StatusCode, b)
	}
	// Decoded as the manager's own type: the wire (api.CertName) has its shape.
	var body struct {
		Certificates *struct {
			Names []api.CertName `json:"names"`
		} `json:"certificates"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	out := map[string]api.CertName{}
	if body.Certificates != nil {
		for _, c := range body.Certificates.Names {
			out[c.Name] = c
		}
	}
	return out
}

// shopOverACME is a node's configuration with acme.enabled, then set's changes, validated,
// and its directory store holding the fleet testnode.SeedFleet writes for shop.
func shopOverACME(t *testing.T, set func(cfg *node.Config)) (*node.Config, store.Store) {
	t.Helper()
	storeDir := t.TempDir()
	cfg := testnode.Config(t, "vps-a", storeDir)
	cfg.ACME.Enabled = true
	set(cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, err := dir.New(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	testnode.SeedFleet(t, st, "shop")
	return cfg, st
}

// withPebble points cfg's ACME at p, validating on the node's own listener ln.
func withPebble(cfg *node.Config, p *pebbletest.Pebble, ln net.Listener) {
	cfg.Listen = ln.Addr().String()
	cfg.ACME.CAServer = p.Directory
	cfg.ACME.CARoots = p.CARootsFile
	cfg.ACME.Email = "ops@example.com"
	cfg.ACME.RenewCheckInterval = ptypes.Duration(time.Minute)
}

// TestACMEPrivateKeysOnlyInTheRenderedConfiguration: one node issues through real Pebble
// (validation on; the name resolves to the node's own listener, which answers the
// challenge). The private key is in the rendered Traefik configuration (the positive
// control: it is what Traefik needs) and nowhere else an operator or a tenant reads:
// not in /v1/status, /v1/ingress/routes, the metrics, the node's log (at debug), or
// the audit rows.
func TestACMEPrivateKeysOnlyInTheRenderedConfiguration(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := pebbletest.Start(t, pebbletest.Config{HTTPPort: ln.Addr().(*net.TCPAddr).Port})
	cfg, st := shopOverACME(t, func(cfg *node.Config) { withPebble(cfg, p, ln) })
	n := testnode.StartOn(t, cfg, st, ln)
	n.WaitReady()
	// An audited write (an application) so audit rows exist.
	req, _ := http.NewRequest(http.MethodPut, n.URL+"/v1/apps/blog", strings.NewReader(`{"name":"blog","account":"acme","placement":["vps-b"]}`))
	req.Header.Set("Authorization", "Bearer "+testnode.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT app: %d", resp.StatusCode)
	}
	names := []string{"apps.example.com", "blog.apps.example.com", "shop.apps.example.com"}
	nodetest.WaitFor(t, 60*time.Second, "every name valid", func() bool {
		s := acmeStatus(t, n)
		for _, name := range names {
			if s[name].State != fleetcerts.StateValid {
				return false
			}
		}
		return true
	})

	// The status says valid as the certificates land in the store; the document holds
	// them from the next pass on.
	var rendered []byte
	var out struct {
		TLS struct {
			Certificates []struct{ CertFile, KeyFile string } `json:"certificates"`
		} `json:"tls"`
	}
	nodetest.WaitFor(t, 30*time.Second, "every certificate rendered", func() bool {
		_, rendered = n.Get("/v1/ingress/traefik", testnode.IngressToken)
		out.TLS.Certificates = nil
		if err := json.Unmarshal(rendered, &out); err != nil {
			t.Fatal(err)
		}
		return len(out.TLS.Certificates) == len(names)
	})
	// Positive control and the needles: each key's PEM body lines.
	var needles []string
	for _, c := range out.TLS.Certificates {
		if _, err := tls.X509KeyPair([]byte(c.CertFile), []byte(c.KeyFile)); err != nil {
			t.Fatalf("rendered pair does not load as Traefik loads it: %v", err)
		}
		blk, _ := pem.Decode([]byte(c.KeyFile))
		if blk == nil {
			t.Fatalf("key not PEM: %q", c.KeyFile)
		}
		lines := strings.Split(strings.TrimSpace(c.KeyFile), "\n")
		needles = append(needles, lines[1:len(lines)-1]...)
	}
	needles = append(needles, "PRIVATE KEY")

	haystacks := map[string]string{}
	_, b := n.Get("/v1/status", testnode.IngressToken)
	haystacks["/v1/status"] = string(b)
	_, b = n.Get("/v1/ingress/routes", testnode.IngressToken)
	haystacks["/v1/ingress/routes"] = string(b)
	_, b = n.Get("/metrics", "")
	haystacks["/metrics"] = string(b)
	// The node registers the manager's metrics (RegisterMetrics: the collectors are
	// fleetcerts' TestAFailingNameAndACorruptStoredOneAreFailedWithoutACertificate's).
	if want := `scafo_certificate_state{name="shop.apps.example.com",state="valid"} 1`; !strings.Contains(string(b), want) {
		t.Errorf("metrics lack %s:\n%s", want, testnode.GrepLines(string(b), "scafo_certificate"))
	}
	haystacks["log"] = n.Logs.String()
	entries, err := st.List(context.Background(), "audit/")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("no audit rows to check")
	}
	var audit bytes.Buffer
	for _, e := range entries {
		o, err := st.Get(context.Background(), e.Key)
		if err != nil {
			t.Fatal(err)
		}
		audit.Write(o.Value)
	}
	haystacks["audit rows"] = audit.String()
	for where, hay := range haystacks {
		for _, needle := range needles {
			if strings.Contains(hay, needle) {
				t.Errorf("%s contains key material (%q)", where, needle)
			}
		}
	}
	// And the challenge route answered from the node's own listener, anonymously.
	if !strings.Contains(n.Logs.String(), "served key authentication") {
		t.Error("the node's log shows no challenge answered")
	}
}
