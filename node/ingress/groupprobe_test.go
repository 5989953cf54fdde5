package ingress_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// The one whole-node test of the package: the applied probe on ?group= polls through
// the node's wiring (node/wire.go hands the book the publisher's group revisions; with
// them left out, every write waits for every group's ingresses). The rules it crosses
// are each unit-tested: the group revision (await_test.go
// TestWaitAppliedCountsAGroupIngressOnItsGroupsContent), callbacks only forward
// (applied_test.go, await_test.go TestAProbeIngressIsAppliedOnlyByItsCallback), forged
// callbacks (httpapi's TestForgedAppliedCallbacksAreRefusedForNothing).

// Hostile round six: the probe on a ?group= poll. The callback names the group's
// revision; once it comes the ingress is current. A write elsewhere (another group)
// leaves that group's revision, which the ingress holds, so ?wait=applied answers 200
// without a callback; a write to its group waits for a callback of the new body (202
// naming it while it is only served), and another ingress's callback never stands in.
func TestAppliedProbeOnAGroupPoll(t *testing.T) {
	t.Parallel()
	n := testnode.GroupNode(t)
	poll := func(name, group string) (rev, cb string) {
		t.Helper()
		resp, body := n.Get("/v1/ingress/traefik?group="+group, testnode.IngressToken, api.HeaderIngress, name, api.HeaderAppliedProbe, testnode.ProbeURL)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("probe poll ?group=%s: %d %s", group, resp.StatusCode, body)
		}
		return resp.Header.Get(api.HeaderRevision), testnode.CallbackOf(t, body)
	}
	rev, cb := poll("edge-eu", "eu-1")
	if !strings.Contains(cb, "/"+rev+"/") {
		t.Fatalf("callback %s does not name the group's revision %s", cb, rev)
	}
	_, cbDef := poll("edge-def", "default")
	if resp, _ := n.Get(strings.Replace(cbDef, "/edge-def/", "/edge-eu/", 1), ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("edge-def's callback under edge-eu's name: %d, want 404", resp.StatusCode)
	}
	if resp, b := n.Get(cb, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "recorded") {
		t.Fatalf("callback: %d %s", resp.StatusCode, b)
	}
	// edge-def has not called back: a write to default waits for it alone.
	resp, body := n.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=1500ms", testnode.AdminToken, `{"account":"acme","placement":["vps-b"]}`)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), "edge-def") || strings.Contains(string(body), "edge-eu") {
		t.Fatalf("a write to default: %d %s, want 202 naming edge-def alone", resp.StatusCode, body)
	}
	// A write to eu-1, edge-eu served it but not calling back: 202 naming edge-eu.
	stopPolling := probePoller(t, n, "group=eu-1", "edge-eu", nil)
	resp, body = n.Do(http.MethodPut, "/v1/apps/news?wait=applied&timeout=1500ms", testnode.AdminToken, `{"account":"acme","placement":["vps-b"],"ingress":{"group":"eu-1"}}`)
	stopPolling()
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), "edge-eu") {
		t.Fatalf("a write to eu-1 served but not called back: %d %s, want 202 naming edge-eu", resp.StatusCode, body)
	}
	// The old callback replayed does not count for the new body.
	if resp, b := n.Get(cb, ""); resp.StatusCode != http.StatusOK || strings.Contains(string(b), "recorded") {
		t.Errorf("old callback replayed: %d %s, want not recorded", resp.StatusCode, b)
	}
	if in := testnode.IngressesOf(t, n)["edge-eu"]; in.State == "current" {
		t.Errorf("edge-eu after the eu-1 write without its callback: %+v, want behind", in)
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
