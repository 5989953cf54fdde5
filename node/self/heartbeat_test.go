package self_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

// nodeWritesFail is a dir store that refuses writes of node records (a permission
// lost on nodes/, say) and serves everything else.
type nodeWritesFail struct{ store.Store }

func (s nodeWritesFail) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	if strings.HasPrefix(key, "nodes/") {
		return "", fmt.Errorf("put %s: access denied: %w", key, store.ErrUnavailable)
	}
	return s.Store.Put(ctx, key, v, c)
}

// TestStatusSaysSoWhenHeartbeatsFail: reads work, so the reconcile loop is happy, but
// this node's record cannot be written and peers will drop it at the TTL; /v1/status
// must not call that store reachable.
func TestStatusSaysSoWhenHeartbeatsFail(t *testing.T) {
	t.Parallel()
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	d, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	n := testnode.StartWithStore(t, cfg, nodeWritesFail{d})
	nodetest.WaitFor(t, 5*time.Second, "ready", func() bool {
		resp, _ := n.Get("/v1/readyz", "")
		return resp.StatusCode == 200
	})
	var st api.Status
	nodetest.WaitFor(t, 5*time.Second, "status reports the failing heartbeat", func() bool {
		_, b := n.Get("/v1/status", testnode.IngressToken)
		json.Unmarshal(b, &st)
		return st.Store.HeartbeatError != ""
	})
	if st.Store.Reachable || !strings.Contains(st.Store.HeartbeatError, "access denied") {
		t.Fatalf("store status %+v: want unreachable, naming the heartbeat failure", st.Store)
	}
}
