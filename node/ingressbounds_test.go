package node_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// The bounds on ingress reports and waiters, through a whole node in process (testnode.Stepped):
// they set or read the ingress book's waiter slots (n.Srv.Ingresses()), the node's known
// serial (n.Srv.Identity()) and count every store write (the node's own counter,
// storeRequests). The rest of the reports' tests are node/ingress's.

// Waiter slots are bounded and shared: a write asking to wait beyond the node's slots, or
// beyond its account's share (ingress.MaxWaitersPerAccount), or beyond what application
// tokens together may hold (a share is kept for the admin), is refused before it is made;
// other accounts' writes and the admin's still wait; a waiter whose client goes away
// frees its slot. The slots held by others are taken on the book directly (what a
// waiting write holds), so nothing waits on wall time.
func TestWaitAppliedWaitersAreBounded(t *testing.T) {
	t.Parallel()
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	st := &putHook{Store: openDir(t, cfg.Store.Dir.Path)}
	n := testnode.NewStepped(t, cfg, st)
	n.Tick()
	for _, spec := range []string{`"tito-classic","tito"`, `"shop","acme"`} {
		var app, account string
		fmt.Sscanf(strings.ReplaceAll(spec, ",", " "), "%q %q", &app, &account)
		n.Must(http.StatusCreated, "PUT", "/v1/apps/"+app, testAdminToken, fmt.Sprintf(`{"account":%q,"placement":["vps-a"]}`, account))
	}
	n.Must(http.StatusCreated, "PUT", "/v1/apps/tito-classic/domains/ti.to", testAdminToken, "")
	n.Must(http.StatusCreated, "PUT", "/v1/apps/shop/domains/shop.example.org", testAdminToken, "")
	n.MustPass()
	tito, acme := n.Token("tito", "tito-classic", `"publish"`), n.Token("acme", "shop", `"publish"`)
	book := n.Srv.Ingresses()
	write := func(tok, path, body string) *httptest.ResponseRecorder {
		return n.Do(http.MethodPut, path+"?wait=applied&timeout=1ms", tok, body) // no pass runs: 202 at its timeout
	}
	titoWrite := func(i int) *httptest.ResponseRecorder {
		return write(tito, "/v1/apps/tito-classic/domains/ti.to/paths", fmt.Sprintf(`{"paths":{"p%d":"tito-classic.apps.example.com"}}`, i))
	}
	acmeWrite := func(i int) *httptest.ResponseRecorder {
		return write(acme, "/v1/apps/shop/domains/shop.example.org/paths", fmt.Sprintf(`{"paths":{"p%d":"shop.apps.example.com"}}`, i))
	}
	adminWrite := func(i int) *httptest.ResponseRecorder {
		return write(testAdminToken, fmt.Sprintf("/v1/apps/cart-%d", i), `{"account":"acme","placement":["vps-a"]}`)
	}
	refused := func(what string, rec *httptest.ResponseRecorder) {
		t.Helper()
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "too many waiters") {
			t.Errorf("%s: %d %s, want 503 too many waiters", what, rec.Code, rec.Body)
		}
	}
	waited := func(what string, rec *httptest.ResponseRecorder) {
		t.Helper()
		if rec.Code != http.StatusAccepted {
			t.Errorf("%s: %d %s, want 202 (it waited, nothing applied it)", what, rec.Code, rec.Body)
		}
	}
	take := func(account string, k int) (release func()) {
		for range k {
			if ok, why := book.TakeWaiter(account); !ok {
				t.Fatalf("taking a slot of %q: %s", account, why)
			}
		}
		return func() {
			for range k {
				book.ReleaseWaiter(account)
			}
		}
	}

	// tito holds its share: its next write is refused, nothing written; acme's and the
	// admin's still wait.
	release := take("tito", ingress.MaxWaitersPerAccount)
	before := serialOf(t, n.St)
	refused("tito's write beyond its share", titoWrite(0))
	if got := serialOf(t, n.St); got != before {
		t.Errorf("the refused waiter wrote (serial %d -> %d)", before, got)
	}
	waited("acme's write while tito holds its share", acmeWrite(0))
	waited("the admin's write while tito holds its share", adminWrite(0))
	release()

	// Two accounts' shares on a node of as many slots: application tokens together stop
	// short of every slot, the admin's write still waits.
	book.SetWaiterSlots(2 * ingress.MaxWaitersPerAccount)
	release = take("tito", ingress.MaxWaitersPerAccount)
	tenants, acmes := ingress.MaxWaitersPerAccount, 0
	for i := range ingress.MaxWaitersPerAccount {
		if ok, _ := book.TakeWaiter("acme"); !ok {
			refused("acme's write beyond what tenants may hold", acmeWrite(i+1))
			break
		}
		tenants, acmes = tenants+1, acmes+1
	}
	if _, limit := book.Waiters(); tenants >= limit {
		t.Errorf("application tokens hold %d of %d waiter slots, want some kept for the admin", tenants, limit)
	}
	waited("the admin's write while tenants wait", adminWrite(1))
	release()
	for range acmes {
		book.ReleaseWaiter("acme")
	}

	// The node's slots: beyond them even the admin's write is refused, before it is made.
	book.SetWaiterSlots(1)
	release = take("", 1)
	before = serialOf(t, n.St)
	refused("a waiter beyond the node's slots", adminWrite(2))
	if got := serialOf(t, n.St); got != before {
		t.Errorf("the refused waiter wrote (serial %d -> %d)", before, got)
	}
	release()

	// A waiter whose client goes away once its write is committed (the serial bumped)
	// is answered nothing and frees its slot.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hook := func(key string) {
		if key == fleet.KeySerial {
			cancel()
		}
	}
	st.afterPut.Store(&hook)
	req := httptest.NewRequestWithContext(ctx, http.MethodPut, "http://"+n.Cfg.Node.Address+"/v1/apps/cart-3?wait=applied&timeout=30s", strings.NewReader(`{"account":"acme","placement":["vps-a"]}`))
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	rec := n.ServeRequest(req)
	st.afterPut.Store(nil)
	if ctx.Err() == nil {
		t.Fatal("the write bumped no serial")
	}
	if held, _ := book.Waiters(); held != 0 || rec.Body.Len() != 0 {
		t.Errorf("%d waiter slots held after the waiter's client went away (answered %d %s, want nothing)", held, rec.Code, rec.Body)
	}
}

// putHook is a store whose afterPut, when set, runs after every Put.
type putHook struct {
	store.Store
	afterPut atomic.Pointer[func(key string)]
}

func (p *putHook) Put(ctx context.Context, key string, v []byte, cond store.Condition) (string, error) {
	etag, err := p.Store.Put(ctx, key, v, cond)
	if h := p.afterPut.Load(); h != nil {
		(*h)(key)
	}
	return etag, err
}

// Reports are refused (the poll is served) for a name with a path in it and a negative
// serial (each malformed header: httpapi's TestParsePollReadsEveryInputOnce and
// TestIngressNamesAreCheckedAtBothEnds); names beyond
// ingresses.maxTracked are refused; a serial beyond the node's is clamped; a flood of
// reports does not multiply store writes.
func TestHostileIngressReports(t *testing.T) {
	t.Parallel()
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	cfg.Ingresses.MaxTracked = 8
	cfg.Ingresses.LostAfter = ptypes.Duration(10 * time.Minute) // no name is lost while the test runs
	st := openDir(t, cfg.Store.Dir.Path)
	n := testnode.NewStepped(t, cfg, st)
	n.Tick()
	poll := func(hdr ...string) *httptest.ResponseRecorder {
		t.Helper()
		rec := n.Get("/v1/ingress/traefik", testIngressToken, hdr...)
		if rec.Code != http.StatusOK {
			t.Fatalf("poll with %v: %d, want 200 (a report never changes what is served)", hdr, rec.Code)
		}
		return rec
	}
	for _, hdr := range [][]string{
		{api.HeaderIngress, "edge/../x"},
		{api.HeaderIngress, "edge", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, "-5"},
	} {
		if got := poll(hdr...).Header().Get(api.HeaderIngressReport); !strings.HasPrefix(got, "refused: ") {
			t.Errorf("report %v: %s %q, want refused", hdr, api.HeaderIngressReport, got)
		}
	}
	known := n.Srv.Identity().Serial()
	poll(api.HeaderIngress, "liar", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, "999999999")
	var ins map[string]api.Ingress
	readIngresses := func() {
		t.Helper()
		ins = map[string]api.Ingress{}
		for _, in := range n.Status().Ingresses {
			ins[in.Name] = in
		}
	}
	readIngresses()
	if in := ins["liar"]; in.Applied == nil || in.Applied.Serial != known {
		t.Errorf("a serial from the future: %+v, want clamped to %d", in.Applied, known)
	}

	base := storeRequests(n.Srv)["put"]
	for i := range 200 {
		poll(api.HeaderIngress, fmt.Sprintf("spam-%d", i))
	}
	for range 200 { // a report flood: many polls of one name
		poll(api.HeaderIngress, "spam-0")
	}
	n.Steps.FlushIngresses(context.Background(), time.Now())
	// spam-0..spam-6 fill the places "liar" left: each is written once.
	readIngresses()
	if len(ins) > cfg.Ingresses.MaxTracked {
		t.Errorf("%d ingresses tracked, want at most %d", len(ins), cfg.Ingresses.MaxTracked)
	}
	if got := poll(api.HeaderIngress, "spam-199").Header().Get(api.HeaderIngressReport); !strings.Contains(got, "maxTracked") {
		t.Errorf("a name beyond maxTracked: %q, want refused naming ingresses.maxTracked", got)
	}
	if puts := int(storeRequests(n.Srv)["put"] - base); puts < cfg.Ingresses.MaxTracked-1 || puts > cfg.Ingresses.MaxTracked+2 {
		t.Errorf("%d store writes for 400 reports of %d names, want one per tracked name", puts, cfg.Ingresses.MaxTracked)
	}
	// Made-up names, each different: still a line a minute per header at fault.
	for i := range 100 {
		poll(api.HeaderIngress, fmt.Sprintf("Bad-%d", i))
	}
	if l := n.Logs.String(); strings.Count(l, "ingress report refused") > 12 {
		t.Errorf("refusals logged %d times, want each reason once a minute", strings.Count(l, "ingress report refused"))
	}
}
