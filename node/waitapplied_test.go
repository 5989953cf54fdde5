package node_test

// Instance writes with ?wait=applied that only the node's insides show: refusals hold
// no waiter slot (the ingress book), and a no-op on an instance its probe finds down is
// not applied (the prober's verdict, the record's announced instance). The rest of the
// hostile instance writes are in node/fleetwrite/instancewrites_test.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/render/fleet"
)

// A's instance token can neither write nor wait on B's application: each refusal
// answers at once, and releases its waiter slot (more refusals than the account's
// waiter share never turn into 503 "too many waiters").
func TestHostileInstanceTokenCannotWriteOrWaitOnAnotherAccountsApp(t *testing.T) {
	t.Parallel()
	n := testnode.NewStepped(t, testConfig(t, "vps-a", t.TempDir()), nil)
	n.Tick()
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/rival", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	var shop fleetwrite.Instance // the answer of POST /v1/node/instances
	json.Unmarshal(n.Must(201, "POST", "/v1/node/instances/shop", testAdminToken, ""), &shop)
	tok := n.Token("evil", "rival", `"instance"`)
	// More refusals at once than the account's waiter share: none may wait (no pass
	// runs, so a write let through would wait its 30s) or keep its slot.
	var wg sync.WaitGroup
	codes := make(chan int, 3*(ingress.MaxWaitersPerAccount+4))
	for range ingress.MaxWaitersPerAccount + 4 {
		wg.Go(func() {
			for _, m := range []struct{ method, body string }{
				{"POST", ""},
				{"PUT", fmt.Sprintf(`{"port":%d,"ready":false}`, shop.Ports[1])},
				{"DELETE", ""},
			} {
				codes <- n.Do(m.method, "/v1/node/instances/shop?wait=applied&timeout=30s", tok, m.body).Code
			}
		})
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusForbidden && c != http.StatusNotFound && c != http.StatusTooManyRequests {
			t.Errorf("write on another account's app with wait=applied: %d, want 403/404 (or 429)", c)
		}
	}
	if got, _ := n.Srv.Instances().Get("shop"); got.Port != shop.Port {
		t.Errorf("shop's instance moved to %d by another account's token", got.Port)
	}
	if held, _ := n.Srv.Ingresses().Waiters(); held != 0 {
		t.Errorf("%d waiter slots still held after refused writes", held)
	}
}

// A write that changes nothing on an instance the probes find down is not "applied":
// no traffic reaches it (202 naming the probe), never 200.
func TestHostileNoOpWriteOnAProbeDownInstanceIsNotApplied(t *testing.T) {
	t.Parallel()
	n := testnode.NewStepped(t, probeConfig(t, "vps-a", t.TempDir()), nil)
	n.Tick()
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	tok := n.Token("acme", "shop", `"instance"`)
	var shop fleetwrite.Instance // the answer of POST /v1/node/instances
	json.Unmarshal(n.Must(201, "POST", "/v1/node/instances/shop", tok, ""), &shop)
	body := fmt.Sprintf(`{"port":%d,"ready":true}`, shop.Port) // nothing listens there
	n.Must(200, "PUT", "/v1/node/instances/shop", tok, body)
	n.Beat() // the record announces shop ready
	// Probe rounds until the probe finds shop down, then the heartbeat announces it.
	for i := 0; ; i++ {
		probes := probesOf(n, "shop")
		n.Now = n.Now.Add(time.Duration(n.Cfg.Probe.Interval))
		n.Steps.ProbeRound(context.Background(), n.Now)
		waitFor(t, 10*time.Second, "the round's probe of shop", func() bool { return probesOf(n, "shop") > probes })
		if ok, _ := n.Srv.Probes().Ready("shop", mustInstance(t, n.Srv.Instances(), "shop")); !ok {
			break
		}
		if i > n.Cfg.Probe.DownAfter {
			t.Fatalf("shop still up after %d probe rounds", i+1)
		}
	}
	// Before the record says so: the record still announces shop ready, the probe finds
	// it down, and a wait is not applied (waitInstance's probe clause).
	if rec := n.Do("PUT", "/v1/node/instances/shop?wait=applied&timeout=600ms", tok, body); rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), "probe") {
		t.Errorf("PUT with wait=applied while the record still announces shop ready and the probe finds it down: %d %s, want 202 naming the probe", rec.Code, rec.Body)
	}
	n.Beat()
	if inst, _ := n.Srv.Self().Announced("shop"); inst.Ready || recordReady(t, n.St, "vps-a", "shop") {
		t.Fatal("the record still announces shop ready")
	}
	for range 2 { // a no-op, twice
		rec := n.Do("PUT", "/v1/node/instances/shop?wait=applied&timeout=600ms", tok, body)
		if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), "probe") {
			t.Errorf("PUT on a probe-down instance with wait=applied: %d %s, want 202 naming the probe", rec.Code, rec.Body)
		}
	}
}

// probesOf is how many probes the status counts of app's instance.
func probesOf(n *testnode.Stepped, app string) int {
	for _, i := range n.Status().Instances {
		if i.App == app && i.Probe != nil {
			return i.Probe.Probes
		}
	}
	return 0
}

func mustInstance(t *testing.T, reg *fleetwrite.Registry, app string) fleet.Instance {
	t.Helper()
	i, ok := reg.Get(app)
	if !ok {
		t.Fatalf("no instance of %s", app)
	}
	return i
}
