package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

// The view of the fleet's ingress reports, bounded in size (ViewMax) and time
// (ViewTimeout, Now): these stay in the root package because they set the ingress
// book's fields before Run (n.Srv.Ingresses()). The rest are node/ingress's.

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
	p.Frozen.Store(true) // it lags from now on: no write can be applied by it

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

// More reports than one LIST answers (S3 pages at 1 000 keys) are all read, once: a
// later status lists every page and GETs none of them.
func TestIngressReportsPastOneListPage(t *testing.T) {
	t.Parallel()
	onReportBackends(t, testIngressReportsPastOneListPage)
}

func testIngressReportsPastOneListPage(t *testing.T, be reportBackend) {
	const reports = 1001
	st := be.Open(t)
	seen := time.Now().UTC()
	for i := range reports {
		b, _ := json.Marshal(ingress.Report{Name: fmt.Sprintf("edge-%04d", i), Kind: api.KindPlugin, Node: "vps-b", Serial: 1, Seen: seen})
		if _, err := st.Put(t.Context(), fmt.Sprintf("%sedge-%04d.json", ingress.Prefix, i), b, store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	rc, httpOf := countedReports(t, be)
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	cfg.Ingresses.LostAfter = ptypes.Duration(time.Minute)
	// What is counted is requests, not time: on a loaded machine 1 001 cold GETs may
	// take longer than the 2 s a read may take in production (the view would be
	// partial), and the view's age is the test's to move, not a sleep's.
	n := newStepNode(t, cfg, rc)
	now := time.Now()
	n.Srv.Ingresses().ViewTimeout = 2 * time.Minute
	n.Srv.Ingresses().Now = func() time.Time { return now } // no loop runs: the test's clock alone
	n.start()
	for i, want := range []map[string]int{{"list": 1, "get": reports}, {"list": 1}} {
		if i > 0 {
			now = now.Add(ingress.StatusViewMaxAge + time.Millisecond) // the view is now too old to reuse
		}
		var s api.Status
		d, h := costOf(rc, httpOf, func() {
			if err := json.Unmarshal(n.must(http.StatusOK, "GET", "/v1/status", testAdminToken, ""), &s); err != nil {
				t.Fatal(err)
			}
		})
		if s.IngressesError != "" || len(s.Ingresses) != reports || s.Ingresses[reports-1].Name != fmt.Sprintf("edge-%04d", reports-1) {
			t.Fatalf("status %d: %d ingresses, error %q; want the %d reports", i, len(s.Ingresses), s.IngressesError, reports)
		}
		if !maps.Equal(d, want) {
			t.Errorf("status %d: store calls on ingresses/ %v, want %v", i, d, want)
		}
		// On S3 a LIST of 1 001 keys is two requests (pages of 1 000).
		if be.Name == "s3" && (h.ByMethod["GET"] != int64(2+want["get"]) || h.Requests != h.ByMethod["GET"] || h.Failed != 0) {
			t.Errorf("status %d: HTTP %+v, want 2 LIST pages and %d GETs", i, h, want["get"])
		}
		t.Logf("%s: status %d of %d reports: store calls %v, HTTP %d requests", be.Name, i, reports, d, h.Requests)
	}
}
