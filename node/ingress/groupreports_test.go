package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// TestWaitAppliedCountsAGroupIngressOnItsGroupsContent: an ingress polling ?group=eu-1
// holds eu-1's content, with eu-1's revision; a write elsewhere moves the serial but not
// a byte of eu-1, so its long-poll stays parked (up to the plugin's watchWait, 30 s) and
// it keeps reporting the serial and the group revision it applied. Before, a node
// compared that revision with the whole document's, never equal: every write made with
// ?wait=applied on a fleet with groups waited for every other group's ingresses and
// answered 202 naming them, though nothing they serve had changed. The node now records
// the group selection a report's poll asked for and compares the revision with that
// selection's.
func TestWaitAppliedCountsAGroupIngressOnItsGroupsContent(t *testing.T) {
	t.Parallel()
	n := testnode.GroupNode(t)
	// A plugin of group eu-1: long-polls, reports what its last 200 (or 304) carried.
	var mu sync.Mutex
	var serial, rev, etag string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest("GET", n.URL+"/v1/ingress/traefik?group=eu-1&wait=30s", nil)
			req.Header.Set("Authorization", "Bearer "+testnode.IngressToken)
			req.Header.Set(api.HeaderIngress, "edge-eu")
			req.Header.Set(api.HeaderIngressKind, api.KindPlugin)
			mu.Lock()
			if serial != "" {
				req.Header.Set(api.HeaderAppliedSerial, serial)
				req.Header.Set(api.HeaderAppliedRevision, rev)
				req.Header.Set("If-None-Match", etag)
			}
			mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-stop:
				case <-ctx.Done():
				}
				cancel()
			}()
			resp, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err != nil {
				cancel()
				continue
			}
			resp.Body.Close()
			cancel()
			mu.Lock()
			switch resp.StatusCode {
			case http.StatusOK:
				serial, rev, etag = resp.Header.Get("X-Scafo-Serial"), resp.Header.Get("X-Scafo-Revision"), resp.Header.Get("ETag")
			case http.StatusNotModified:
				serial = resp.Header.Get("X-Scafo-Serial")
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	nodetest.WaitFor(t, 5*time.Second, "edge-eu current", func() bool {
		in, ok := testnode.IngressesOf(t, n)["edge-eu"]
		return ok && in.State == "current" && in.Applied != nil && in.Applied.Serial > 0
	})

	// A new application in the default group: eu-1's bytes do not move.
	resp, body := n.Do("PUT", "/v1/apps/cart?wait=applied&timeout=2s", testnode.AdminToken, `{"account":"acme","placement":["vps-b"]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a write in group default with wait=applied: %d %s, want 200 (edge-eu serves eu-1, which did not change)", resp.StatusCode, body)
	}
	// A change in eu-1 is still waited for: edge-eu takes it on its next 200.
	resp, body = n.Do("PUT", "/v1/apps/post?wait=applied&timeout=5s", testnode.AdminToken, `{"account":"acme","placement":["vps-b"],"ingress":{"group":"eu-1"}}`)
	var ab api.Applied
	json.Unmarshal(body, &ab)
	mu.Lock()
	got := serial
	mu.Unlock()
	if at, _ := strconv.ParseUint(got, 10, 64); resp.StatusCode != http.StatusOK || !ab.Applied || at < ab.Serial {
		t.Fatalf("a write in eu-1 with wait=applied: %d %s (edge-eu at serial %s)", resp.StatusCode, body, got)
	}
}
