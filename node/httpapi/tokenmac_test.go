package httpapi_test

// Application tokens carry a MAC of the fleet's key, so a made-up one is refused
// without a store read and without spending a budget a real token needs. A token is
// good only with the key it was minted with: losing the key means reissuing tokens.
// Through the API in process, over a store that counts what checking tokens reads
// (storeOps).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// countingTokens is an API over a store counting its requests (storeOps), with
// application evil (account evil).
func countingTokens(t *testing.T) (*inProcess, *storeOps) {
	t.Helper()
	p, st := countedAPI(t, "")
	p.Must(201, "PUT", "/v1/apps/evil", ipAdmin, `{"account":"evil","placement":["vps-a"]}`)
	return p, st
}

// randHex is n random lowercase hex digits.
func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// forgedToken is a well-formed application token the fleet never issued.
func forgedToken() string { return "scafo_" + randHex(16) + "_" + randHex(64) }

// unsignedToken stores a token without the fleet's MAC (64 random hex of secret, as
// nodes minted them before the key) and returns it.
func unsignedToken(t *testing.T, st store.Store, app string) (id, tok string) {
	t.Helper()
	obj, err := st.Get(context.Background(), fleet.AppKey(app))
	if err != nil {
		t.Fatal(err)
	}
	var a fleet.App
	json.Unmarshal(obj.Value, &a)
	id = randHex(16)
	tok = "scafo_" + id + "_" + randHex(64)
	b, _ := jsonx.Marshal(fleet.TokenRecord{ID: id, Account: a.Account, App: app, AppID: a.ID,
		Roles: []string{fleet.RolePublish}, SHA256: fleetwrite.HashToken(tok)})
	if _, err := st.Put(context.Background(), fleet.TokenKey(id), b, store.Condition{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	return id, tok
}

const macPathsURL = "/v1/apps/evil/domains/x.evil.example/paths"

// TestForgedTokensCostNoStoreReadAndNoBudget: a made-up well-formed token (any id, or
// a real id with another secret: the id is public) and each respelling of a real one
// (case, cuts, a flipped or moved MAC) is refused 401 at once: no read of a token
// record, no 429 (no budget was spent), whatever the rate, and the flood, with bad
// ingress tokens, is logged in a few lines, not one per request; a real token, seen
// before the flood or issued after it, passes. That nodes over one store share one key,
// and that a replaced key refuses the old one's tokens, is fleetwrite's
// (TestTokenMACKeyIsCreatedOnce, TestTokenMACKeyReplacedIsFollowed).
func TestForgedTokensCostNoStoreReadAndNoBudget(t *testing.T) {
	t.Parallel()
	p, st := countingTokens(t)
	tok := p.issue(t, "evil", "evil", "publish")
	id, secret := strings.Split(tok, "_")[1], tok[len(tok)-64:]
	p.Must(404, "GET", macPathsURL, tok, "")
	flip := func(s string, i int) string { // another hex digit at i
		return s[:i] + map[bool]string{true: "1", false: "0"}[s[i] == '0'] + s[i+1:]
	}
	spellings := []string{
		"scafo_" + id + "_abc", "scafo_" + id + "_" + strings.Repeat("zz", 32), "scafo_" + id + "_" + strings.ToUpper(secret),
		"scafo_" + id + "_" + secret[:48] + strings.ToUpper(secret[48:]), strings.ToUpper(tok), "SCAFO_" + strings.TrimPrefix(tok, "scafo_"),
		tok + "x", tok[:len(tok)-1], "scafo_" + id + "_" + secret[:63] + "g", "scafo_" + id + "_" + flip(secret, 63),
		"scafo_" + id + "_" + flip(secret, 0), "scafo_" + flip(id, 15) + "_" + secret, "scafo_" + id + "_" + secret[48:] + secret[:48],
		tok[:20] + "\t" + tok[21:], "scafo_" + id + "-" + secret, tok + tok, "hunter2", "scafo_0123456789ABCDEF_" + strings.Repeat("cd", 32),
		tok + "_", "scafo_" + id + "_" + strings.Repeat("a", 65),
	}
	// A case respelling of a MAC with no letter in it is the real token (p ≈ 5e-4): not a forgery.
	spellings = slices.DeleteFunc(spellings, func(s string) bool { return s == tok })

	reads, keyReads, logged := st.Records.Load(), st.Key.Load(), rejectionLines(p.Logs.String())
	const flood = 600
	codes := map[int]int{}
	for i := range flood {
		forged := forgedToken()
		switch i % 3 {
		case 1:
			forged = "scafo_" + id + "_" + randHex(64) // the id is public
		case 2:
			forged = spellings[i%len(spellings)]
		}
		if rec := p.Rec("GET", macPathsURL, forged, ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("%q: %d", forged, rec.Code)
		}
		codes[p.Rec("GET", "/v1/ingress/routes", "not-the-ingress-token", "").Code]++
	}
	if codes[http.StatusUnauthorized] != flood {
		t.Errorf("%d bad ingress tokens answered %v, want 401 every one", flood, codes)
	}
	if r := st.Records.Load() - reads; r != 0 {
		t.Errorf("%d forged tokens read %d token records, want none", flood, r)
	}
	if r := st.Key.Load() - keyReads; r > 1 {
		t.Errorf("%d forged tokens read the key object %d times, want at most one recheck", flood, r)
	}
	if lines := rejectionLines(p.Logs.String()) - logged; lines > 3 {
		t.Errorf("%d rejected requests from one address logged %d lines, want at most 3", 2*flood, lines)
	}
	// Nothing of the real token's budget was spent: it has its whole burst but the one
	// request it made before the flood.
	for range httpapi.KnownTokenBurst - 1 {
		p.Must(404, "GET", macPathsURL, tok, "")
	}
	// Nor does the flood hold back a token issued after it.
	p.Must(404, "GET", macPathsURL, p.issue(t, "evil", "evil", "publish"), "")
}

// rejectionLines counts the log lines about rejected requests.
func rejectionLines(logs string) (n int) {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "rejected") {
			n++
		}
	}
	return n
}

// TestATokenWithoutTheKeysMACIsRefused: a token record stored without the fleet's MAC
// (as nodes minted them before the key) is refused 401 without a read of its record,
// whether it existed before the key was created or after; the key is created without
// listing the tokens.
func TestATokenWithoutTheKeysMACIsRefused(t *testing.T) {
	t.Parallel()
	p, st := countingTokens(t)
	_, old := unsignedToken(t, st, "evil")
	if _, err := st.Get(context.Background(), fleetwrite.TokenMACKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the key exists before any application token was presented or issued: %v", err)
	}
	reads := st.Records.Load()
	p.Must(401, "GET", macPathsURL, old, "") // creates the key
	obj, err := st.Get(context.Background(), fleetwrite.TokenMACKey)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(obj.Value), "legacy") || st.Lists.Load() != 0 {
		t.Errorf("key object %s (%d LISTs of tokens/), want the key alone", obj.Value, st.Lists.Load())
	}
	_, late := unsignedToken(t, st, "evil")
	p.Must(401, "GET", macPathsURL, late, "")
	if r := st.Records.Load() - reads; r != 0 {
		t.Errorf("tokens without a MAC read %d token records, want none", r)
	}
	p.Must(404, "GET", macPathsURL, p.issue(t, "evil", "evil", "publish"), "")
}

// TestACorruptTokenKeyRefusesTokensAsUnavailable: a key object of the wrong size or of
// garbage makes an API that has not cached the key (another node, a restart) answer
// every application token 503 naming the object (no token can be told from a made-up
// one, whose lookups would be unbounded), logged once; issuing is refused (503 naming
// the object) rather than minting a token some nodes would refuse; the API that cached
// the key still serves.
func TestACorruptTokenKeyRefusesTokensAsUnavailable(t *testing.T) {
	t.Parallel()
	for what, corrupt := range map[string]string{
		"garbage":    "\x00\xffnot json",
		"wrong size": `{"key":"abcd"}`,
	} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			p, st := countingTokens(t)
			tok := p.issue(t, "evil", "evil", "publish")
			p.Must(404, "GET", macPathsURL, tok, "") // p caches the key
			if _, err := st.Put(context.Background(), fleetwrite.TokenMACKey, []byte(corrupt), store.Condition{}); err != nil {
				t.Fatal(err)
			}
			p2 := newInProcessOn(t, st, nil)
			reads := st.Records.Load()
			for range 3 {
				if b := p2.Must(503, "GET", macPathsURL, tok, ""); !strings.Contains(string(b), fleetwrite.TokenMACKey) {
					t.Errorf("a token on a corrupt key: %s, want the object named", b)
				}
			}
			if r := st.Records.Load() - reads; r != 0 {
				t.Errorf("tokens on a corrupt key read %d token records, want none", r)
			}
			if c := strings.Count(p2.Logs.String(), "level=ERROR msg=\"the token MAC key object is corrupt"); c != 1 {
				t.Errorf("the corrupt key was logged %d times, want once:\n%s", c, p2.Logs.String())
			}
			b := p2.Must(503, "POST", "/v1/tokens", ipAdmin, `{"account":"evil","app":"evil","roles":["publish"]}`)
			if !strings.Contains(string(b), fleetwrite.TokenMACKey) {
				t.Errorf("issuing on a corrupt key: %s, want the object named", b)
			}
			p.Must(404, "GET", macPathsURL, tok, "") // the API that cached the key
		})
	}
}
