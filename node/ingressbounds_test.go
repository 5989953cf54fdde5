package node_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/store/dir"
	ptypes "github.com/traefik/paerser/types"
)

// The bounds on ingress reports and waiters, through a whole node: these stay in the
// root package because they set or read the ingress book's waiter slots
// (n.Srv.Ingresses()), the node's known serial (n.Srv.Identity()) and count every store
// write (countingStore, fleet_s3_test.go). The rest of the reports' tests are node/ingress's.

// Waiters are bounded: beyond the cap a write asking to wait is refused before it is
// made; a waiter whose client goes away frees its slot.
func TestWaitAppliedWaitersAreBounded(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Srv.Ingresses().SetWaiterSlots(1)
	p := startFakePlugin(t, n, "edge-1")
	waitFor(t, 5*time.Second, "edge-1 current", func() bool { return ingressesOf(t, n)["edge-1"].State == "current" })
	p.Frozen.Store(true)

	initial := serialOf(t, n.St)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, n.URL+"/v1/apps/a1?wait=applied&timeout=30s", strings.NewReader(`{"account":"acme","placement":["vps-a"]}`))
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	// The waiter's slot is taken before its write commits: wait for both, or the serial
	// read below can come before the first write's bump (seen under load).
	waitFor(t, 20*time.Second, "the first write committed and waiting", func() bool {
		return waiting(n) == 1 && serialOf(t, n.St) != initial
	})
	before := serialOf(t, n.St)
	resp, body := n.Do(http.MethodPut, "/v1/apps/a2?wait=applied", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many waiters") {
		t.Errorf("second waiter: %d %s, want 503 too many waiters", resp.StatusCode, body)
	}
	if got := serialOf(t, n.St); got != before {
		t.Errorf("the refused waiter wrote (serial %d -> %d)", before, got)
	}
	cancel()
	if code := <-first; code != 0 {
		t.Errorf("first waiter answered %d after its client left", code)
	}
	waitFor(t, 5*time.Second, "the slot freed", func() bool { return waiting(n) == 0 })
}

// Reports are refused (the poll is served) for bad names and kinds; names beyond
// ingresses.maxTracked are refused; a serial beyond the node's is clamped; a flood of
// reports does not multiply store writes.
func TestHostileIngressReports(t *testing.T) {
	t.Parallel()
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	cfg.Ingresses.MaxTracked = 8
	// No name may be lost while the test runs: with reportsConfig's 2s lostAfter, the 400
	// polls below outlasted it on a loaded CI under -race, the first names were dropped
	// and spam-199 found a free place (stop 43's CI).
	cfg.Ingresses.LostAfter = ptypes.Duration(10 * time.Minute)
	st, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	cs := newCountingStore(st, false)
	n := startNodeWithStore(t, cfg, cs)
	n.WaitReady()
	poll := func(hdr ...string) *http.Response {
		resp, _ := n.Get("/v1/ingress/traefik", testIngressToken, hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("poll with %v: %d, want 200 (a report never changes what is served)", hdr, resp.StatusCode)
		}
		return resp
	}
	for _, hdr := range [][]string{
		{api.HeaderIngress, strings.Repeat("a", 64)},
		{api.HeaderIngress, "Edge"},
		{api.HeaderIngress, "edge/../x"},
		{api.HeaderIngress, "-edge"},
		{api.HeaderIngress, "edge", api.HeaderIngressKind, "nginx"},
		{api.HeaderIngress, "edge", api.HeaderAppliedSerial, "5"},
		{api.HeaderIngress, "edge", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, "-5"},
		{api.HeaderIngress, "edge", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedRevision, "nothex"},
		{api.HeaderIngress, "edge", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedEpoch, "x"},
	} {
		if got := poll(hdr...).Header.Get(api.HeaderIngressReport); !strings.HasPrefix(got, "refused: ") {
			t.Errorf("report %v: %s %q, want refused", hdr, api.HeaderIngressReport, got)
		}
	}
	known := n.Srv.Identity().Serial()
	poll(api.HeaderIngress, "liar", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, "999999999")
	if in := ingressesOf(t, n)["liar"]; in.Applied == nil || in.Applied.Serial != known {
		t.Errorf("a serial from the future: %+v, want clamped to %d", in.Applied, known)
	}

	base := cs.snapshot()["Put"]
	for i := range 200 {
		poll(api.HeaderIngress, fmt.Sprintf("spam-%d", i))
	}
	// A report flood: many polls of one name.
	for range 200 {
		poll(api.HeaderIngress, "spam-0")
	}
	// spam-0..spam-6 fill the places "liar" left: each is written once (the writer runs
	// every ingress.MinWriteGap), then the count must stay within one per name.
	waitFor(t, 20*time.Second, "the tracked names written", func() bool { return cs.snapshot()["Put"]-base >= cfg.Ingresses.MaxTracked-1 })
	ins := ingressesOf(t, n)
	if len(ins) > cfg.Ingresses.MaxTracked {
		t.Errorf("%d ingresses tracked, want at most %d", len(ins), cfg.Ingresses.MaxTracked)
	}
	if got := poll(api.HeaderIngress, "spam-199").Header.Get(api.HeaderIngressReport); !strings.Contains(got, "maxTracked") {
		t.Errorf("a name beyond maxTracked: %q, want refused naming ingresses.maxTracked", got)
	}
	if puts := cs.snapshot()["Put"] - base; puts > cfg.Ingresses.MaxTracked+2 {
		t.Errorf("%d store writes for 400 reports of %d names, want at most one per tracked name", puts, cfg.Ingresses.MaxTracked)
	}
	// Made-up names, each different: still a line a minute per header at fault.
	for i := range 100 {
		poll(api.HeaderIngress, fmt.Sprintf("Bad-%d", i))
	}
	if l := n.Logs.String(); strings.Count(l, "ingress report refused") > 12 {
		t.Errorf("refusals logged %d times, want each reason once a minute", strings.Count(l, "ingress report refused"))
	}
}

// One account cannot take every waiter slot: its application tokens hold at most
// ingress.MaxWaitersPerAccount; another account's writes, and the admin's, still wait.
func TestWaitAppliedSlotsAreSharedBetweenAccounts(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	fleetOf(t, n, "tito-classic@tito", "tito-go@tito", "shop")
	n.Must(http.StatusCreated, http.MethodPut, "/v1/apps/shop/domains/shop.example.org", testAdminToken, "")
	_, tito := issueToken(t, n, "tito", "tito-classic", `"publish"`)
	_, acme := issueToken(t, n, "acme", "shop", `"publish"`)
	p := startFakePlugin(t, n, "edge-1")
	waitFor(t, 5*time.Second, "edge-1 current", func() bool { return ingressesOf(t, n)["edge-1"].State == "current" })
	p.Frozen.Store(true)

	// tito's waiters hold their slots until the test ends (a short timeout expired before
	// the checks below on a loaded machine), then leave with their client.
	initial := serialOf(t, n.St)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range ingress.MaxWaitersPerAccount {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, n.URL+"/v1/apps/tito-classic/domains/ti.to/paths?wait=applied&timeout=60s",
				strings.NewReader(fmt.Sprintf(`{"paths":{"p%d":"tito-go.apps.example.com"}}`, i)))
			req.Header.Set("Authorization", "Bearer "+tito)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// A waiter's slot is taken before its write commits: wait for every write's serial
	// bump too, or edge-1 may still hold the serial a no-op write below answers at.
	waitFor(t, 20*time.Second, "tito's writes committed and waiting", func() bool {
		return waiting(n) == ingress.MaxWaitersPerAccount && serialOf(t, n.St) >= initial+uint64(ingress.MaxWaitersPerAccount)
	})
	resp, body := n.Do(http.MethodPut, "/v1/apps/tito-classic/domains/ti.to/paths?wait=applied&timeout=4s", tito, `{"paths":{"x":"tito-go.apps.example.com"}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many waiters") {
		t.Errorf("tito's write beyond its share: %d %s, want 503", resp.StatusCode, body)
	}
	for _, tok := range []string{acme, testAdminToken} {
		resp, body = n.Do(http.MethodPut, "/v1/apps/shop/domains/shop.example.org/paths?wait=applied&timeout=300ms", tok, `{"paths":{}}`)
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("another account's write (token %.8s…) while tito holds its share: %d %s, want 202 (edge-1 is behind)", tok, resp.StatusCode, body)
		}
	}
}

// Application tokens together never hold every waiter slot: a share is kept for the
// admin, so tenants (several accounts, each within its own share) cannot make the
// control plane's writes with ?wait=applied fail with 503 before they are made.
func TestWaitAppliedKeepsSlotsForTheAdmin(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Srv.Ingresses().SetWaiterSlots(2 * ingress.MaxWaitersPerAccount) // two accounts' shares
	fleetOf(t, n, "tito-classic@tito", "tito-go@tito", "shop")
	n.Must(http.StatusCreated, http.MethodPut, "/v1/apps/shop/domains/shop.example.org", testAdminToken, "")
	_, tito := issueToken(t, n, "tito", "tito-classic", `"publish"`)
	_, acme := issueToken(t, n, "acme", "shop", `"publish"`)
	p := startFakePlugin(t, n, "edge-1")
	waitFor(t, 5*time.Second, "edge-1 current", func() bool { return ingressesOf(t, n)["edge-1"].State == "current" })
	p.Frozen.Store(true)

	var wg sync.WaitGroup
	defer wg.Wait()
	var refused atomic.Int32
	wait := func(tok, path, body string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPut, n.URL+path+"?wait=applied&timeout=4s", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				if resp.StatusCode == http.StatusServiceUnavailable {
					refused.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	for i := range ingress.MaxWaitersPerAccount {
		wait(tito, "/v1/apps/tito-classic/domains/ti.to/paths", fmt.Sprintf(`{"paths":{"p%d":"tito-go.apps.example.com"}}`, i))
		wait(acme, "/v1/apps/shop/domains/shop.example.org/paths", fmt.Sprintf(`{"paths":{"p%d":"shop.apps.example.com"}}`, i))
	}
	waitFor(t, 5*time.Second, "every tenant write waiting or refused", func() bool {
		return waiting(n)+int(refused.Load()) == 2*ingress.MaxWaitersPerAccount
	})
	if got, limit := n.Srv.Ingresses().Waiters(); got >= limit {
		t.Errorf("application tokens hold %d of %d waiter slots, want some kept for the admin", got, limit)
	}
	resp, body := n.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=300ms", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("the admin's write while tenants wait: %d %s, want 202 (edge-1 is behind)", resp.StatusCode, body)
	}
}

// waiting is the waiter slots n's writes hold.
func waiting(n *testNode) int {
	held, _ := n.Srv.Ingresses().Waiters()
	return held
}
