package node_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// heldOwnRecord holds the first write of one node's record until released; entered is
// closed once that write is held.
type heldOwnRecord struct {
	store.Store
	key     string
	release chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (h *heldOwnRecord) Put(ctx context.Context, key string, v []byte, cond store.Condition) (string, error) {
	if key == h.key {
		h.once.Do(func() { close(h.entered) })
		select {
		case <-h.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return h.Store.Put(ctx, key, v, cond)
}

// On a brand-new store, the first document a node serves after ready already carries
// the node's own record (its API upstream): the reconciler's first pass waits for the
// node's first record write (written or failed). Before, the first pass raced that
// write and a node could serve a document without itself (issue 25 item 9).
func TestTheFirstDocumentOnAFreshStoreHasThisNodesOwnRecord(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	st := openDir(t, cfg.Store.Dir.Path)
	held := &heldOwnRecord{Store: st, key: fleet.NodeKey("vps-a"), release: make(chan struct{}), entered: make(chan struct{})}
	n := startNodeWithStore(t, cfg, held)

	// While the record's write is held, the node must not serve a document without
	// itself: it answers 503 draining, or (the defect) a document missing vps-a. Nothing
	// the node does says "the first pass waits": the window is a second from the moment
	// the write is held (the defect served within a few 40 ms passes).
	select {
	case <-held.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not write its record")
	}
	nodetest.Throughout(t, time.Second, 20*time.Millisecond, "no document while the own record is unwritten", func() bool {
		resp, body := n.Get("/v1/ingress/routes", testIngressToken)
		if resp.StatusCode == http.StatusOK {
			t.Logf("served a document while its own record was unwritten (api nodes %v): %s", apiNodes(t, body), body)
			return false
		}
		return true
	})
	close(held.release)
	n.WaitReady()
	resp, body := n.Get("/v1/ingress/routes", testIngressToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("routes after ready: %d %s", resp.StatusCode, body)
	}
	if got := apiNodes(t, body); len(got) != 1 || got[0] != "vps-a" {
		t.Fatalf("the first document after ready: api upstreams %v, want [vps-a]", got)
	}
}
