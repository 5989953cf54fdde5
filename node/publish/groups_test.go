package publish_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/fleet"
)

// newGroupNode is testnode.GroupNode's fleet (testnode.SeedGroups: shop in the default
// group, blog and back in eu-1 through eu1.example.com, shop.example.org's path api to
// back, all on vps-b) under a node without a listener or a loop (testnode.Stepped),
// after its first heartbeat and pass.
func newGroupNode(t *testing.T) *testnode.Stepped {
	t.Helper()
	cfg := testnode.GroupConfig(t)
	testnode.SeedGroups(t, testnode.OpenDir(t, cfg.Store.Dir.Path))
	n := testnode.NewStepped(t, cfg, nil)
	n.Tick()
	return n
}

// TestGroupQueryServesOnlyThatGroupsHostsPlusWhatTheyNeed: ?group=default serves
// shop's hosts, the API apex and back's route (a prefix of shop's targets it) but not
// blog; ?group=eu-1 serves blog and back; no group serves all; each group has its own
// revision. A group's Traefik configuration (no router for another group's host, the
// services its prefixes target, the API apex) is render's
// TestGroupCarriesTheServicesOfItsCrossGroupPrefixesButNotTheirHosts.
func TestGroupQueryServesOnlyThatGroupsHostsPlusWhatTheyNeed(t *testing.T) {
	t.Parallel()
	n := newGroupNode(t)
	hosts := func(q string) ([]string, *http.Response) {
		rec := n.Get("/v1/ingress/routes"+q, testnode.IngressToken)
		if rec.Code != 200 {
			t.Fatalf("routes%s: %d %s", q, rec.Code, rec.Body)
		}
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		if m["api"] == nil {
			t.Errorf("routes%s: no API apex (it is in every group)", q)
		}
		return testnode.HostsOf(m), rec.Result()
	}
	all, rAll := hosts("")
	def, rDef := hosts("?group=default")
	eu, rEU := hosts("?group=eu-1")
	both, _ := hosts("?group=eu-1,default")
	if strings.Join(all, " ") != "back.eu1.example.com blog.eu1.example.com shop.apps.example.com shop.example.org" ||
		strings.Join(both, " ") != strings.Join(all, " ") {
		t.Fatalf("every group: %v; both groups: %v", all, both)
	}
	if strings.Join(def, " ") != "back.eu1.example.com shop.apps.example.com shop.example.org" {
		t.Errorf("group default: %v (want shop's hosts and back, the target of its prefix)", def)
	}
	if strings.Join(eu, " ") != "back.eu1.example.com blog.eu1.example.com" {
		t.Errorf("group eu-1: %v", eu)
	}
	revs := map[string]bool{rAll.Header.Get("X-Scafo-Revision"): true, rDef.Header.Get("X-Scafo-Revision"): true, rEU.Header.Get("X-Scafo-Revision"): true}
	if len(revs) != 3 || rDef.Header.Get("X-Scafo-Serial") == "" {
		t.Errorf("revisions %v: want three different ones; serial %q", revs, rDef.Header.Get("X-Scafo-Serial"))
	}

}

// TestAChangeInOneGroupLeavesAnotherGroupsPollIdentical: a change to blog (eu-1: a new port)
// moves eu-1's ETag and revision and leaves default's, and a long-poll of default
// parked on its ETag does not wake for it.
func TestAChangeInOneGroupLeavesAnotherGroupsPollIdentical(t *testing.T) {
	t.Parallel()
	n := newGroupNode(t)
	rDef := n.Get("/v1/ingress/traefik?group=default", testnode.IngressToken)
	etagDef, etagEU := rDef.Header().Get("ETag"), n.Get("/v1/ingress/traefik?group=eu-1", testnode.IngressToken).Header().Get("ETag")

	parked := make(chan int, 1)
	go func() {
		parked <- n.Get("/v1/ingress/traefik?group=default&wait=1500ms", testnode.IngressToken, "If-None-Match", etagDef).Code
	}()
	nodetest.WaitFor(t, 5*time.Second, "the long-poll of default parked", func() bool {
		return n.Metric("scafo_longpolls_parked 1")
	})
	// blog (eu-1) moves to another port on vps-b; shop and back stay where they are.
	nodetest.Put(t, n.St, "nodes/vps-b.json", fleet.NodeRecord{Name: "vps-b", Address: "10.83.0.2", APIPort: 7400, Seen: time.Now().UTC(),
		Instances: map[string]fleet.Instance{"shop": {Port: 24001, Ready: true}, "blog": {Port: 24999, Ready: true}, "back": {Port: 24003, Ready: true}}})
	n.MustPass()
	if n.Get("/v1/ingress/traefik?group=eu-1", testnode.IngressToken).Header().Get("ETag") == etagEU {
		t.Fatal("eu-1 did not change")
	}
	r2 := n.Get("/v1/ingress/traefik?group=default", testnode.IngressToken)
	if r2.Header().Get("ETag") != etagDef || r2.Body.String() != rDef.Body.String() || r2.Header().Get("X-Scafo-Revision") != rDef.Header().Get("X-Scafo-Revision") {
		t.Errorf("group default changed with a change in eu-1: etag %s → %s", etagDef, r2.Header().Get("ETag"))
	}
	if code := <-parked; code != http.StatusNotModified {
		t.Errorf("a long-poll of default answered %d to a change in eu-1, want 304 at the end of its wait", code)
	}
}

// TestGroupValidation: a known group without routes answers the API apex and says so;
// status lists the groups. (Malformed ?group= values are 400: routing's TestParseGroups
// and httpapi's TestABadPollIsAJSONErrorNamingTheField; an unknown group is 404 naming
// it, never an empty configuration: node's TestWireGoldens error-404-group, and a list
// with one unknown group is TestKnownGroupsTravelOnTheSnapshot's.)
func TestGroupValidation(t *testing.T) {
	t.Parallel()
	n := newGroupNode(t)
	// A group some application names, with no routes yet (no platform domain, no claim).
	nodetest.Put(t, n.St, "apps/lone.json", fleet.App{Name: "lone", Account: "acme", Placement: []string{"vps-b"}, Ingress: &fleet.Ingress{Group: "ap-1"}})
	n.MustPass()
	rec := n.Get("/v1/ingress/routes?group=ap-1", testnode.IngressToken)
	var doc map[string]any
	json.Unmarshal(rec.Body.Bytes(), &doc)
	if len(testnode.HostsOf(doc)) != 0 || doc["api"] == nil || rec.Header().Get("X-Scafo-Group-Empty") != "ap-1" {
		t.Errorf("empty group ap-1: hosts %v, api %v, X-Scafo-Group-Empty %q; want no routes, the API, and the header",
			testnode.HostsOf(doc), doc["api"] != nil, rec.Header().Get("X-Scafo-Group-Empty"))
	}
	if h := n.Get("/v1/ingress/traefik?group=eu-1", testnode.IngressToken).Header().Get("X-Scafo-Group-Empty"); h != "" {
		t.Errorf("eu-1 has routes, yet X-Scafo-Group-Empty: %q", h)
	}

	var st api.Status
	if err := json.Unmarshal(n.Get("/v1/status", testnode.IngressToken).Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	got := map[string]api.Group{}
	for _, g := range st.Groups {
		got[g.Name] = g
	}
	rh := n.Get("/v1/ingress/routes?group=eu-1", testnode.IngressToken)
	if got["default"].Routes != 2 || got["eu-1"].Routes != 2 || got["ap-1"].Routes != 0 || len(st.Groups) != 3 ||
		got["eu-1"].Revision != rh.Header().Get("X-Scafo-Revision") {
		t.Errorf("status groups %+v; eu-1 revision served %s (%d bytes)", st.Groups, rh.Header().Get("X-Scafo-Revision"), rh.Body.Len())
	}
}

// TestAppIngressGroupIsValidated: the admin sets ingress.group; a malformed group is
// 400 naming ingress.group and writes nothing.
func TestAppIngressGroupIsValidated(t *testing.T) {
	t.Parallel()
	n := newGroupNode(t)
	for _, body := range []string{
		`{"account":"acme","placement":[],"ingress":{"group":""}}`,
		`{"account":"acme","placement":[],"ingress":{"group":"EU-1"}}`,
		`{"account":"acme","placement":[],"ingress":{"group":"eu 1"}}`,
		`{"account":"acme","placement":[],"ingress":{"group":"` + strings.Repeat("g", 64) + `"}}`,
		`{"account":"acme","placement":[],"ingress":{"group":"eu-1","extra":1}}`,
		`{"account":"acme","placement":[],"ingress":{}}`,
	} {
		rec := n.Do("PUT", "/v1/apps/cart", testnode.AdminToken, body)
		if b := rec.Body.String(); rec.Code != 400 || !strings.Contains(b, "group") && !strings.Contains(b, "extra") {
			t.Errorf("PUT %s: %d %s, want 400 naming ingress.group", body, rec.Code, b)
		}
	}
	if rec := n.Get("/v1/apps/cart", testnode.AdminToken); rec.Code != 404 {
		t.Errorf("a refused PUT wrote the application: GET %d", rec.Code)
	}
	b := n.Must(201, "PUT", "/v1/apps/cart", testnode.AdminToken, `{"account":"acme","placement":[],"ingress":{"group":"eu-1"}}`)
	if !strings.Contains(string(b), `"ingress":{"group":"eu-1"}`) {
		t.Errorf("stored application: %s", b)
	}
}
