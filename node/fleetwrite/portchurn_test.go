package fleetwrite_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/fleetwrite"
)

// TestATenantCannotQuarantineEveryPortByMovingItsInstance: every move of an instance to
// another port quarantines the port it left (ports.quarantine, 10 minutes), and an
// application token may name any free port of the range. Before the fix a tenant that
// walked its instance across the range (writes.rate 5/s: 3 000 ports per token within one
// quarantine) left no port for anyone else: another account's POST got 503 "no free
// port" on that node. The moves a tenant's incarnation may leave quarantined are now
// bounded (409 past the bound); moving back to a port it left stays allowed.
func TestATenantCannotQuarantineEveryPortByMovingItsInstance(t *testing.T) {
	t.Parallel()
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Ports.Min, cfg.Ports.Max = 24000, 24000+3*fleetwrite.MaxQuarantinedPorts
	cfg.Writes.Rate, cfg.Writes.Burst = 1000, 1000
	n := testnode.Start(t, cfg)
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/evil", testnode.AdminToken, `{"account":"mallory","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	_, evilTok := testnode.IssueToken(t, n, "mallory", "evil", `"instance"`)
	var first struct{ Port int }
	json.Unmarshal(n.Must(201, "POST", "/v1/node/instances/evil", evilTok, `{}`), &first)

	refused := 0
	for p := cfg.Ports.Min; p <= cfg.Ports.Max; p++ {
		if p == first.Port {
			continue
		}
		// Forced: nothing listens on these ports, and a tenant may force its own moves
		// (the check that the new port serves is no bound on churn).
		resp, b := n.Do("PUT", "/v1/node/instances/evil?force=true", evilTok, fmt.Sprintf(`{"port":%d,"ready":true}`, p))
		switch {
		case resp.StatusCode == 200:
		case resp.StatusCode == 409 && strings.Contains(string(b), "quarantine"):
			refused++
		default:
			t.Fatalf("moving evil to port %d: %d %s", p, resp.StatusCode, b)
		}
	}
	if refused == 0 {
		t.Errorf("a tenant moved its instance across all %d ports of the range, each move quarantining the port it left", cfg.Ports.Max-cfg.Ports.Min+1)
	}
	// Releasing the instance and setting it on a new port is a move too.
	free := 0
	for p := cfg.Ports.Min; p <= cfg.Ports.Max; p++ {
		n.Must(200, "DELETE", "/v1/node/instances/evil", evilTok, "")
		resp, b := n.Do("PUT", "/v1/node/instances/evil", evilTok, fmt.Sprintf(`{"port":%d,"ready":true}`, p))
		switch {
		case resp.StatusCode == 200:
		case resp.StatusCode == 409:
			free++
			if _, b := n.Do("PUT", "/v1/node/instances/evil", evilTok, fmt.Sprintf(`{"port":%d,"ready":true}`, first.Port)); !strings.Contains(string(b), `"port"`) {
				t.Fatalf("back to port %d after a release: %s", first.Port, b)
			}
		default:
			t.Fatalf("release, then port %d: %d %s", p, resp.StatusCode, b)
		}
	}
	if free == 0 {
		t.Error("a tenant quarantined every port of the range by releasing its instance and setting it on the next port")
	}
	// Another account still gets a port on this node.
	resp, b := n.Do("POST", "/v1/node/instances/shop", testnode.AdminToken, `{}`)
	if resp.StatusCode != 201 {
		t.Fatalf("another account's instance after the tenant's moves: %d %s, want 201 (a port)", resp.StatusCode, b)
	}
	// Moving back to a port it left (blue/green between two ports) is not a new
	// quarantine, and stays allowed.
	n.Must(200, "PUT", "/v1/node/instances/evil", evilTok, fmt.Sprintf(`{"port":%d,"ready":true}`, first.Port))
}
