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

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/store"
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
	st := openDir(t, cfg.Store.Dir.Path)
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
	n := testnode.NewStepped(t, cfg, st)
	n.Srv.Ingresses().ViewMax = 4
	n.Tick()
	// The real ingress polls another node: n knows it only through the store's view.
	nB := testnode.NewStepped(t, reportsConfig(t, "vps-b", cfg.Store.Dir.Path), openDir(t, cfg.Store.Dir.Path))
	nB.Tick()
	n.MustPass()
	real := &pluginPolls{name: "zz-real"}
	real.poll(nB) // takes the document
	real.poll(nB) // reports it applied
	nB.Steps.FlushIngresses(context.Background(), time.Now())
	// In key order the four "0000"… reports would fill the view: zz-real would never be seen.
	if in := n.Status().Ingresses; !hasCurrent(in, "zz-real") {
		t.Fatalf("zz-real is not current in the fleet's view: %+v", in)
	}
	// zz-real lags from now on (it polls no more): no write can be applied by it.
	if s := n.Status(); !strings.Contains(s.IngressesError, "partial view") {
		t.Errorf("status with %d reports and a view of 4: error %q, want it to say the view is partial", 11, s.IngressesError)
	}
	rec := n.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=10ms", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), "partial view") {
		t.Errorf("a write waiting on a partial view: %d %s, want 202 saying the view is partial", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), `"applied":true`) {
		t.Errorf("applied on a partial view: %s", rec.Body)
	}

	// The junk nobody has written for forgetAfter is deleted, past the cut by its LIST
	// time (never read); the live flood stays (it is younger than forgetAfter).
	n.Steps.FlushIngresses(context.Background(), time.Now())
	entries, err := st.List(context.Background(), ingress.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, e := range entries {
		var i int
		if _, err := fmt.Sscanf(e.Key, ingress.Prefix+"%04d.json", &i); err == nil && i >= 100 {
			t.Errorf("%s, two days old, not deleted", e.Key)
		} else if err == nil {
			live++
		}
	}
	if live != 6 {
		t.Errorf("%d of the 6 live made-up reports kept", live)
	}
}

// pluginPolls polls a node as the provider plugin does: it reports what it took on its
// previous poll.
type pluginPolls struct {
	name, serial, epoch, revision string
}

func (p *pluginPolls) poll(n *testnode.Stepped) {
	hdr := []string{api.HeaderIngress, p.name, api.HeaderIngressKind, api.KindPlugin}
	if p.revision != "" {
		hdr = append(hdr, api.HeaderAppliedSerial, p.serial, api.HeaderAppliedEpoch, p.epoch, api.HeaderAppliedRevision, p.revision)
	}
	rec := n.Get("/v1/ingress/traefik", testIngressToken, hdr...)
	if rec.Code == http.StatusOK {
		p.serial, p.epoch, p.revision = rec.Header().Get(api.HeaderSerial), rec.Header().Get(api.HeaderEpoch), rec.Header().Get(api.HeaderRevision)
	}
}

func hasCurrent(ins []api.Ingress, name string) bool {
	for _, in := range ins {
		if in.Name == name && in.State == "current" {
			return true
		}
	}
	return false
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
	n := testnode.NewStepped(t, cfg, rc)
	now := time.Now()
	n.Srv.Ingresses().ViewTimeout = 2 * time.Minute
	n.Srv.Ingresses().Now = func() time.Time { return now } // no loop runs: the test's clock alone
	n.Tick()
	for i, want := range []map[string]int{{"list": 1, "get": reports}, {"list": 1}} {
		if i > 0 {
			now = now.Add(ingress.StatusViewMaxAge + time.Millisecond) // the view is now too old to reuse
		}
		var s api.Status
		d, h := costOf(rc, httpOf, func() { s = n.Status() })
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
