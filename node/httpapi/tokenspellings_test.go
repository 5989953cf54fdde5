package httpapi_test

// A revoked token replayed: refused 401, it reads its record once, then is refused from
// the negative cache. Respellings of a real token are TestForgedTokensCostNoStoreReadAndNoBudget's.

import (
	"net/http"
	"strings"
	"testing"
)

// TestARevokedTokenReplayedReadsItsRecordOnce: a revoked token keeps its valid MAC (it
// was issued), so it is looked up; once found revoked it is refused from the negative
// cache, whatever the rate of replays, and never answered as valid.
func TestARevokedTokenReplayedReadsItsRecordOnce(t *testing.T) {
	t.Parallel()
	p, st := countingTokens(t)
	tok := p.issue(t, "evil", "evil", "publish")
	p.Must(404, "GET", macPathsURL, tok, "")
	p.Must(200, "DELETE", "/v1/tokens/"+strings.Split(tok, "_")[1], ipAdmin, "")
	reads := st.Records.Load()
	for range 200 {
		if rec := p.Rec("GET", macPathsURL, tok, ""); rec.Code != http.StatusUnauthorized {
			t.Fatalf("a revoked token replayed: %d, want 401", rec.Code)
		}
	}
	if r := st.Records.Load() - reads; r > 1 {
		t.Errorf("200 replays of a revoked token read its record %d times, want 1 (then the negative cache)", r)
	}
}
