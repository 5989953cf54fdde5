package httpapi_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/store"
)

// TestAnObjectTooLargeToReadIsSkippedNotFatal: an object above store.MaxObjectSize
// (corrupt or hostile: nothing the fleet writes comes near) is not read; the pass skips
// it and reports it like a malformed object, and the rest of the fleet keeps routing.
// Before, the pass read it whole (a 1 GiB object exhausted every node's memory) and,
// below that, routed it.
func TestAnObjectTooLargeToReadIsSkippedNotFatal(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	testnode.SeedFleet(t, n.St, "shop")
	n.WaitReady()
	testnode.WaitSeeded(t, n)

	// A valid application padded past the limit, written behind the store's back (its
	// Put refuses it), then announced so the pass reads apps/.
	pad := bytes.Repeat([]byte("x"), store.MaxObjectSize)
	huge := append(append([]byte(`{"name":"huge","account":"acme","placement":["vps-a"],"pad":"`), pad...), `"}`...)
	if err := os.WriteFile(filepath.Join(n.Cfg.Store.Dir.Path, "apps", "huge.json"), huge, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.BumpSerial(t.Context(), n.St); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, 5*time.Second, "apps/huge.json reported skipped", func() bool {
		_, b := n.Get("/v1/status", testnode.AdminToken)
		return strings.Contains(string(b), `"object":"apps/huge.json","reason":"not read: larger than`)
	})
	if hosts := strings.Join(testnode.HostsOf(testnode.RoutesDoc(t, n)), ","); hosts != "shop.apps.example.com" {
		t.Errorf("hosts %s, want shop alone (huge skipped, shop kept)", hosts)
	}
}
