package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/httpapi"
)

func TestAppTokenWritesAreRateLimited(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, func(c *httpapi.Config) { c.WriteRate, c.WriteBurst = 0.5, 3 })
	n.Must(201, "PUT", "/v1/apps/shop", ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
	var tok struct{ Token string }
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", ipAdmin, `{"account":"acme","app":"shop","roles":["instance"]}`), &tok)
	for i := range 3 { // forced: nothing listens on these ports
		n.Must(200, "PUT", "/v1/node/instances/shop?force=true", tok.Token, fmt.Sprintf(`{"port":%d,"ready":true}`, 24000+i))
	}
	resp, b := n.Do("PUT", "/v1/node/instances/shop", tok.Token, `{"port":24005,"ready":true}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "writes.rate") {
		t.Fatalf("past the burst: %d Retry-After=%q %s, want 429 naming writes.rate", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if resp, b := n.Do("GET", "/v1/apps/shop/domains/x.example/paths", tok.Token, ""); resp.StatusCode == 429 {
		t.Fatalf("a read was rate-limited: %s", b) // reads are never limited
	}
	n.Must(200, "PUT", "/v1/node/instances/shop?force=true", ipAdmin, `{"port":24006,"ready":true}`) // the admin is not limited
}
