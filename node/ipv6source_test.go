package node

// Hostile review (round four): an IPv6 client holds a whole /64 (2^64 addresses), so a
// limit kept per IPv6 address is none. Each per-source limit keys an IPv6 source by
// its /64 (sourceKey): the connections per source (issue 25 item 6), the token-lookup
// budget per client (item 4) and the rejection log.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestIPv6AddressesOfOneSlash64ShareATokenLookupBudget: wrong secrets on a legacy id
// (public), from 200 addresses of one /64, directly and through a trusted proxy, read
// the store no more than one client's budget allows.
func TestIPv6AddressesOfOneSlash64ShareATokenLookupBudget(t *testing.T) {
	for _, via := range []string{"direct", "trusted proxy"} {
		t.Run(via, func(t *testing.T) {
			n, st := macNode(t, func(c *Config) { c.Limits.TrustedProxies = []string{"fd00::/8"} })
			n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
			id, old := legacyToken(t, st, "evil")
			n.must(404, "GET", macPathsURL, old, "")
			h := n.srv.http.Authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			reads := st.tokenReads.Load()
			codes := map[int]int{}
			start := time.Now()
			for i := range 200 {
				r := httptest.NewRequest("GET", macPathsURL, nil)
				r.Header.Set("Authorization", "Bearer scafo_"+id+"_"+randHex(64))
				client := fmt.Sprintf("2001:db8:1:2:%x:%x:%x:%x", i, i*7, i*13, i+1)
				if via == "direct" {
					r.RemoteAddr = "[" + client + "]:5000"
				} else {
					r.RemoteAddr = "[fd00::7]:5000"
					r.Header.Set("X-Forwarded-For", client)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				codes[rec.Code]++
			}
			got := st.tokenReads.Load() - reads
			limit := int64(sourceUnknownLookupBurst + sourceUnknownLookupRate*time.Since(start).Seconds() + 1)
			t.Logf("answers %v; token-record reads %d (one client's budget: %d)", codes, got, limit)
			if got > limit {
				t.Fatalf("200 lookups from 200 addresses of one /64 read the store %d times, want at most %d (one client's budget)", got, limit)
			}
		})
	}
}
