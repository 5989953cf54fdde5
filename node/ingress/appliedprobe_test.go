package ingress_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// probePoll is one poll of an HTTP-provider Traefik that declares its applied probe:
// the answer, its revision and serial, and the callback path the body carries ("" for
// none).
func probePoll(t *testing.T, n *testnode.Node, name string) (resp *http.Response, body []byte, callback string) {
	t.Helper()
	resp, body = n.Get("/v1/ingress/traefik?prefer=self", testnode.IngressToken, api.HeaderIngress, name, api.HeaderAppliedProbe, testnode.ProbeURL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("probe poll: %d %s", resp.StatusCode, body)
	}
	return resp, body, testnode.CallbackOf(t, body)
}

// TestHTTPProviderWithAProbeIsAppliedOnlyByItsCallback: an HTTP-provider Traefik that
// declares its probe is behind for ?wait=applied, however often it is served the write,
// until its callback for a body holding the write comes; the callback answers the
// waiting write. Before, the node counted what it served (early by seconds at 10 000
// applications, issue 24).
func TestHTTPProviderWithAProbeIsAppliedOnlyByItsCallback(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.ReportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	_, _, cb0 := probePoll(t, n, "edge-p")
	probePoll(t, n, "edge-p")
	if in := testnode.IngressesOf(t, n)["edge-p"]; in.Kind != api.KindHTTP || in.Applied == nil || in.Applied.Serial != 0 || in.State != "behind" {
		t.Fatalf("served twice, no callback: %+v, want behind with nothing applied", in)
	}
	resp, _ := n.Get(cb0, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d", resp.StatusCode)
	}
	nodetest.WaitFor(t, 2*time.Second, "edge-p current after its callback", func() bool {
		return testnode.IngressesOf(t, n)["edge-p"].State == "current"
	})

	// A write waits while the ingress is served it (a poller every 50 ms) but does not
	// call back: 202 naming it.
	polled := make(chan string, 1000)
	stopPolling := probePoller(t, n, "prefer=self", "edge-p", func(b []byte) {
		if m := testnode.CallbackRule.FindStringSubmatch(testnode.RuleOf(b)); m != nil {
			select {
			case polled <- m[1]:
			default:
			}
		}
	})
	defer stopPolling()
	resp, body := n.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=1500ms", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), "edge-p") {
		t.Fatalf("served but not applied: %d %s, want 202 naming edge-p", resp.StatusCode, body)
	}
	var ab api.Applied
	json.Unmarshal(body, &ab)
	if in := testnode.IngressesOf(t, n)["edge-p"]; in.State != "behind" {
		t.Fatalf("served the write, no callback: %+v, want behind", in)
	}
	// The callback of the body holding the write (its revision) moves it to applied.
	var cb1 string
	nodetest.WaitFor(t, 3*time.Second, "a body of the new revision served", func() bool {
		for {
			select {
			case c := <-polled:
				if c != cb0 && c != "" {
					cb1 = c
				}
				continue
			default:
			}
			return cb1 != ""
		}
	})
	// A write waiting now answers 200 once, and only once, the callback came.
	type answer struct {
		code int
		body []byte
		at   time.Time
	}
	done := make(chan answer, 1)
	go func() {
		resp, body := n.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=10s", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
		done <- answer{resp.StatusCode, body, time.Now()}
	}()
	// That write moves the revision again: take the body that holds it.
	var cb2 string
	nodetest.WaitFor(t, 3*time.Second, "a body of the second write served", func() bool {
		for {
			select {
			case c := <-polled:
				if c != cb0 && c != cb1 && c != "" {
					cb2 = c
				}
				continue
			default:
			}
			return cb2 != ""
		}
	})
	select {
	case a := <-done:
		t.Fatalf("the write answered %d %s before any callback of its body", a.code, a.body)
	case <-time.After(700 * time.Millisecond):
	}
	// The older body's callback (Traefik applying cb1 late) counts forward, but does
	// not hold the second write.
	if resp, b := n.Get(cb1, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "recorded") {
		t.Fatalf("callback of an older served body: %d %s, want 200 recorded", resp.StatusCode, b)
	}
	select {
	case a := <-done:
		t.Fatalf("the write answered %d %s on the callback of an older body", a.code, a.body)
	case <-time.After(500 * time.Millisecond):
	}
	called := time.Now()
	if resp, b := n.Get(cb2, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "recorded") {
		t.Fatalf("callback: %d %s", resp.StatusCode, b)
	}
	select {
	case a := <-done:
		if a.code != http.StatusOK || a.at.Before(called) {
			t.Fatalf("the write answered %d %s at %s, callback at %s", a.code, a.body, a.at, called)
		}
		t.Logf("answered applied %s after the callback", a.at.Sub(called))
	case <-time.After(5 * time.Second):
		t.Fatal("the write did not answer after the callback")
	}
	applied := testnode.IngressesOf(t, n)["edge-p"].Applied
	// Replays of older callbacks never move it back.
	for _, cb := range []string{cb0, cb1, cb0} {
		if resp, b := n.Get(cb, ""); resp.StatusCode != http.StatusOK || strings.Contains(string(b), "recorded") {
			t.Errorf("replayed callback %s: %d %s, want 200, not recorded", cb, resp.StatusCode, b)
		}
	}
	if got := testnode.IngressesOf(t, n)["edge-p"].Applied; got == nil || got.Revision != applied.Revision || got.Serial < applied.Serial {
		t.Errorf("after replays: applied %+v, want still %+v", got, applied)
	}
}

// probePoller polls n's Traefik render as ingress with the applied probe every 50 ms
// (query: the poll's query string), handing each 200's body to onBody (nil: ignored)
// and never calling back, until the returned stop, which waits for the poller to end.
func probePoller(t *testing.T, n *testnode.Node, query, ingress string, onBody func([]byte)) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			req, _ := http.NewRequest("GET", n.URL+"/v1/ingress/traefik?"+query, nil)
			req.Header.Set("Authorization", "Bearer "+testnode.IngressToken)
			req.Header.Set(api.HeaderIngress, ingress)
			req.Header.Set(api.HeaderAppliedProbe, testnode.ProbeURL)
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode == http.StatusOK && onBody != nil {
				onBody(b)
			}
		}
	}()
	return func() { close(done); <-exited }
}
