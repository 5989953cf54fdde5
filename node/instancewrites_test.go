package node_test

// Hostile review of instance writes with ?wait=applied (4d71ee5), port pairs (da09cbd)
// and probe damping whatever the port (e2b349c): an application token of account A
// against account B's application, and odd paths.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/render/fleet"
)

type hostileInstance struct {
	Port  int    `json:"port"`
	Ports [2]int `json:"ports"`
}

// A's instance token can neither write nor wait on B's application: each refusal
// answers at once, and releases its waiter slot (more refusals than the account's
// waiter share never turn into 503 "too many waiters").
func TestHostileInstanceTokenCannotWriteOrWaitOnAnotherAccountsApp(t *testing.T) {
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/rival", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	var shop hostileInstance
	json.Unmarshal(n.Must(201, "POST", "/v1/node/instances/shop", testAdminToken, ""), &shop)
	_, tok := issueToken(t, n, "evil", "rival", `"instance"`)
	var wg sync.WaitGroup
	codes := make(chan int, 3*(ingress.MaxWaitersPerAccount+4))
	for i := 0; i < ingress.MaxWaitersPerAccount+4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range []struct{ method, body string }{
				{"POST", ""},
				{"PUT", fmt.Sprintf(`{"port":%d,"ready":false}`, shop.Ports[1])},
				{"DELETE", ""},
			} {
				start := time.Now()
				resp, _ := n.Do(m.method, "/v1/node/instances/shop?wait=applied&timeout=30s", tok, m.body)
				if time.Since(start) > 5*time.Second {
					t.Errorf("%s on another account's app waited %s", m.method, time.Since(start))
				}
				codes <- resp.StatusCode
			}
		}()
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
	held, _ := n.Srv.Ingresses().Waiters()
	if held != 0 {
		t.Errorf("%d waiter slots still held after refused writes", held)
	}
}

// An instance token cannot put its own instance on either member of another
// application's pair, nor on the member left quarantined by its release.
func TestHostileInstanceTokenCannotSquatAnotherAppsPair(t *testing.T) {
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/rival", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	var shop hostileInstance
	json.Unmarshal(n.Must(201, "POST", "/v1/node/instances/shop", testAdminToken, ""), &shop)
	if shop.Ports[0] == shop.Ports[1] {
		t.Fatalf("shop unpaired: %+v", shop)
	}
	_, tok := issueToken(t, n, "evil", "rival", `"instance"`)
	n.Must(201, "POST", "/v1/node/instances/rival", tok, "")
	try := func(when string) {
		for _, p := range shop.Ports {
			resp, body := n.Do("PUT", "/v1/node/instances/rival?wait=applied&timeout=2s", tok, fmt.Sprintf(`{"port":%d,"ready":true}`, p))
			if resp.StatusCode != http.StatusConflict {
				t.Errorf("%s: rival onto shop's port %d: %d %s, want 409", when, p, resp.StatusCode, body)
			}
		}
	}
	try("shop holds its pair")
	n.Must(200, "DELETE", "/v1/node/instances/shop", testAdminToken, "")
	try("shop released its pair")
}

// Odd paths on the instance writes with wait=applied: answered at once, never a panic,
// never a wait on a name that is not an application.
func TestHostileOddInstancePathsWithWaitAnswerAtOnce(t *testing.T) {
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	_, tok := issueToken(t, n, "acme", "shop", `"instance"`)
	for _, path := range []string{
		"/v1/node/instances/",
		"/v1/node/instances//",
		"/v1/node/instances/shop%2Fx",
		"/v1/node/instances/sh%6Fp",
		"/v1/node/instances/shop/",
		"/v1/node/instances/" + strings.Repeat("a", 4000),
		"/v1/node/instances/..%2Fshop",
	} {
		for _, who := range []string{tok, testAdminToken} {
			for _, method := range []string{"POST", "PUT", "DELETE"} {
				body := ""
				if method == "PUT" {
					body = `{"ready":true}`
				}
				start := time.Now()
				resp, b := n.Do(method, path+"?wait=applied&timeout=20s", who, body)
				if time.Since(start) > 5*time.Second || resp.StatusCode < 400 || resp.StatusCode >= 500 {
					t.Errorf("%s %.60s: %d after %s %.200s, want a 4xx at once", method, path, resp.StatusCode, time.Since(start), b)
				}
			}
		}
	}
	if _, ok := n.Srv.Instances().Get("shop"); ok {
		t.Error("an odd path allocated shop's instance")
	}
}

// A release with wait=applied answers "applied" only once the record names no
// instance; a second release is 404 (nothing to wait for), never 200 applied.
func TestHostileReleaseTwiceIsNotAppliedTwice(t *testing.T) {
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	_, tok := issueToken(t, n, "acme", "shop", `"instance"`)
	n.Must(201, "POST", "/v1/node/instances/shop", tok, "")
	resp, body := n.Do("DELETE", "/v1/node/instances/shop?wait=applied&timeout=10s", tok, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"applied":true`) {
		t.Fatalf("release: %d %s", resp.StatusCode, body)
	}
	var rec fleet.NodeRecord
	obj, err := n.St.Get(t.Context(), fleet.NodeKey("vps-a"))
	if err != nil {
		t.Fatal(err)
	}
	b := obj.Value
	json.Unmarshal(b, &rec)
	if _, ok := rec.Instances["shop"]; ok {
		t.Errorf("release answered applied while the record still names shop: %s", b)
	}
	if resp, body := n.Do("DELETE", "/v1/node/instances/shop?wait=applied&timeout=10s", tok, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("second release: %d %s, want 404", resp.StatusCode, body)
	}
}

// A write that changes nothing on an instance the probes find down is not "applied":
// no traffic reaches it (202 naming the probe), never 200.
func TestHostileNoOpWriteOnAProbeDownInstanceIsNotApplied(t *testing.T) {
	n := startNode(t, probeConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	_, tok := issueToken(t, n, "acme", "shop", `"instance"`)
	var shop hostileInstance
	json.Unmarshal(n.Must(201, "POST", "/v1/node/instances/shop", tok, ""), &shop)
	body := fmt.Sprintf(`{"port":%d,"ready":true}`, shop.Port) // nothing listens there
	n.Must(200, "PUT", "/v1/node/instances/shop", tok, body)
	waitFor(t, 5*time.Second, "the probe finds shop down", func() bool {
		ok, _ := n.Srv.Probes().Ready("shop", fleet.Instance{Port: shop.Port, Ready: true, AppID: mustInstance(t, n, "shop").AppID})
		if ok || recordReady(t, n.St, "vps-a", "shop") {
			return false
		}
		// The down record announced (see the report: a no-op before that is 200).
		inst, _ := n.Srv.Self().Announced("shop")
		return !inst.Ready
	})
	for _, port := range []int{shop.Port, shop.Port} { // a no-op, twice
		resp, b := n.Do("PUT", "/v1/node/instances/shop?wait=applied&timeout=600ms", tok, fmt.Sprintf(`{"port":%d,"ready":true}`, port))
		if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(b), "probe") {
			t.Errorf("PUT port %d on a probe-down instance with wait=applied: %d %s, want 202 naming the probe", port, resp.StatusCode, b)
		}
	}
}

func mustInstance(t *testing.T, n *testNode, app string) fleet.Instance {
	t.Helper()
	i, ok := n.Srv.Instances().Get(app)
	if !ok {
		t.Fatalf("no instance of %s", app)
	}
	return i
}
