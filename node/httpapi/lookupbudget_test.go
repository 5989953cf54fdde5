package httpapi_test

// The token-lookup budget: a valid token buys no store reads beyond its budget (a
// regression of the second hostile-tenant review, which failed before its fix; a known
// id with another secret is TestForgedTokensCostNoStoreReadAndNoBudget's).

import (
	"testing"
	"time"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
)

// TestAValidTokenCannotMakeTheNodeReadTheStoreAtLineRate: an application token is
// looked up in the store on every request (a revocation takes effect at once), and
// only writes were rate-limited, after that lookup. A tenant sending reads of its own
// path map (or writes past writes.rate, each answered 429 after the lookup) made the
// node read the store once per request (three GETs for a read), as fast as it could
// send: every one a billed S3 GET, on a store the whole fleet shares. Requests of a
// token seen valid lately now have a budget per token before the lookup.
func TestAValidTokenCannotMakeTheNodeReadTheStoreAtLineRate(t *testing.T) {
	n, st := countingTokens(t)
	_, tok := n.IssueToken("evil", "evil", `"publish"`)
	n.Must(404, "GET", "/v1/apps/evil/domains/x.evil.example/paths", tok, "") // seen valid

	before := st.Records.Load()
	start := time.Now()
	const flood = 300
	codes := map[int]int{}
	for i := 0; i < flood; i++ {
		resp, _ := n.Do("GET", "/v1/apps/evil/domains/x.evil.example/paths", tok, "")
		codes[resp.StatusCode]++
	}
	reads := st.Records.Load() - before
	rate, burst := max(httpapi.KnownTokenRate, 4*fleetwrite.DefaultWrites().Rate), max(httpapi.KnownTokenBurst, 2*fleetwrite.DefaultWrites().Burst)
	limit := int64(float64(burst) + rate*time.Since(start).Seconds() + 1)
	t.Logf("answers %v, token-record reads %d (budget %d)", codes, reads, limit)
	if reads > limit {
		t.Fatalf("%d requests of one valid token cost %d token-record reads, want at most %d (burst %d, %v/s)",
			flood, reads, limit, burst, rate)
	}
	if codes[429] == 0 {
		t.Fatalf("no request was refused 429: %v", codes)
	}
}
