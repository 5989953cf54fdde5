package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store/dir"
)

// Issue 25 item 1: the admin token reads no private key. With fleet certificates
// delivered inline the Traefik configuration carries every key PEM, so the admin token
// is refused on it (403, naming the ingress token and the keyless routing document)
// whether or not a certificate has arrived yet; the ingress token reads it, and the
// admin still reads the routing document. With delivery "files" the body carries paths,
// and the admin reads it.
func TestAdminTokenNeverReadsABodyWithPrivateKeys(t *testing.T) {
	t.Parallel()
	for _, delivery := range []string{node.DeliveryInline, node.DeliveryFiles} {
		t.Run(delivery, func(t *testing.T) {
			storeDir := t.TempDir()
			cfg := testnode.Config(t, "vps-a", storeDir)
			cfg.ACME.Enabled = true
			cfg.ACME.CAServer = "https://127.0.0.1:1/dir" // nothing listens there
			cfg.ACME.Delivery = delivery
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			st, err := dir.New(storeDir)
			if err != nil {
				t.Fatal(err)
			}
			testnode.SeedFleet(t, st, "shop")
			n := testnode.StartWithStore(t, cfg, st)
			n.WaitReady()
			resp, b := n.Get("/v1/ingress/traefik", testnode.AdminToken)
			if delivery == node.DeliveryInline {
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "ingress token") || !strings.Contains(string(b), "/v1/ingress/routes") {
					t.Errorf("admin GET /v1/ingress/traefik with inline keys: %d %s, want 403 naming the ingress token", resp.StatusCode, b)
				}
				if strings.Contains(string(b), "PRIVATE KEY") {
					t.Errorf("the refusal carries key material: %s", b)
				}
			} else if resp.StatusCode != http.StatusOK {
				t.Errorf("admin GET /v1/ingress/traefik with files delivery: %d %s, want 200", resp.StatusCode, b)
			}
			if resp, b := n.Get("/v1/ingress/traefik", testnode.IngressToken); resp.StatusCode != http.StatusOK {
				t.Errorf("ingress GET /v1/ingress/traefik: %d %s", resp.StatusCode, b)
			}
			if resp, b := n.Get("/v1/ingress/routes", testnode.AdminToken); resp.StatusCode != http.StatusOK {
				t.Errorf("admin GET /v1/ingress/routes: %d %s", resp.StatusCode, b)
			}
		})
	}
}

// Issue 25 items 1 and 7: a report is recorded only for a valid poll of an ingress.
// The admin token's polls are not reports (it is not an ingress); a poll answered 404
// (unknown format, unknown group) or 400 (a malformed wait, prefer or query) records
// nothing, so made-up groups cost nothing later; the same report on a valid poll is
// recorded, and only it is listed.
func TestOnlyValidIngressPollsAreRecordedAsReports(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	for _, tc := range []struct {
		what, path, token string
		code              int
	}{
		{"the admin token's poll", "/v1/ingress/traefik", testnode.AdminToken, 200},
		{"an unknown format", "/v1/ingress/nginx", testnode.IngressToken, 404},
		{"an unknown group", "/v1/ingress/traefik?group=made-up", testnode.IngressToken, 404},
		{"a malformed group", "/v1/ingress/traefik?group=Bad_Group", testnode.IngressToken, 400},
		{"a malformed wait", "/v1/ingress/traefik?wait=soon", testnode.IngressToken, 400},
		{"a malformed prefer", "/v1/ingress/traefik?prefer=Not_A_Node", testnode.IngressToken, 400},
		{"an unparsable query", "/v1/ingress/traefik?a=%zz", testnode.IngressToken, 400},
	} {
		resp, b := n.Get(tc.path, tc.token, api.HeaderIngress, "edge-fake", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, "1")
		if resp.StatusCode != tc.code {
			t.Fatalf("%s: %d %s, want %d", tc.what, resp.StatusCode, b, tc.code)
		}
		if h := resp.Header.Get(api.HeaderIngressReport); h != "" {
			t.Errorf("%s: %s: %q, want no report", tc.what, api.HeaderIngressReport, h)
		}
	}
	if ins := statusIngresses(t, n); len(ins) != 0 {
		t.Fatalf("after invalid and admin polls, status lists %+v, want no ingress", ins)
	}
	resp, b := n.Get("/v1/ingress/traefik", testnode.IngressToken, api.HeaderIngress, "edge-real", api.HeaderIngressKind, api.KindPlugin)
	if resp.StatusCode != 200 || resp.Header.Get(api.HeaderIngressReport) != "recorded" {
		t.Fatalf("a valid poll: %d %q %s", resp.StatusCode, resp.Header.Get(api.HeaderIngressReport), b)
	}
	nodetest.WaitFor(t, 5*time.Second, "edge-real listed", func() bool {
		ins := statusIngresses(t, n)
		return len(ins) == 1 && ins[0].Name == "edge-real"
	})
}

func statusIngresses(t *testing.T, n *testnode.Node) []api.Ingress {
	t.Helper()
	resp, b := n.Get("/v1/status", testnode.AdminToken)
	var st api.Status
	if err := json.Unmarshal(b, &st); resp.StatusCode != 200 || err != nil {
		t.Fatalf("status: %d %v %s", resp.StatusCode, err, b)
	}
	return st.Ingresses
}
