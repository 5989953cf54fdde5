package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/store"
)

// storeSerial reads the store's serial object: counter and epoch.
func storeSerial(t *testing.T, st store.Store) (uint64, string) {
	t.Helper()
	o, err := st.Get(context.Background(), store.SerialKey)
	if err != nil {
		t.Fatal(err)
	}
	n, e, err := store.ParseSerialEpoch(o.Value)
	if err != nil {
		t.Fatal(err)
	}
	return n, e
}

// TestRoutingAnswersCarryTheStoreSerial: every 200 and 304 of the routing endpoints
// names the store serial (and epoch) its document was derived from, in headers; a pass
// that derives the same revision at a later serial moves the header, not the body.
func TestRoutingAnswersCarryTheStoreSerial(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	testnode.SeedFleet(t, n.St, "shop")
	n.WaitReady()
	testnode.WaitSeeded(t, n)
	paths := []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/ingress/traefik?prefer=self"}
	check := func(what string, want uint64, epoch string) map[string]string {
		t.Helper()
		etags := map[string]string{}
		nodetest.WaitFor(t, 20*time.Second, what, func() bool { // a deadline, not a pace: a loaded machine's passes are slow
			for _, p := range paths {
				r, _ := n.Get(p, testnode.IngressToken)
				if r.StatusCode != http.StatusOK || r.Header.Get("X-Scafo-Serial") != strconv.FormatUint(want, 10) {
					return false
				}
				etags[p] = r.Header.Get("ETag")
			}
			return true
		})
		for _, p := range paths {
			r, b := n.Get(p, testnode.IngressToken)
			if got := r.Header.Get("X-Scafo-Epoch"); got != epoch || epoch == "" {
				t.Errorf("%s: X-Scafo-Epoch %q, want the store's %q", p, got, epoch)
			}
			if strings.Contains(string(b), strconv.FormatUint(want, 10)+" "+epoch) {
				t.Errorf("%s: the serial is in the body", p)
			}
			r304, _ := n.Get(p, testnode.IngressToken, "If-None-Match", etags[p])
			if r304.StatusCode != http.StatusNotModified || r304.Header.Get("X-Scafo-Serial") != strconv.FormatUint(want, 10) ||
				r304.Header.Get("X-Scafo-Epoch") != epoch {
				t.Errorf("%s: 304 answer %d with serial %q epoch %q, want %d %q", p, r304.StatusCode,
					r304.Header.Get("X-Scafo-Serial"), r304.Header.Get("X-Scafo-Epoch"), want, epoch)
			}
		}
		return etags
	}
	serial, epoch := storeSerial(t, n.St)
	before := check("answers at the store's serial", serial, epoch)

	// A bump that changes no routing content: same revision, same bodies, later serial.
	if _, err := store.BumpSerial(context.Background(), n.St); err != nil {
		t.Fatal(err)
	}
	after := check("answers at the bumped serial", serial+1, epoch)
	for _, p := range paths {
		if before[p] != after[p] {
			t.Errorf("%s: ETag moved from %s to %s on a bump that changed nothing", p, before[p], after[p])
		}
	}
}
