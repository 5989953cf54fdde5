package fleetwrite_test

// Hostile review (round four) of the per-account routing change budget (issue 25 item
// 5): a tenant cannot spend another account's budget, through any write it can send,
// nor reset its own.

import (
	"fmt"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/fleetwrite"
)

func TestATenantCannotSpendAnotherAccountsRoutingBudget(t *testing.T) {
	t.Parallel()
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Writes.Rate, cfg.Writes.Burst = 1000, 1000
	cfg.Writes.RouteBurst, cfg.Writes.RoutePerMinute = 3, 0.01
	n := testnode.Start(t, cfg)
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/evil", testnode.AdminToken, `{"account":"mallory","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"alice","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/shop/domains/shop.example.org", testnode.AdminToken, "")
	_, evil := testnode.IssueToken(t, n, "mallory", "evil", `"instance", "publish"`)
	_, alice := testnode.IssueToken(t, n, "alice", "shop", `"instance", "publish"`)
	n.Must(201, "POST", "/v1/node/instances/shop", alice, `{}`)

	// Mallory, with a token of its own account, at everything of alice's it can name.
	attempts := 0
	for i := range 10 {
		for _, w := range []struct{ method, url, body string }{
			{"PUT", "/v1/node/instances/shop", fmt.Sprintf(`{"ready":%v}`, i%2 == 0)},
			{"POST", "/v1/node/instances/shop", `{}`},
			{"DELETE", "/v1/node/instances/shop", ""},
			{"PUT", "/v1/apps/shop/domains/shop.example.org/paths", fmt.Sprintf(`{"/x%d":"evil"}`, i)},
			{"PUT", "/v1/apps/evil/domains/shop.example.org/paths", fmt.Sprintf(`{"/y%d":"evil"}`, i)},
			{"PUT", "/v1/apps/shop/domains/shop.example.org", ""},
			{"DELETE", "/v1/apps/shop/domains/shop.example.org", ""},
			{"PUT", "/v1/storage/keys/..%2Fbudgets%2Frouting%2Fmallory.json", `{"tokens":1000}`},
		} {
			resp, _ := n.Do(w.method, w.url, evil, w.body)
			attempts++
			if resp.StatusCode < 400 || resp.StatusCode == 429 || resp.StatusCode >= 500 {
				t.Fatalf("mallory %s %s: %d, want a 4xx refusal that is not the budget's", w.method, w.url, resp.StatusCode)
			}
		}
	}
	if _, err := n.St.Get(t.Context(), fleetwrite.RouteBudgetKey("alice")); err == nil {
		t.Errorf("%d writes of another account's token created or spent alice's budget object", attempts)
	}
	// Alice has her whole burst.
	for i := range 3 {
		n.Must(200, "PUT", "/v1/node/instances/shop", alice, fmt.Sprintf(`{"ready":%v}`, i%2 == 0))
	}
	n.Must(429, "PUT", "/v1/node/instances/shop", alice, `{"ready":false}`)
}
