package fleetwrite_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetwrite"
)

func TestPathMapEndToEndWithinOneInterval(t *testing.T) {
	t.Parallel()
	// Set the fleet up on the suite's short interval, then run the same node (same
	// store, same state) again with an interval far longer than the bound below: only
	// the pass the write kicks (publish-on-write) can publish the map in time.
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	setup := testnode.Start(t, cfg)
	setup.WaitReady()
	testnode.FleetOf(t, setup, "tito-classic", "tito-go")
	setup.Stop()

	const interval, bound = time.Minute, 2 * time.Second
	cfg.Reconcile.Interval = ptypes.Duration(interval)
	n := testnode.Start(t, cfg)
	n.WaitReady()
	before := testnode.RoutesDoc(t, n)
	if hosts := testnode.HostsOf(before); len(hosts) != 3 {
		t.Fatalf("after the restart the document routes %v, want the fleet's 3 hosts", hosts)
	}
	start := time.Now()
	n.Must(200, "PUT", testnode.PathsURL, testnode.AdminToken, `{"paths":{"paulca":"tito-go.apps.example.com"}}`)
	nodetest.WaitFor(t, bound, fmt.Sprintf("map published with reconcile.interval %s (only the write's kick can publish it in time)", interval), func() bool {
		p := testnode.PathsOf(t, n, "ti.to")
		return p["paulca"] == "tito-go.apps.example.com"
	})
	el := time.Since(start)
	if after := testnode.RoutesDoc(t, n); after["revision"] == before["revision"] {
		t.Fatalf("the map is routed but the revision %v did not move", after["revision"])
	}
	_, tr := n.Get("/v1/ingress/traefik", testnode.IngressToken)
	if !strings.Contains(string(tr), "Host(`ti.to`) && (Path(`/paulca`) || PathPrefix(`/paulca/`)") {
		t.Fatalf("no segment-exact router in the Traefik config:\n%s", tr)
	}
	t.Logf("PUT acknowledged → new revision published in %s (reconcile.interval %s)", el.Round(time.Millisecond), interval)
}

func TestPathsBodyWithoutWrapperRefused(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	n.Must(200, "PUT", testnode.PathsURL, testnode.AdminToken, `{"paths":{"paulca":"tito-go.apps.example.com"}}`)
	nodetest.WaitFor(t, 5*time.Second, "map published", func() bool {
		return testnode.PathsOf(t, n, "ti.to")["paulca"] == "tito-go.apps.example.com"
	})
	before := testnode.StoreBytes(t, n.Cfg.Store.Dir.Path)
	for _, tc := range []struct{ name, body, want string }{
		{"bare map", `{"paulca":"tito-go.apps.example.com"}`, "paulca"},
		{"typo", `{"path":{}}`, `"path"`},
		{"absent", `{}`, `"paths"`},
		{"null", `{"paths":null}`, `"paths"`},
		{"not an object", `{"paths":["a"]}`, "paths"},
		{"trailing", `{"paths":{}} {}`, "trailing"},
		{"slash prefix", `{"paths":{"/paulca":"tito-go.apps.example.com"}}`, `paths["/paulca"]`},
		{"dotdot", `{"paths":{"..":"tito-go.apps.example.com"}}`, `paths[".."]`},
		{"upper prefix", `{"paths":{"Paulca":"tito-go.apps.example.com"}}`, `paths["Paulca"]`},
		{"bad target", `{"paths":{"paulca":"tito go"}}`, `paths["paulca"] target`},
		{"empty", ``, "body"},
		{"upper-case key", `{"PATHS":{}}`, `"PATHS"`},
		{"long-s key", `{"pathſ":{}}`, `"pathſ"`},
		{"duplicate key", `{"paths":{"paulca":"tito-go.apps.example.com"},"paths":{}}`, "duplicate key"},
	} {
		resp, b := n.Do("PUT", testnode.PathsURL, testnode.AdminToken, tc.body)
		var e api.Error
		json.Unmarshal(b, &e)
		if resp.StatusCode != 400 || !strings.Contains(e.Error+" "+e.Detail, tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.name, resp.StatusCode, b, tc.want)
		}
	}
	if after := testnode.StoreBytes(t, n.Cfg.Store.Dir.Path); !maps.Equal(before, after) {
		t.Fatal("a refused request changed the store")
	}
	if p := testnode.PathsOf(t, n, "ti.to"); p["paulca"] != "tito-go.apps.example.com" {
		t.Fatalf("previous map not intact: %v", p)
	}
}

func TestPathMapAboveCapRefused(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	m := map[string]string{}
	for i := range 10001 {
		m[fmt.Sprintf("p%05d", i)] = "tito-go.apps.example.com"
	}
	b, _ := json.Marshal(map[string]any{"paths": m})
	resp, body := n.Do("PUT", testnode.PathsURL, testnode.AdminToken, string(b))
	if resp.StatusCode != 400 || !strings.Contains(string(body), "10000") {
		t.Fatalf("10001 prefixes: %d %s", resp.StatusCode, body)
	}
}

func TestStaleIfMatchIs412AndWritesNothing(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	r1, _ := n.Do("GET", testnode.PathsURL, testnode.AdminToken, "")
	old := r1.Header.Get("ETag")
	n.Must(200, "PUT", testnode.PathsURL, testnode.AdminToken, `{"paths":{"a":"tito-go.apps.example.com"}}`, "If-Match", old)
	before := testnode.StoreBytes(t, n.Cfg.Store.Dir.Path)
	n.Must(412, "PUT", testnode.PathsURL, testnode.AdminToken, `{"paths":{"b":"tito-go.apps.example.com"}}`, "If-Match", old)
	if !maps.Equal(before, testnode.StoreBytes(t, n.Cfg.Store.Dir.Path)) {
		t.Fatal("a 412 changed the store")
	}
}

func TestConcurrentCASPublishesLoseNothing(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	type write struct{ from, to string }
	var (
		mu       sync.Mutex
		accepted []write
		conflict int
	)
	// 50 writers, racing (up to racing at once: the herd a real publisher's backoff
	// keeps to a few) on every version of the claim, where a lost update would show;
	// each lands 4 writes, so the chain checked below is 200 accepted writes long and
	// some thousand 412s are retried on the way. Every write republishes the whole,
	// growing map, so the cost grows with the square of the chain, and a longer chain
	// repeats the same race on bigger bodies (the map's cap is TestPathMapAboveCapRefused's).
	const workers, each, racing = 50, 4, 8
	attempts := make(chan struct{}, racing)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				mine := fmt.Sprintf("g%02d-%02d", g, i)
				for {
					attempts <- struct{}{}
					resp, b := n.Do("GET", testnode.PathsURL, testnode.AdminToken, "")
					var cur struct{ Paths map[string]string }
					json.Unmarshal(b, &cur)
					etag := resp.Header.Get("ETag")
					cur.Paths[mine] = "tito-go.apps.example.com"
					body, _ := json.Marshal(map[string]any{"paths": cur.Paths})
					resp, _ = n.Do("PUT", testnode.PathsURL, testnode.AdminToken, string(body), "If-Match", etag)
					<-attempts
					mu.Lock()
					if resp.StatusCode == 200 {
						accepted = append(accepted, write{etag, resp.Header.Get("ETag")})
						mu.Unlock()
						break
					}
					conflict++
					mu.Unlock()
					if resp.StatusCode != 412 {
						t.Errorf("unexpected %d", resp.StatusCode)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	_, b := n.Do("GET", testnode.PathsURL, testnode.AdminToken, "")
	var final struct{ Paths map[string]string }
	json.Unmarshal(b, &final)
	if len(accepted) != workers*each || len(final.Paths) != workers*each {
		t.Fatalf("accepted %d writes, final map has %d prefixes, want %d each", len(accepted), len(final.Paths), workers*each)
	}
	// Every accepted write was made on the state the previous one produced: the
	// accepted writes form one chain of etags, none forked (no lost update).
	next := map[string]int{}
	for _, w := range accepted {
		next[w.from]++
	}
	for from, c := range next {
		if c > 1 {
			t.Fatalf("%d accepted writes were made on the same version %s", c, from)
		}
	}
	t.Logf("%d accepted CAS publishes, %d conflicts (412) retried", len(accepted), conflict)
}

func TestNoOpRepublishWritesNothing(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	body := `{"paths":{"paulca":"tito-go.apps.example.com","bob":"tito-go.apps.example.com"}}`
	n.Must(200, "PUT", testnode.PathsURL, testnode.AdminToken, body)
	_, audit1 := n.Do("GET", "/v1/audit", testnode.AdminToken, "")
	serial1, _ := os.ReadFile(filepath.Join(n.Cfg.Store.Dir.Path, "serial"))
	r, _ := n.Do("PUT", testnode.PathsURL, testnode.AdminToken, `{"paths":{"bob":"tito-go.apps.example.com","paulca":"tito-go.apps.example.com"}}`)
	if r.StatusCode != 200 || r.Header.Get("ETag") == "" {
		t.Fatalf("republish: %d", r.StatusCode)
	}
	_, audit2 := n.Do("GET", "/v1/audit", testnode.AdminToken, "")
	serial2, _ := os.ReadFile(filepath.Join(n.Cfg.Store.Dir.Path, "serial"))
	if !bytes.Equal(audit1, audit2) || !bytes.Equal(serial1, serial2) {
		t.Fatalf("no-op republish moved the audit (%v) or the serial (%s → %s)", !bytes.Equal(audit1, audit2), serial1, serial2)
	}
	var a struct{ Records []fleetwrite.AuditRecord }
	json.Unmarshal(audit2, &a)
	if len(a.Records) == 0 || a.Records[0].Action != "paths.put" || a.Records[0].Prefixes != 2 || a.Records[0].Host != "ti.to" {
		t.Fatalf("newest audit record: %+v", a.Records)
	}
	if strings.Contains(string(audit2), "tito-go.apps.example.com") {
		t.Fatal("the audit log names path targets")
	}
}

func TestAppTokenScopedToItsApplication(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	n.Must(201, "PUT", "/v1/apps/tito-go/domains/go.tito.io", testnode.AdminToken, "")
	var tok struct{ ID, Token string }
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", testnode.AdminToken, `{"account":"acme","app":"tito-go","roles":["publish"]}`), &tok)
	// Its own claim: allowed.
	n.Must(200, "PUT", "/v1/apps/tito-go/domains/go.tito.io/paths", tok.Token, `{"paths":{}}`)
	// Another application's claim: 403 with a reason.
	resp, b := n.Do("PUT", testnode.PathsURL, tok.Token, `{"paths":{}}`)
	if resp.StatusCode != 403 || !strings.Contains(string(b), "scoped to application tito-go") {
		t.Fatalf("app token on another app: %d %s", resp.StatusCode, b)
	}
	// Admin-only endpoints: 403.
	n.Must(403, "PUT", "/v1/apps/tito-go", tok.Token, `{"account":"acme"}`)
	// Control plane: refused outright.
	n.Must(200, "PUT", "/v1/apps/tito-go", testnode.AdminToken, `{"account":"acme","placement":["vps-a"],"controlPlane":true}`)
	resp, b = n.Do("PUT", "/v1/apps/tito-go/domains/go.tito.io/paths", tok.Token, `{"paths":{}}`)
	if resp.StatusCode != 403 || !strings.Contains(string(b), "control") {
		t.Fatalf("app token on the control plane: %d %s", resp.StatusCode, b)
	}
	// An instance token may only name ports from the allocation range.
	var itok struct{ Token string }
	n.Must(200, "PUT", "/v1/apps/tito-go", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", testnode.AdminToken, `{"account":"acme","app":"tito-go","roles":["instance"]}`), &itok)
	resp, b = n.Do("PUT", "/v1/node/instances/tito-go", itok.Token, `{"port":5432,"ready":true}`)
	if resp.StatusCode != 403 || !strings.Contains(string(b), "24000..28999") {
		t.Fatalf("instance token with a port outside the range: %d %s", resp.StatusCode, b)
	}
	n.Must(200, "PUT", "/v1/node/instances/tito-go?force=true", itok.Token, `{"port":24100,"ready":true}`) // nothing serves there: the range is what is tested
	n.Must(401, "PUT", "/v1/apps/tito-go/domains/go.tito.io/paths", itok.Token+"x", `{"paths":{}}`)
	n.Must(200, "PUT", "/v1/apps/tito-go/domains/go.tito.io/paths", itok.Token, `{"paths":{}}`) // publish or instance
	// Revoked: 401.
	n.Must(200, "PUT", "/v1/apps/tito-go", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(200, "DELETE", "/v1/tokens/"+tok.ID, testnode.AdminToken, "")
	n.Must(401, "PUT", "/v1/apps/tito-go/domains/go.tito.io/paths", tok.Token, `{"paths":{}}`)
	if strings.Contains(n.Logs.String(), tok.Token) {
		t.Fatal("an application token appears in the logs")
	}
}

func TestCrossAccountTargetRoutesNothing(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go", "evil@other")
	var ans struct{ Warnings []string }
	json.Unmarshal(n.Must(200, "PUT", testnode.PathsURL, testnode.AdminToken,
		`{"paths":{"paulca":"tito-go.apps.example.com","steal":"evil.apps.example.com","zzz":"nothing.apps.example.com"}}`), &ans)
	// One message whatever the reason: another account's route and a name that
	// routes nothing read the same, so a warning leaks nothing about other tenants.
	if len(ans.Warnings) != 2 ||
		strings.ReplaceAll(ans.Warnings[0], "steal: target evil", "") != strings.ReplaceAll(ans.Warnings[1], "zzz: target nothing", "") {
		t.Fatalf("warnings %v: want two that differ only in the names", ans.Warnings)
	}
	nodetest.WaitFor(t, 2*time.Second, "paulca published", func() bool { return testnode.PathsOf(t, n, "ti.to")["paulca"] != nil })
	if p := testnode.PathsOf(t, n, "ti.to"); p["steal"] != nil {
		t.Fatalf("cross-account prefix routed: %v", p)
	}
	nodetest.WaitFor(t, 2*time.Second, "a log line naming the reason", func() bool {
		l := n.Logs.String()
		return strings.Contains(l, "steal") && strings.Contains(l, "account")
	})
}

func TestClaimsCreateOnlyAndPlatformHostsRefused(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	resp, b := n.Do("PUT", "/v1/apps/tito-go/domains/TI.TO", testnode.AdminToken, "")
	if resp.StatusCode != 409 || !strings.Contains(string(b), "tito-classic") {
		t.Fatalf("claim held by another app: %d %s", resp.StatusCode, b)
	}
	n.Must(200, "PUT", "/v1/apps/tito-classic/domains/ti.to", testnode.AdminToken, "") // idempotent
	for _, h := range []string{"x.apps.example.com", "*.apps.example.com", "a.b.apps.example.com", "ti.to.", "1.2.3.4", "*.*.ti.to", "b%C3%BCcher.de"} {
		resp, b := n.Do("PUT", "/v1/apps/tito-go/domains/"+h, testnode.AdminToken, "")
		if resp.StatusCode != 400 {
			t.Errorf("claim %s: %d %s, want 400", h, resp.StatusCode, b)
		}
	}
	n.Must(201, "PUT", "/v1/apps/tito-go/domains/apps.example.com", testnode.AdminToken, "") // the bare apex may be claimed
	nodetest.WaitFor(t, 2*time.Second, "apex leaves api.hosts", func() bool {
		api, _ := testnode.RoutesDoc(t, n)["api"].(map[string]any)
		return api == nil
	})
	n.Must(405, "POST", "/v1/apps/tito-go", testnode.AdminToken, "")
	n.Must(409, "DELETE", "/v1/apps/tito-go", testnode.AdminToken, "")
}

func TestPortsAreStickyAndQuarantined(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	cfg := testnode.Config(t, "vps-a", storeDir)
	n := testnode.Start(t, cfg)
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/blog", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	var a1, a2 struct{ Port int }
	json.Unmarshal(n.Must(201, "POST", "/v1/node/instances/shop", testnode.AdminToken, ""), &a1)
	json.Unmarshal(n.Must(200, "POST", "/v1/node/instances/shop", testnode.AdminToken, ""), &a2)
	if a1.Port == 0 || a1.Port != a2.Port {
		t.Fatalf("allocation not stable: %d then %d", a1.Port, a2.Port)
	}
	n.Stop()
	n2 := testnode.Start(t, cfg) // same state dir
	n2.WaitReady()
	var a3 struct{ Port int }
	json.Unmarshal(n2.Must(200, "POST", "/v1/node/instances/shop", testnode.AdminToken, ""), &a3)
	if a3.Port != a1.Port {
		t.Fatalf("port changed across restart: %d → %d", a1.Port, a3.Port)
	}
	n2.Must(200, "DELETE", "/v1/node/instances/shop", testnode.AdminToken, "")
	var b1 struct{ Port int }
	json.Unmarshal(n2.Must(201, "POST", "/v1/node/instances/blog", testnode.AdminToken, ""), &b1)
	if b1.Port == a1.Port {
		t.Fatalf("released port %d reallocated to another app inside quarantine", a1.Port)
	}
	resp, b := n2.Do("PUT", "/v1/node/instances/blog", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, a1.Port))
	if resp.StatusCode != 409 || !strings.Contains(string(b), "quarantine") {
		t.Fatalf("explicit quarantined port: %d %s", resp.StatusCode, b)
	}
	n2.Must(400, "PUT", "/v1/node/instances/blog", testnode.AdminToken, `{"port":1}`)                  // ready is required
	n2.Must(400, "PUT", "/v1/node/instances/blog", testnode.AdminToken, `{"port":70000,"ready":true}`) // not a port
	// The node's record reflects the instance within one interval.
	n2.Must(200, "PUT", "/v1/node/instances/blog", testnode.AdminToken, `{"ready":true}`)
	nodetest.WaitFor(t, 2*time.Second, "record shows blog ready", func() bool {
		b, err := os.ReadFile(filepath.Join(storeDir, "nodes", "vps-a.json"))
		return err == nil && strings.Contains(string(b), fmt.Sprintf(`"blog":{"port":%d,"ready":true`, b1.Port))
	})
}

func TestAuditNewestFirst(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	testnode.FleetOf(t, n, "tito-classic", "tito-go")
	var a struct{ Records []fleetwrite.AuditRecord }
	json.Unmarshal(n.Must(200, "GET", "/v1/audit", testnode.AdminToken, ""), &a)
	if len(a.Records) < 3 {
		t.Fatalf("records %v", a.Records)
	}
	if !sort.SliceIsSorted(a.Records, func(i, j int) bool { return a.Records[i].Time.After(a.Records[j].Time) }) {
		t.Fatal("audit not newest first")
	}
	if a.Records[0].Action != "domain.claim" || a.Records[0].Actor != "admin" {
		t.Fatalf("newest %+v", a.Records[0])
	}
}
