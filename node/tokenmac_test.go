package node

// Issue 25 item 4 (anonymous clients lock tenants out of the write API) and item 10's
// missing mutation (the fleet-wide budget for unknown-token lookups): application tokens
// carry a MAC of the fleet's key, so a made-up one is refused without a store read and
// without spending a budget a real token needs; X-Forwarded-For names the client only
// from a trusted proxy.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// macCounter counts reads of token records and of the MAC key object, and LISTs.
type macCounter struct {
	store.Store
	tokenReads, keyReads, lists atomic.Int64
}

func (c *macCounter) note(key string) {
	switch {
	case strings.HasPrefix(key, fleet.PrefixTokens):
		c.tokenReads.Add(1)
	case key == fleetwrite.TokenMACKey:
		c.keyReads.Add(1)
	}
}

func (c *macCounter) Get(ctx context.Context, key string) (store.Object, error) {
	c.note(key)
	return c.Store.Get(ctx, key)
}

func (c *macCounter) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	c.note(key)
	return c.Store.GetIfChanged(ctx, key, etag)
}

func (c *macCounter) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if prefix == fleet.PrefixTokens {
		c.lists.Add(1)
	}
	return c.Store.List(ctx, prefix)
}

func macNode(t *testing.T, mut ...func(*Config)) (*testNode, *macCounter) {
	t.Helper()
	cfg := testConfig(t, "vps-a", t.TempDir())
	for _, m := range mut {
		m(cfg)
	}
	inner, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	st := &macCounter{Store: inner}
	n := startNodeWithStore(t, cfg, st)
	n.waitReady()
	return n, st
}

// legacyToken stores a token as nodes before the MAC key minted them (64 random hex of
// secret) and returns it.
func legacyToken(t *testing.T, st store.Store, app string) (id, tok string) {
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
// a real id with another secret) is refused 401 at once: no read of a token record,
// no 429 (no budget was spent), whatever the rate.
func TestForgedTokensCostNoStoreReadAndNoBudget(t *testing.T) {
	n, st := macNode(t)
	n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	id, tok := issueToken(t, n, "evil", "evil", `"publish"`)
	n.must(404, "GET", macPathsURL, tok, "")

	reads, keyReads := st.tokenReads.Load(), st.keyReads.Load()
	const flood = 600
	codes := map[int]int{}
	for i := range flood {
		forged := "scafo_" + randHex(16) + "_" + randHex(64)
		if i%2 == 1 {
			forged = "scafo_" + id + "_" + randHex(64) // the id is public
		}
		resp, _ := n.do("GET", macPathsURL, forged, "")
		codes[resp.StatusCode]++
	}
	t.Logf("answers %v; token-record reads %d, key reads %d", codes, st.tokenReads.Load()-reads, st.keyReads.Load()-keyReads)
	if codes[http.StatusUnauthorized] != flood {
		t.Errorf("%d forged tokens answered %v, want 401 every one", flood, codes)
	}
	if r := st.tokenReads.Load() - reads; r != 0 {
		t.Errorf("%d forged tokens read %d token records, want none", flood, r)
	}
	if r := st.keyReads.Load() - keyReads; r > 1 {
		t.Errorf("%d forged tokens read the key object %d times, want at most one recheck", flood, r)
	}
	// Nothing of the anonymous budget was spent: the per-source budget still has its
	// whole burst.
	for i := range sourceUnknownLookupBurst {
		if ok := n.srv.http.TakeSourceLookup("127.0.0.1"); !ok {
			t.Fatalf("the per-source lookup budget had %d of %d left after a flood of forged tokens", i, sourceUnknownLookupBurst)
		}
	}
}

// TestAFloodOfForgedTokensNeverHoldsBackARealOne is the issue's measurement: random
// well-formed tokens, far above both lookup budgets, from the same address as a
// freshly issued real token (behind the apex every client is Traefik's address). Each
// real token's first requests must pass; before, 7 of 8 were answered 429.
func TestAFloodOfForgedTokensNeverHoldsBackARealOne(t *testing.T) {
	n, _ := macNode(t)
	n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	const rounds, perRound = 8, 80
	fresh := make([]string, rounds)
	for i := range fresh {
		_, fresh[i] = issueToken(t, n, "evil", "evil", `"publish"`)
	}
	var stop atomic.Bool
	var forged atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 2 { // two flooders, as fast as the node answers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, _ := n.do("GET", macPathsURL, "scafo_"+randHex(16)+"_"+randHex(64), "")
				if resp.StatusCode == http.StatusInternalServerError {
					t.Error("a forged token: 500")
				}
				forged.Add(1)
			}
		}()
	}
	limited := 0
	for i, tok := range fresh {
		// Let the flood run past the whole of both budgets' bursts first.
		waitFor(t, 10*time.Second, "the flood to pass the budgets", func() bool {
			return forged.Load() >= int64((i+1)*perRound)
		})
		for range 4 {
			resp, b := n.do("GET", macPathsURL, tok, "")
			switch resp.StatusCode {
			case http.StatusNotFound:
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Errorf("a fresh real token: %d %s", resp.StatusCode, b)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	rate := float64(forged.Load()) / time.Since(start).Seconds()
	t.Logf("%d forged tokens at %.0f/s (budgets: %d/s per source, %d/s in all); %d of %d requests of fresh real tokens answered 429",
		forged.Load(), rate, sourceUnknownLookupRate, unknownLookupRate, limited, 4*rounds)
	if limited > 0 {
		t.Fatalf("%d of %d requests of fresh real tokens answered 429 under a flood of forged tokens", limited, 4*rounds)
	}
}

// TestLegacyTokensKeepWorkingOnTheBudgetedPath: a token minted before the key (no MAC)
// is listed in the key object when the key is created and keeps working, through the
// budgeted lookup; a token stored without a MAC after the key exists is a forgery.
func TestLegacyTokensKeepWorkingOnTheBudgetedPath(t *testing.T) {
	n, st := macNode(t)
	n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	oldID, old := legacyToken(t, st, "evil")
	if _, err := st.Get(context.Background(), fleetwrite.TokenMACKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the key exists before any application token was presented or issued: %v", err)
	}
	reads := st.tokenReads.Load()
	n.must(404, "GET", macPathsURL, old, "") // creates the key, listing old as legacy
	if st.tokenReads.Load() == reads {
		t.Error("a legacy token was not looked up")
	}
	obj, err := st.Get(context.Background(), fleetwrite.TokenMACKey)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(obj.Value), `"`+oldID+`"`) || st.lists.Load() != 1 {
		t.Fatalf("key object %s (%d LISTs of tokens/), want it to list legacy token %s", obj.Value, st.lists.Load(), oldID)
	}
	// A legacy id with another secret is looked up on the anonymous budget (the id is
	// public: this flood can hold back legacy tokens, which is why they should be
	// reissued), never on a signed token's.
	codes := map[int]int{}
	for range 3 * sourceUnknownLookupBurst {
		resp, _ := n.do("GET", macPathsURL, "scafo_"+oldID+"_"+randHex(64), "")
		codes[resp.StatusCode]++
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusUnauthorized] == 0 {
		t.Errorf("wrong secrets on a legacy id: %v, want 401s then 429s (the budgeted path)", codes)
	}
	_, signed := issueToken(t, n, "evil", "evil", `"publish"`)
	n.must(404, "GET", macPathsURL, signed, "")
	_, late := legacyToken(t, st, "evil")
	reads = st.tokenReads.Load()
	n.must(401, "GET", macPathsURL, late, "")
	if st.tokenReads.Load() != reads {
		t.Error("a token without a MAC, not listed as legacy, was looked up")
	}
	// Revocation still takes effect at once.
	n.must(200, "DELETE", "/v1/tokens/"+oldID, testAdminToken, "")
	n.must(401, "GET", macPathsURL, old, "")
}

// TestACorruptTokenKeyNeverLocksOutValidTokens: a key object of the wrong size or of
// garbage makes a node check every token the old way (a budgeted lookup), logged once;
// issuing is refused (503 naming the object) rather than minting a token some nodes
// would refuse.
func TestACorruptTokenKeyNeverLocksOutValidTokens(t *testing.T) {
	for what, corrupt := range map[string]string{
		"garbage":    "\x00\xffnot json",
		"wrong size": `{"key":"abcd","legacy":[]}`,
		"bad legacy": `{"key":"` + strings.Repeat("ab", 32) + `","legacy":["zz"]}`,
	} {
		t.Run(what, func(t *testing.T) {
			n, st := macNode(t)
			n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
			_, tok := issueToken(t, n, "evil", "evil", `"publish"`)
			if _, err := st.Put(context.Background(), fleetwrite.TokenMACKey, []byte(corrupt), store.Condition{}); err != nil {
				t.Fatal(err)
			}
			// A node that has not cached the key (a restart, another node).
			cfg := testConfig(t, "vps-b", n.cfg.Store.Dir.Path)
			n2 := startNodeWithStore(t, cfg, st)
			n2.waitReady()
			for range 3 {
				n2.must(404, "GET", macPathsURL, tok, "")
			}
			if c := strings.Count(n2.logs.String(), "level=ERROR msg=\"the token MAC key object is corrupt"); c != 1 {
				t.Errorf("the corrupt key was logged %d times, want once", c)
			}
			b := n2.must(503, "POST", "/v1/tokens", testAdminToken, `{"account":"evil","app":"evil","roles":["publish"]}`)
			if !strings.Contains(string(b), fleetwrite.TokenMACKey) {
				t.Errorf("issuing on a corrupt key: %s, want the object named", b)
			}
			n.must(404, "GET", macPathsURL, tok, "") // the node that cached the key
		})
	}
}

// TestTheTokenKeyIsCreatedOnceAndFollowedAcrossNodes, on the dir store and on MinIO:
// nodes racing to create the key agree on one; a token issued on one node is good on
// every other; after the key is deleted and created anew, the tokens of the old key keep
// working on both (listed as legacy).
func TestTheTokenKeyIsCreatedOnceAndFollowedAcrossNodes(t *testing.T) {
	onReportBackends(t, func(t *testing.T, be reportBackend) {
		a := startNodeWithStore(t, testConfigOn(t, "vps-a"), be.open(t))
		a.waitReady()
		a.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
		b := startNodeWithStore(t, testConfigOn(t, "vps-b"), be.open(t))
		b.waitReady()
		// Both create at once (the first application token each sees).
		var wg sync.WaitGroup
		for _, n := range []*testNode{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.do("GET", macPathsURL, "scafo_"+randHex(16)+"_"+randHex(64), "")
			}()
		}
		wg.Wait()
		_, t1 := issueToken(t, a, "evil", "evil", `"publish"`)
		b.must(404, "GET", macPathsURL, t1, "")
		_, t2 := issueToken(t, b, "evil", "evil", `"publish"`)
		a.must(404, "GET", macPathsURL, t2, "")

		// The key is deleted; b issues (creating a new key, listing t1 and t2 as legacy).
		st := be.open(t)
		if err := st.Delete(context.Background(), fleetwrite.TokenMACKey, ""); err != nil {
			t.Fatal(err)
		}
		_, t3 := issueToken(t, b, "evil", "evil", `"publish"`)
		b.must(404, "GET", macPathsURL, t3, "") // a follows it at its next recheck: TestTokenMACKeyReplacedIsFollowed
		for _, tok := range []string{t1, t2} {
			a.must(404, "GET", macPathsURL, tok, "")
			b.must(404, "GET", macPathsURL, tok, "")
		}
		b.must(401, "GET", macPathsURL, "scafo_"+randHex(16)+"_"+randHex(64), "")
	})
}

// testConfigOn is testConfig for a node whose store the test opens itself.
func testConfigOn(t *testing.T, name string) *Config {
	return testConfig(t, name, t.TempDir())
}

// TestTheFleetWideLookupBudgetHoldsAcrossSources (item 10): tokens checked by a store
// lookup (here: wrong secrets on a legacy id) from many client addresses (a trusted
// proxy naming each in X-Forwarded-For) cost at most the fleet-wide budget, whatever
// each address's own budget allows.
func TestTheFleetWideLookupBudgetHoldsAcrossSources(t *testing.T) {
	n, st := macNode(t, func(c *Config) { c.Limits.TrustedProxies = []string{"127.0.0.0/8"} })
	n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	id, old := legacyToken(t, st, "evil")
	n.must(404, "GET", macPathsURL, old, "")

	const flood = 400 // one request from each of 400 clients: each within its own budget
	reads := st.tokenReads.Load()
	start := time.Now()
	codes := map[int]int{}
	for i := range flood {
		resp, _ := n.do("GET", macPathsURL, "scafo_"+id+"_"+randHex(64), "",
			"X-Forwarded-For", fmt.Sprintf("198.51.%d.%d", i/250, i%250+1))
		codes[resp.StatusCode]++
	}
	got := st.tokenReads.Load() - reads
	limit := int64(unknownLookupBurst + unknownLookupRate*time.Since(start).Seconds() + 1)
	t.Logf("answers %v; token-record reads %d (fleet-wide budget: burst %d, %d/s: %d)", codes, got, unknownLookupBurst, unknownLookupRate, limit)
	if got > limit || codes[http.StatusTooManyRequests] == 0 {
		t.Fatalf("%d lookups from %d client addresses read the store %d times, want at most %d (the fleet-wide budget)", flood, flood, got, limit)
	}
	// And each client had a budget of its own: more were looked up than one source's
	// budget allows (X-Forwarded-For from the trusted proxy named them).
	if one := int64(sourceUnknownLookupBurst + sourceUnknownLookupRate*time.Since(start).Seconds() + 1); got <= one {
		t.Fatalf("%d lookups from %d client addresses behind a trusted proxy read the store %d times, no more than one source's budget (%d): X-Forwarded-For was not believed", flood, flood, got, one)
	}
}

// TestForwardedForIsBelievedOnlyFromTrustedProxies: the per-client budget is kept for
// the remote address unless that is a trusted proxy; a spoofed X-Forwarded-For from
// anyone else buys no budget of its own.
func TestForwardedForIsBelievedOnlyFromTrustedProxies(t *testing.T) {
	t.Run("untrusted peer", func(t *testing.T) {
		n, st := macNode(t, func(c *Config) { c.Limits.TrustedProxies = []string{"10.0.0.0/8"} }) // not the test's 127.0.0.1
		n.must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
		id, old := legacyToken(t, st, "evil")
		n.must(404, "GET", macPathsURL, old, "")
		reads := st.tokenReads.Load()
		start := time.Now()
		for i := range 100 {
			n.do("GET", macPathsURL, "scafo_"+id+"_"+randHex(64), "", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1))
		}
		got := st.tokenReads.Load() - reads
		limit := int64(sourceUnknownLookupBurst + sourceUnknownLookupRate*time.Since(start).Seconds() + 1)
		if got > limit {
			t.Fatalf("100 lookups with spoofed X-Forwarded-For from an untrusted peer read the store %d times, want at most %d (one source's budget)", got, limit)
		}
	})
	t.Run("validated at load", func(t *testing.T) {
		for _, bad := range []string{"10.0.0.0/33", "not-an-ip", "10.0.0.0/8/8", "fe80::1%eth0"} {
			cfg := NewConfig()
			cfg.Limits.TrustedProxies = []string{"127.0.0.1", bad}
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), "limits.trustedProxies[1]") {
				t.Errorf("trustedProxies %q: %v, want an error naming limits.trustedProxies[1]", bad, err)
			}
		}
		cfg, err := loadConfig(t, []string{"--limits.trustedProxies=127.0.0.1,10.0.0.0/8"}, []string{"SCAFO_NODE_NAME=vps-a"})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cfg.Limits.TrustedProxies, " "); got != "127.0.0.1 10.0.0.0/8" {
			t.Errorf("--limits.trustedProxies=127.0.0.1,10.0.0.0/8 loaded as %q", got)
		}
		cfg.Limits.TrustedProxies = append(cfg.Limits.TrustedProxies, "::1")
		if err := cfg.Validate(); err != nil {
			t.Errorf("valid trustedProxies: %v", err)
		}
	})
}
