package reconcile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
)

func TestABurstOfChangesPublishesAtMostOncePerWindow(t *testing.T) {
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Reconcile.Interval = ptypes.Duration(time.Hour) // only kicks publish
	const window = 400 * time.Millisecond
	cfg.Reconcile.PublishWindow = ptypes.Duration(window)
	n := testnode.Start(t, cfg)
	n.WaitReady()
	published := func() int { return strings.Count(n.Logs.String(), "published routing document") }
	before, passes := published(), n.Passes()
	n.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	nodetest.WaitFor(t, 2*time.Second, "the app published", func() bool { return published() > before })
	// A quiet spell, made by the node's own window: a write that changes no document (a
	// token) kicks a pass, which (as any pass after the app's) waits for the end of the
	// window after the app's publish, and publishes nothing.
	n.Must(201, "POST", "/v1/tokens", testnode.AdminToken, `{"account":"acme","app":"shop","roles":["instance"]}`)
	nodetest.WaitFor(t, 5*time.Second, "the pass after the app's, at the end of the window", func() bool { return n.Passes() >= passes+2 })
	if published() != before+1 {
		t.Fatalf("%d publishes since the app's write, want 1: the token's pass published, no quiet spell", published()-before)
	}

	// A lone change after a quiet spell publishes at once.
	before, start := published(), time.Now()
	n.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, `{"port":24000,"ready":true}`)
	nodetest.WaitFor(t, 2*time.Second, "the lone change published", func() bool { return published() > before })
	lone := time.Since(start)

	// Churn: readiness toggled as fast as the API takes it, for ~2 s.
	before, start = published(), time.Now()
	ready := false
	for i := 0; time.Since(start) < 2*time.Second; i++ {
		ready = i%2 == 0
		n.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"ready":%v}`, ready))
	}
	churn := time.Since(start)
	// The trailing publish of the burst: the served document has the last change.
	nodetest.WaitFor(t, 5*time.Second, fmt.Sprintf("the last change (ready=%v) published", ready), func() bool {
		return (len(testnode.UpstreamsOf(t, n, "shop.apps.example.com")) > 0) == ready
	})
	got := published() - before
	limit := int(churn/window) + 2
	if got > limit {
		t.Fatalf("%d publishes during %s of churn, want at most %d (one per %s window)", got, churn, limit, window)
	}
	if got < 2 {
		t.Fatalf("%d publishes during churn: the burst's changes were not published", got)
	}
	if lone > time.Second {
		t.Fatalf("a lone change after a quiet spell took %s to publish", lone)
	}
	t.Logf("lone change published in %s; %d publishes in %s of churn", lone, got, churn)
}
