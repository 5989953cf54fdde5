package node_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
)

func TestAppTokenWritesAreRateLimited(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	cfg.Writes.Rate, cfg.Writes.Burst = 0.5, 3
	n := startNode(t, cfg)
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	var tok struct{ Token string }
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", testAdminToken, `{"account":"acme","app":"shop","roles":["instance"]}`), &tok)
	for i := range 3 {
		n.Must(200, "PUT", "/v1/node/instances/shop", tok.Token, fmt.Sprintf(`{"port":%d,"ready":true}`, 24000+i))
	}
	resp, b := n.Do("PUT", "/v1/node/instances/shop", tok.Token, `{"port":24005,"ready":true}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "writes.rate") {
		t.Fatalf("past the burst: %d Retry-After=%q %s, want 429 naming writes.rate", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if resp, b := n.Do("GET", "/v1/apps/shop/domains/x.example/paths", tok.Token, ""); resp.StatusCode == 429 {
		t.Fatalf("a read was rate-limited: %s", b) // reads are never limited
	}
	n.Must(200, "PUT", "/v1/node/instances/shop", testAdminToken, `{"port":24006,"ready":true}`) // the admin is not limited
}

func TestABurstOfChangesPublishesAtMostOncePerWindow(t *testing.T) {
	cfg := testConfig(t, "vps-a", t.TempDir())
	cfg.Reconcile.Interval = ptypes.Duration(time.Hour) // only kicks publish
	cfg.Reconcile.PublishWindow = ptypes.Duration(400 * time.Millisecond)
	n := startNode(t, cfg)
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	published := func() int { return strings.Count(n.Logs.String(), "published routing document") }

	// A lone change after a quiet spell publishes at once.
	time.Sleep(500 * time.Millisecond) // let the window after the app's publish pass
	before, start := published(), time.Now()
	n.Must(200, "PUT", "/v1/node/instances/shop", testAdminToken, `{"port":24000,"ready":true}`)
	waitFor(t, 2*time.Second, "the lone change published", func() bool { return published() > before })
	lone := time.Since(start)

	// Churn: readiness toggled as fast as the API takes it, for ~2 s.
	before, start = published(), time.Now()
	for i := 0; time.Since(start) < 2*time.Second; i++ {
		n.Must(200, "PUT", "/v1/node/instances/shop", testAdminToken, fmt.Sprintf(`{"ready":%v}`, i%2 == 0))
	}
	churn := time.Since(start)
	time.Sleep(time.Second) // the trailing publish of the burst
	got := published() - before
	limit := int(churn/(400*time.Millisecond)) + 2
	if got > limit {
		t.Fatalf("%d publishes during %s of churn, want at most %d (one per 400ms window)", got, churn, limit)
	}
	if got < 2 {
		t.Fatalf("%d publishes during churn: the burst's changes were not published", got)
	}
	if lone > time.Second {
		t.Fatalf("a lone change after a quiet spell took %s to publish", lone)
	}
	t.Logf("lone change published in %s; %d publishes in %s of churn", lone, got, churn)
}

// TestAnEmptyTokenFileIsReplacedNotFatal: an older node on a full disk left an empty
// token file, and every later start failed. Minting now never leaves one (temp file,
// sync, link), and an empty one is replaced; concurrent minters agree on one token.
func TestAnEmptyTokenFileIsReplacedNotFatal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := node.LoadOrMintToken("", dir, "admin-token")
	if err != nil || len(tok) != 64 {
		t.Fatalf("start over an empty token file: %q %v", tok, err)
	}
	if again, err := node.LoadOrMintToken("", dir, "admin-token"); err != nil || again != tok {
		t.Fatalf("restart: %q %v, want %q", again, err, tok)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("state dir holds %d entries, want only the token file (no temp files left)", len(ents))
	}
	fresh := t.TempDir()
	toks := make(chan string, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := node.LoadOrMintToken("", fresh, "ingress-token")
			if err != nil {
				t.Error(err)
			}
			toks <- tk
		}()
	}
	wg.Wait()
	close(toks)
	first := <-toks
	for tk := range toks {
		if tk != first {
			t.Fatal("concurrent minters disagree on the token")
		}
	}
}

// TestPreviousTokensAreAcceptedDuringARotation: with the new token configured and the
// old one under *.previous, clients on either work, so a rotation has no window in
// which a Traefik or an operator holds a refused token.
func TestPreviousTokensAreAcceptedDuringARotation(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	cfg.Ingress.Previous = []string{"old-ingress-token-0001"}
	cfg.Admin.Previous = []string{"old-admin-token-00001"}
	n := startNode(t, cfg)
	n.WaitReady()
	for _, tok := range []string{testIngressToken, "old-ingress-token-0001", testAdminToken, "old-admin-token-00001"} {
		if resp, _ := n.Get("/v1/ingress/routes", tok); resp.StatusCode != 200 {
			t.Errorf("poll with %.9s…: %d", tok, resp.StatusCode)
		}
	}
	n.Must(201, "PUT", "/v1/apps/shop", "old-admin-token-00001", `{"account":"acme"}`)
	n.Must(401, "PUT", "/v1/apps/blog", "old-ingress-token-0001", `{"account":"acme"}`) // an ingress token never writes
	if resp, _ := n.Get("/v1/ingress/routes", "not-a-token-at-all-000"); resp.StatusCode != 401 {
		t.Errorf("an unknown token: %d, want 401", resp.StatusCode)
	}
	bad := testConfig(t, "vps-a", t.TempDir())
	bad.Ingress.Previous = []string{""}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "ingress.previous[0]") {
		t.Fatalf("an empty previous token: %v, want an error naming ingress.previous[0]", err)
	}
}
