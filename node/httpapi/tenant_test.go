package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/store"
)

// routeOf returns the document's route for host (nil when it has none).
func routeOf(t *testing.T, n *testnode.Node, host string) map[string]any {
	t.Helper()
	for _, r := range testnode.RoutesDoc(t, n)["routes"].([]any) {
		if m := r.(map[string]any); m["host"] == host {
			return m
		}
	}
	return nil
}

// TestAWildcardNeverCatchesAnotherAccountsHost (issue 12 item 1): refused at the
// door, and dropped by derivation when it is in the store anyway; the covered host
// fails closed (its own route, no upstreams) when its application is not ready, and
// when its claim object is unreadable.
func TestAWildcardNeverCatchesAnotherAccountsHost(t *testing.T) {
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	n := testnode.Start(t, cfg)
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/bank", testnode.AdminToken, `{"account":"bank","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/evil", testnode.AdminToken, `{"account":"evil","placement":["vps-a"]}`)
	n.Must(200, "PUT", "/v1/node/instances/bank", testnode.AdminToken, `{"port":25001,"ready":true}`)
	n.Must(200, "PUT", "/v1/node/instances/evil", testnode.AdminToken, `{"port":25002,"ready":true}`)
	n.Must(201, "PUT", "/v1/apps/bank/domains/www.bank.example", testnode.AdminToken, "")

	resp, b := n.Do("PUT", "/v1/apps/evil/domains/*.bank.example", testnode.AdminToken, "")
	if resp.StatusCode != 409 || !strings.Contains(string(b), "bank") {
		t.Fatalf("evil's wildcard over bank's name: %d %s, want 409 naming bank", resp.StatusCode, b)
	}
	resp, b = n.Do("PUT", "/v1/apps/evil/domains/*.example.com", testnode.AdminToken, "")
	if resp.StatusCode != 400 {
		t.Fatalf("a wildcard over the platform apex: %d %s, want 400", resp.StatusCode, b)
	}

	// Bank goes unready: its host keeps its own route, with no upstream (a 503).
	n.Must(200, "PUT", "/v1/node/instances/bank", testnode.AdminToken, `{"ready":false}`)
	nodetest.WaitFor(t, 5*time.Second, "bank's host fails closed", func() bool {
		r := routeOf(t, n, "www.bank.example")
		return r != nil && len(r["upstreams"].([]any)) == 0
	})

	// The wildcard written straight into the store: derivation drops it.
	nodetest.PutRaw(t, n.St, "domains/*.bank.example.json", []byte(`{"host":"*.bank.example","account":"evil","app":"evil"}`))
	announceUnnamed(t, n)                                                                                        // an out-of-band write announced without names: a full read
	n.Must(200, "PUT", "/v1/apps/evil", testnode.AdminToken, `{"account":"evil","placement":["vps-a","vps-b"]}`) // moves the serial
	nodetest.WaitFor(t, 5*time.Second, "the covering wildcard reported", func() bool {
		_, b := n.Get("/v1/status", testnode.AdminToken)
		return strings.Contains(string(b), `domains/*.bank.example.json`)
	})
	if r := routeOf(t, n, "*.bank.example"); r != nil {
		t.Fatalf("a wildcard over another account's name is routed: %v", r)
	}

	// Bank's claim object turns unreadable: the host still has a route of its own.
	nodetest.PutRaw(t, n.St, "domains/www.bank.example.json", []byte(`{"host":`))
	announceUnnamed(t, n)
	n.Must(200, "PUT", "/v1/apps/evil", testnode.AdminToken, `{"account":"evil","placement":["vps-a"]}`)
	nodetest.WaitFor(t, 5*time.Second, "the unreadable claim fails closed", func() bool {
		r := routeOf(t, n, "www.bank.example")
		return r != nil && r["application"] != "bank"
	})
	r := routeOf(t, n, "www.bank.example")
	if r["application"] == "evil" || len(r["upstreams"].([]any)) != 0 {
		t.Fatalf("www.bank.example with an unreadable claim: %v, want a route of its own with no upstream", r)
	}
	_, tr := n.Get("/v1/ingress/traefik", testnode.IngressToken)
	if !strings.Contains(string(tr), "Host(`www.bank.example`)") {
		t.Fatal("no Host router for the fail-closed host in the Traefik config")
	}
	var st struct {
		Skipped []struct{ Object, Reason string }
	}
	_, sb := n.Get("/v1/status", testnode.AdminToken)
	json.Unmarshal(sb, &st)
	if len(st.Skipped) == 0 {
		t.Fatalf("status reports nothing skipped: %s", sb)
	}
}

// announceUnnamed bumps the store's serial naming nothing, as an out-of-band writer
// would: a node that reads it re-reads the whole store.
func announceUnnamed(t *testing.T, n *testnode.Node) {
	t.Helper()
	if _, err := store.BumpSerial(context.Background(), n.St); err != nil {
		t.Fatal(err)
	}
}
