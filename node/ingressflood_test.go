package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

// Issue 25 item 2: a flood of made-up ingress names must not hide a real ingress, nor
// let ?wait=applied say "applied". The store holds more reports than a view reads
// (viewMax lowered to 4 here; 4 096 in production), all made up and named to sort
// first ("0000"…), written two days ago: the view reads the most recently written, so
// the real, lagging ingress (named to sort last) is in it; the view says it is
// partial, in status and in a write's wait, which answers 202, not 200; and the
// made-up reports nobody has written for forgetAfter are deleted (those past the cut
// by their LIST time, without a read), after which the view is whole again.
func TestAFloodOfMadeUpIngressNamesHidesNoRealOne(t *testing.T) {
	t.Parallel()
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	st, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	seed := func(name string, at time.Time) {
		t.Helper()
		b, _ := json.Marshal(ingress.Report{Name: name, Kind: "plugin", Node: "vps-b", Seen: at.UTC()})
		key := ingress.Prefix + name + ".json"
		if _, err := st.Put(context.Background(), key, b, store.Condition{}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(cfg.Store.Dir.Path, filepath.FromSlash(key)), at, at); err != nil {
			t.Fatal(err)
		}
	}
	// A live flood (written ten minutes ago, within forgetAfter), and older junk.
	for i := range 6 {
		seed(fmt.Sprintf("%04d", i), time.Now().Add(-10*time.Minute))
	}
	for i := 100; i < 104; i++ {
		seed(fmt.Sprintf("%04d", i), time.Now().Add(-48*time.Hour))
	}
	n := startNodeWithStore(t, cfg, st, func(s *node.Server) { s.Ingresses().ViewMax = 4 })
	n.WaitReady()
	// The real ingress polls another node: n knows it only through the store's view.
	stB, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	nB := startNodeWithStore(t, reportsConfig(t, "vps-b", cfg.Store.Dir.Path), stB)
	nB.WaitReady()
	p := startFakePlugin(t, nB, "zz-real")
	// In key order the four "0000"… reports would fill the view: zz-real would never be seen.
	waitFor(t, 10*time.Second, "zz-real in the fleet's view", func() bool { return ingressesOf(t, n)["zz-real"].State == "current" })
	p.frozen.Store(true) // it lags from now on: no write can be applied by it

	if s := statusOf(t, n); !strings.Contains(s.IngressesError, "partial view") {
		t.Errorf("status with %d reports and a view of 4: error %q, want it to say the view is partial", 11, s.IngressesError)
	}
	resp, body := n.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=1500ms", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), "partial view") {
		t.Errorf("a write waiting on a partial view: %d %s, want 202 saying the view is partial", resp.StatusCode, body)
	}
	if strings.Contains(string(body), `"applied":true`) {
		t.Errorf("applied on a partial view: %s", body)
	}

	// The junk nobody has written for forgetAfter is deleted, past the cut by its LIST
	// time (never read); the live flood stays (it is younger than forgetAfter).
	waitFor(t, 10*time.Second, "the two-day-old reports deleted", func() bool {
		entries, err := st.List(context.Background(), ingress.Prefix)
		if err != nil {
			return false
		}
		for _, e := range entries {
			var i int
			if _, err := fmt.Sscanf(e.Key, ingress.Prefix+"%04d.json", &i); err == nil && i >= 100 {
				return false
			}
		}
		return true
	})
}
