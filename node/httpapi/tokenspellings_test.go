package httpapi_test

// Spellings of a real token that are not it, and a revoked token replayed. Each is refused 401, and none
// costs more than the rules say: a respelled or cut token reads nothing; a revoked one
// reads its record once, then is refused from the negative cache.

import (
	"net/http"
	"strings"
	"testing"
)

func TestRespelledTokensAreRefusedWithoutAStoreRead(t *testing.T) {
	t.Parallel()
	p, st := countingTokens(t)
	tok := p.issue(t, "evil", "evil", "publish")
	p.must(t, 404, "GET", macPathsURL, tok, "")
	rest := strings.TrimPrefix(tok, "scafo_")
	id, secret, _ := strings.Cut(rest, "_")
	flip := func(s string, i int) string { // another hex digit at i
		c := byte('0')
		if s[i] == '0' {
			c = '1'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	variants := map[string]string{
		"upper case":          strings.ToUpper(tok),
		"upper-case secret":   "scafo_" + id + "_" + strings.ToUpper(secret),
		"upper-case MAC":      "scafo_" + id + "_" + secret[:48] + strings.ToUpper(secret[48:]),
		"upper-case prefix":   "SCAFO_" + rest,
		"truncated secret":    tok[:len(tok)-1],
		"extended secret":     tok + "0",
		"truncated MAC":       "scafo_" + id + "_" + secret[:48] + secret[48:63] + "0",
		"MAC flipped":         "scafo_" + id + "_" + flip(secret, 63),
		"random part flipped": "scafo_" + id + "_" + flip(secret, 0),
		"id flipped":          "scafo_" + flip(id, 15) + "_" + secret,
		"MAC moved":           "scafo_" + id + "_" + secret[48:] + secret[:48],
		"tab inside":          tok[:20] + "\t" + tok[21:],
		"dash for underscore": "scafo_" + id + "-" + secret,
		"doubled":             tok + tok,
	}
	reads := st.Records.Load()
	for name, v := range variants {
		if v == tok {
			continue // bearer() trims what the header spelling allows
		}
		if rec := p.do("GET", macPathsURL, v, ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s (%q): %d, want 401", name, v, rec.Code)
		}
	}
	if r := st.Records.Load() - reads; r != 0 {
		t.Errorf("%d respellings of a real token read %d token records, want none", len(variants), r)
	}
	p.must(t, 404, "GET", macPathsURL, tok, "") // and the real one still works
}

// TestARevokedTokenReplayedReadsItsRecordOnce: a revoked token keeps its valid MAC (it
// was issued), so it is looked up; once found revoked it is refused from the negative
// cache, whatever the rate of replays, and never answered as valid.
func TestARevokedTokenReplayedReadsItsRecordOnce(t *testing.T) {
	t.Parallel()
	p, st := countingTokens(t)
	tok := p.issue(t, "evil", "evil", "publish")
	p.must(t, 404, "GET", macPathsURL, tok, "")
	p.must(t, 200, "DELETE", "/v1/tokens/"+strings.Split(tok, "_")[1], ipAdmin, "")
	reads := st.Records.Load()
	for range 200 {
		if rec := p.do("GET", macPathsURL, tok, ""); rec.Code != http.StatusUnauthorized {
			t.Fatalf("a revoked token replayed: %d, want 401", rec.Code)
		}
	}
	if r := st.Records.Load() - reads; r > 1 {
		t.Errorf("200 replays of a revoked token read its record %d times, want 1 (then the negative cache)", r)
	}
}
