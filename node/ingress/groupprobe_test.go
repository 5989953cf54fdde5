package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// The package's one whole-node test: the applied probe on ?group= polls through
// the node's wiring (node/wire.go hands the book the publisher's group revisions; with
// them left out, every write waits for every group's ingresses). The rules it crosses
// are each unit-tested: the group revision (await_test.go
// TestWaitAppliedCountsAGroupIngressOnItsGroupsContent), callbacks only forward
// (applied_test.go, await_test.go TestAProbeIngressIsAppliedOnlyByItsCallback), forged
// callbacks (httpapi's TestForgedAppliedCallbacksAreRefusedForNothing).

// Hostile round six: the probe on a ?group= poll. The callback names the group's
// revision, and another ingress's callback never stands in for it. Once it comes, a
// write elsewhere (another group) leaves that group's revision, which the ingress holds:
// ?wait=applied waits only for the ingresses of the group written (a write to its own
// group waiting for its callback: await_test.go's TestAProbeIngressIsAppliedOnlyByItsCallback).
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
}
