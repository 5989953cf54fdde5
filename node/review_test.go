// Regressions found by the second hostile-tenant review (each failed before its fix).

package node

// Proof-of-concept tests from the second hostile review (branch attack2). Each one
// FAILS while the defect it names is present; see the comment on each.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// tokenReadCounter counts store reads of application-token records.
type tokenReadCounter struct {
	store.Store
	reads atomic.Int64
}

func (c *tokenReadCounter) Get(ctx context.Context, key string) (store.Object, error) {
	if strings.HasPrefix(key, fleet.PrefixTokens) {
		c.reads.Add(1)
	}
	return c.Store.Get(ctx, key)
}

func attackNode(t *testing.T) (*testNode, *tokenReadCounter) {
	t.Helper()
	cfg := testConfig(t, "vps-a", t.TempDir())
	inner, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	st := &tokenReadCounter{Store: inner}
	n := startNodeWithStore(t, cfg, st)
	n.waitReady()
	return n, st
}

func issueToken(t *testing.T, n *testNode, account, app, roles string) (id, tok string) {
	t.Helper()
	var it struct{ ID, Token string }
	json.Unmarshal(n.must(201, "POST", "/v1/tokens", testAdminToken,
		fmt.Sprintf(`{"account":%q,"app":%q,"roles":[%s]}`, account, app, roles)), &it)
	return it.ID, it.Token
}

func randHex(n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestStrictDecodeIsLinearInALongMapKey: jsonx.checkKeys builds the
// error-report path of every array element (fmt.Sprintf("%s[%d]", path, i)) and of every
// key (path + "." + k) eagerly, whatever the type. Under a map key of K bytes, an array
// of N elements costs K*N bytes of copying before anything is refused: a 2 MiB body
// (K = 1 MiB, N = 512k) costs minutes of CPU and ~0.5 TB of allocation. Any application
// token reaches it: the path-map door decodes the body before it authorizes the caller,
// and writes.burst (20) such requests can be in flight at once.
// Expected: a ~190 KiB body is refused in about the time of a same-sized control body
// (tens of ms). Actual: 20-100x that (1-6 s on the 2-core review machine).
func TestStrictDecodeIsLinearInALongMapKey(t *testing.T) {
	n, _ := attackNode(t)
	n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	_, tok := issueToken(t, n, "evil", "evil", `"publish"`)

	// Control: the same bytes with a short key cost nothing.
	ctl := `{"paths":{"k":[` + strings.Repeat("0,", 80_000) + `0]}}`
	start := time.Now()
	resp, _ := n.do("PUT", "/v1/apps/evil/domains/x.evil.example/paths", tok, ctl)
	ctlTime := time.Since(start)

	key := strings.Repeat("a", 32<<10)
	body := `{"paths":{"` + key + `":[` + strings.Repeat("0,", 80_000) + `0]}}`
	start = time.Now()
	resp, _ = n.do("PUT", "/v1/apps/evil/domains/x.evil.example/paths", tok, body)
	took := time.Since(start)
	t.Logf("control %d bytes: %v; long key %d bytes: %v (status %d)", len(ctl), ctlTime, len(body), took, resp.StatusCode)
	if took > 500*time.Millisecond && took > 8*ctlTime {
		t.Fatalf("a %d-byte body took %v to refuse (control of %d bytes: %v): checkKeys is O(key length x elements)",
			len(body), took, len(ctl), ctlTime)
	}
}

// TestAKnownTokenIDDoesNotBypassTheLookupBudget: goodIDs is keyed by the token *id*,
// the public half of a token (printed in every 429 "token <id> is past writes.rate", in
// the audit log, in revocation commands). Once an id has been seen valid, any token
// "scafo_<that id>_<any secret>" skips the shared lookup budget, and each new secret
// misses badTokens too, so every request is a store read: the flood the budget was
// added to bound, unbounded again, by any tenant with its own token (or anyone who
// learns any token's id). On S3 every one is a billed GET.
// Expected: after the budget (burst 40) wrong-secret tokens get 429 and stop reading
// the store. Actual: every one reads the store.
func TestAKnownTokenIDDoesNotBypassTheLookupBudget(t *testing.T) {
	n, st := attackNode(t)
	n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	id, tok := issueToken(t, n, "evil", "evil", `"publish"`)
	n.must(404, "GET", "/v1/apps/evil/domains/x.evil.example/paths", tok, "") // id now in goodIDs

	before := st.reads.Load()
	const flood = 200
	codes := map[int]int{}
	for i := 0; i < flood; i++ {
		resp, _ := n.do("GET", "/v1/apps/evil/domains/x.evil.example/paths", "scafo_"+id+"_"+randHex(64), "")
		codes[resp.StatusCode]++
	}
	reads := st.reads.Load() - before
	t.Logf("answers %v, token-record reads %d", codes, reads)
	if reads > unknownLookupBurst+unknownLookupRate*5 {
		t.Fatalf("%d wrong-secret tokens on a known id cost %d store reads (budget: burst %d, %d/s): goodIDs keyed by id bypasses it",
			flood, reads, unknownLookupBurst, unknownLookupRate)
	}
}

// TestPathsDoorNeverTellsWhetherAnotherApplicationExists: scopedTo exists so that an
// application token on another application is refused "before anything is read, so the
// answer cannot tell whether another tenant's application exists". The path-map door's
// malformed-request path (refusePathsFirst -> AuthorizePaths) reads the application
// first: 404 when it does not exist, 403 when it does. A tenant enumerates another
// tenant's application names with one malformed PUT each.
// Expected: the same answer (403) for an existing and a missing application.
// Actual: 403 vs 404. Fix: AuthorizePaths calls who.scopedTo(app) before w.App.
func TestPathsDoorNeverTellsWhetherAnotherApplicationExists(t *testing.T) {
	n, _ := attackNode(t)
	n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	n.must(201, "PUT", "/v1/apps/bank-secret-project", testAdminToken, `{"account":"bank","placement":["vps-a"]}`)
	_, tok := issueToken(t, n, "evil", "evil", `"publish"`)
	probe := func(app string) (int, string) {
		resp, b := n.do("PUT", "/v1/apps/"+app+"/domains/x.example/paths", tok, `{"nope":1}`)
		return resp.StatusCode, string(b)
	}
	exist, eb := probe("bank-secret-project")
	missing, mb := probe("bank-no-such-app")
	wellFormed, _ := n.do("PUT", "/v1/apps/bank-no-such-app/domains/x.example/paths", tok, `{"paths":{}}`)
	t.Logf("existing: %d %s; missing: %d %s; well-formed on missing: %d", exist, eb, missing, mb, wellFormed.StatusCode)
	if exist != missing {
		t.Fatalf("another tenant's application: %d when it exists, %d when it does not: an existence oracle", exist, missing)
	}
}

// TestATrailingCloserAfterTheBodyIsRefused: DecodeStrict promises "one value
// only", and checks it with dec.More(), which is false before '}' and ']'. So
// `{"paths":{}}]{"paths":{…}}` (or any tail starting with '}' or ']') is accepted as a
// clear of every flip: the rest of the body is silently ignored.
// Expected: 400 trailing data. Actual: 200, the map cleared.
// Fix: jsonx.DecodeStrict: after Decode, require only whitespace to remain
// (io.ReadAll(dec.Buffered()) plus the unread rest, trimmed, empty).
func TestATrailingCloserAfterTheBodyIsRefused(t *testing.T) {
	n, _ := attackNode(t)
	n.must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.must(201, "PUT", "/v1/apps/shop/domains/shop.example", testAdminToken, "")
	n.must(200, "PUT", "/v1/apps/shop/domains/shop.example/paths", testAdminToken, `{"paths":{"a":"shop.example"}}`)
	resp, b := n.do("PUT", "/v1/apps/shop/domains/shop.example/paths", testAdminToken, `{"paths":{}}]{"paths":{"a":"shop.example"}}`)
	if resp.StatusCode != 400 {
		t.Fatalf("a body with trailing data after the object: %d %s, want 400", resp.StatusCode, b)
	}
}

// TestAValidTokenCannotMakeTheNodeReadTheStoreAtLineRate: an application token is
// looked up in the store on every request (a revocation takes effect at once), and
// only writes were rate-limited, after that lookup. A tenant sending reads of its own
// path map (or writes past writes.rate, each answered 429 after the lookup) made the
// node read the store once per request (three GETs for a read), as fast as it could
// send: every one a billed S3 GET, on a store the whole fleet shares. Requests of a
// token seen valid lately now have a budget per token before the lookup.
func TestAValidTokenCannotMakeTheNodeReadTheStoreAtLineRate(t *testing.T) {
	n, st := attackNode(t)
	n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	_, tok := issueToken(t, n, "evil", "evil", `"publish"`)
	n.must(404, "GET", "/v1/apps/evil/domains/x.evil.example/paths", tok, "") // seen valid

	before := st.reads.Load()
	start := time.Now()
	const flood = 300
	codes := map[int]int{}
	for i := 0; i < flood; i++ {
		resp, _ := n.do("GET", "/v1/apps/evil/domains/x.evil.example/paths", tok, "")
		codes[resp.StatusCode]++
	}
	reads := st.reads.Load() - before
	rate, burst := max(knownTokenRate, 4*n.cfg.Writes.Rate), max(knownTokenBurst, 2*n.cfg.Writes.Burst)
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
