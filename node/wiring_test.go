package node_test

// The node's wiring (wire.go, server.go): each setting and dependency the root hands a
// subsystem, checked through the node itself. The subsystems' own tests build their
// parts with options of their own, so a line of wire.go that drops a setting is caught
// only here (hostile review 5: F1, F2, F4, F6-F10, F12).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// api.public false reaches the derivation (no API apex routed); traefik.middlewares,
// platform.domains, the claim rules, the port checker and writes.routeBurst reach the
// node's writer and its answers: a declared middleware is accepted on an application,
// a move to a port nothing listens on is 409, a claim under the platform domain 400, a
// claim covering another account's name 409 naming it, and an application token's
// third routing change past a burst of 2 is 429 naming the setting.
func TestTheNodesSettingsReachItsWrites(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	cfg.Writes.RouteBurst, cfg.Writes.RoutePerMinute = 2, 0.01
	cfg.API.Public = false
	cfg.Traefik.Middlewares = []string{"auth@file"}
	n := testnode.NewStepped(t, cfg, nil)
	n.Tick()
	var doc map[string]any
	if err := json.Unmarshal(n.Routes(), &doc); err != nil || doc["api"] != nil {
		t.Errorf("api.public false reaches the derivation: the document routes the API apex: %v %v", doc["api"], err)
	}
	n.Must(201, "PUT", "/v1/apps/bank", testAdminToken, `{"account":"bank","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/evil", testAdminToken, `{"account":"evil","placement":["vps-a"]}`)
	n.Must(200, "PUT", "/v1/apps/bank", testAdminToken, `{"account":"bank","placement":["vps-a"],"middlewares":["auth@file"]}`) // traefik.middlewares declares it
	for _, h := range []string{"x.apps.example.com", "*.apps.example.com"} {
		if rec := n.Do("PUT", "/v1/apps/evil/domains/"+h, testAdminToken, ""); rec.Code != 400 {
			t.Errorf("a claim of %s under platform.domains: %d %s, want 400", h, rec.Code, rec.Body)
		}
	}
	n.Must(201, "PUT", "/v1/apps/bank/domains/www.bank.example", testAdminToken, "")
	if rec := n.Do("PUT", "/v1/apps/evil/domains/*.bank.example", testAdminToken, ""); rec.Code != 409 || !strings.Contains(rec.Body.String(), "bank") {
		t.Errorf("evil's wildcard over bank's name: %d %s, want 409 naming bank", rec.Code, rec.Body)
	}

	// The port checker: a ready instance's move to a port nothing listens on is refused.
	n.Must(200, "PUT", "/v1/node/instances/bank", testAdminToken, `{"port":24101,"ready":true}`)
	if rec := n.Do("PUT", "/v1/node/instances/bank", testAdminToken, `{"port":24102,"ready":true}`); rec.Code != 409 || !strings.Contains(rec.Body.String(), "port not serving") {
		t.Errorf("a move to a port nothing listens on: %d %s, want 409 port not serving", rec.Code, rec.Body)
	}

	var it struct{ Token string }
	if err := json.Unmarshal(n.Must(201, "POST", "/v1/tokens", testAdminToken, `{"account":"evil","app":"evil","roles":["instance"]}`), &it); err != nil {
		t.Fatal(err)
	}
	n.Must(201, "POST", "/v1/node/instances/evil", it.Token, `{}`)
	n.Must(200, "PUT", "/v1/node/instances/evil", it.Token, `{"ready":true}`)
	n.Must(200, "PUT", "/v1/node/instances/evil", it.Token, `{"ready":false}`)
	if rec := n.Do("PUT", "/v1/node/instances/evil", it.Token, `{"ready":true}`); rec.Code != 429 || !strings.Contains(rec.Body.String(), "writes.routeBurst") {
		t.Errorf("a third routing change past writes.routeBurst 2: %d %s, want 429 naming the setting", rec.Code, rec.Body)
	}
}

// Each role's token reaches the API in its own role (wire.go's apiConfig): the node's
// read-only token reads the audit log, and the ingress token, which may poll and read
// the status, may not (hostile review 6, WX3d: the read-only role handed the ingress
// token; WX3: handed the admin's).
func TestEachRolesTokenReachesTheAPIInItsRole(t *testing.T) {
	t.Parallel()
	n := testnode.NewStepped(t, testConfig(t, "vps-a", t.TempDir()), nil)
	if r := n.Get(api.PathAudit, testnode.ReadOnlyToken); r.Code != http.StatusOK {
		t.Errorf("the audit log with the read-only token: %d %s, want 200", r.Code, r.Body)
	}
	if r := n.Get(api.PathAudit, testIngressToken); r.Code != http.StatusUnauthorized && r.Code != http.StatusForbidden {
		t.Errorf("the audit log with the ingress token: %d %s, want 401 or 403", r.Code, r.Body)
	}
}

// A node restarted on its state dir over a store it does not recognise (wiped, or
// another fleet's) serves what it served and writes nothing there: not its record, not a
// serial (the heartbeat), not an ingress report (the book's flush), not an admin's write
// (503). Each of the three is wired to the node's one identity in wire.go and server.go.
func TestANodeOnAForeignStoreWritesNothingThere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, storeDir string)
	}{
		{"wiped", func(t *testing.T, storeDir string) {
			if err := os.RemoveAll(storeDir); err != nil {
				t.Fatal(err)
			}
		}},
		{"another fleet's", func(t *testing.T, storeDir string) {
			if err := os.RemoveAll(storeDir); err != nil {
				t.Fatal(err)
			}
			st := openDir(t, storeDir)
			nodetest.Put(t, st, fleet.AppKey("other"), fleet.App{Name: "other", Account: "them", Placement: []string{"vps-z"}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storeDir := filepath.Join(t.TempDir(), "store")
			cfg := testConfig(t, "vps-a", storeDir)
			a := testnode.NewStepped(t, cfg, nil)
			a.Tick()
			a.Must(201, "PUT", "/v1/apps/blog", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
			a.Must(200, "PUT", "/v1/node/instances/blog", testAdminToken, `{"port":25000,"ready":true}`)
			a.Beat()
			a.MustPass()
			routes := a.Routes()

			tc.swap(t, storeDir)
			st := openDir(t, storeDir) // its lock file exists from now on
			swapped := testnode.StoreBytes(t, storeDir)
			b := testnode.NewStepped(t, cfg, st) // the same state dir
			b.Beat()
			_ = b.Pass() // refused or not, what is served stays
			if got := b.Routes(); !bytes.Equal(got, routes) {
				t.Fatalf("restarted on a foreign store, the node serves\n%s\nnot what it served\n%s", got, routes)
			}
			if rec := b.Do("PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`); rec.Code != 503 {
				t.Errorf("a write to a foreign store: %d %s, want 503", rec.Code, rec.Body)
			}
			for i := range 3 {
				b.Get("/v1/ingress/traefik", testIngressToken, api.HeaderIngress, "edge-1", api.HeaderIngressKind, api.KindPlugin)
				b.Steps.FlushIngresses(context.Background(), b.Now.Add(time.Duration(i+1)*2*ingress.MinWriteGap))
			}
			b.Beat()
			if after := testnode.StoreBytes(t, storeDir); !maps.Equal(swapped, after) {
				t.Fatalf("the node wrote into the foreign store:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(swapped)), slices.Sorted(maps.Keys(after)))
			}
		})
	}
}

// One name, one node, at Run: a node given the name of a live record of another node
// refuses to start and writes nothing; a record older than reconcile.nodeTTL holds
// nothing, and the node that starts serves on the node's own HTTP server, whose
// connections carry their age (limits.connMaxAge closes one after its answer) and are
// capped per source address (limits.maxConnsPerSource: one more connection from
// 127.0.0.1 serves only what the reserve does; hostile review 6, SV1) and closed when
// idle past limits.idleTimeout.
func TestRunRefusesALiveNodesNameAndServesWithItsLimits(t *testing.T) {
	t.Parallel()
	// run runs a node over st on a listener until it serves (until the test ends) or
	// refuses.
	run := func(t *testing.T, cfg *node.Config, st store.Store) (base string, err error) {
		ln, err := net.Listen("tcp", cfg.Node.Address+":0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Node.APIPort = ln.Addr().(*net.TCPAddr).Port
		log, _ := nodetest.Logger()
		srv, err := node.NewWithStore(cfg, log, st, cfg.Ingress.Token, cfg.Admin.Token)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx, ln) }()
		select {
		case err := <-done:
			cancel()
			return "", err
		case <-srv.Serving():
			t.Cleanup(func() { cancel(); <-done })
			return "http://" + ln.Addr().String(), nil
		}
	}
	ttl := testConfig(t, "vps-a", t.TempDir()).Reconcile.NodeTTL
	// holder writes a record of vps-a, seen at seen, into a store of its own.
	holder := func(t *testing.T, seen time.Time) (string, *testnode.Stepped) {
		storeDir := t.TempDir()
		a := testnode.NewStepped(t, testConfig(t, "vps-a", storeDir), nil)
		a.Now = seen
		a.Beat()
		return storeDir, a
	}
	second := func(t *testing.T, storeDir string) *node.Config {
		cfg := testConfig(t, "vps-a", storeDir) // another state dir: another machine
		cfg.Node.Address = "127.0.0.12"
		return cfg
	}
	// overStale serves a second vps-a with limits over a record two TTLs old.
	overStale := func(t *testing.T, limits func(*node.LimitsConfig)) string {
		storeDir, a := holder(t, time.Now().Add(-2*time.Duration(ttl)))
		cfg := second(t, storeDir)
		limits(&cfg.Limits)
		base, err := run(t, cfg, a.St)
		if err != nil {
			t.Fatalf("a record two TTLs old held the name: %v", err)
		}
		return base
	}
	// get sends one request on a new connection (from 127.0.0.1) and reads its answer;
	// the connection stays open, its reader returned.
	get := func(t *testing.T, base, path, token string) (*http.Response, string, *bufio.Reader) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
		c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(time.Minute)) // a hang fails, it does not bound the test
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if err := req.Write(c); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body), br
	}

	t.Run("live", func(t *testing.T) {
		storeDir, a := holder(t, time.Now())
		before := testnode.StoreBytes(t, storeDir)
		_, err := run(t, second(t, storeDir), a.St)
		if err == nil || !strings.Contains(err.Error(), "taken by another live node") {
			t.Fatalf("a second node with a live node's name: %v, want refused", err)
		}
		if after := testnode.StoreBytes(t, storeDir); !maps.Equal(before, after) {
			t.Errorf("the refused node wrote into the store")
		}
	})
	t.Run("stale", func(t *testing.T) {
		base := overStale(t, func(l *node.LimitsConfig) { l.ConnMaxAge = ptypes.Duration(time.Nanosecond) })
		if resp, _, _ := get(t, base, api.PathHealthz, ""); resp.StatusCode != 200 || !resp.Close {
			t.Errorf("an answer on a connection past limits.connMaxAge: %d, Connection: close %v, want 200 and close", resp.StatusCode, resp.Close)
		}
	})
	t.Run("perSource", func(t *testing.T) {
		base := overStale(t, func(l *node.LimitsConfig) {
			l.MaxConns, l.ReservedConns, l.MaxConnsPerSource = 8, 1, 2
			l.IdleTimeout, l.ConnMaxAge = ptypes.Duration(time.Hour), ptypes.Duration(time.Hour) // the held ones stay open
		})
		for i := range 2 { // the address's share of general connections, held open
			if resp, body, _ := get(t, base, api.PathHealthz, ""); resp.StatusCode != 200 || resp.Close {
				t.Fatalf("connection %d of 127.0.0.1's 2: %d %s, Connection: close %v, want 200 kept open", i+1, resp.StatusCode, body, resp.Close)
			}
		}
		resp, body, _ := get(t, base, api.PathAudit, testnode.ReadOnlyToken) // a read the reserve does not serve
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "limits.maxConnsPerSource") {
			t.Errorf("a third connection from 127.0.0.1 past limits.maxConnsPerSource 2: %d %s, want 503 naming the setting", resp.StatusCode, body)
		}
	})
	t.Run("idle", func(t *testing.T) { // limits.idleTimeout closes a keep-alive connection left idle (hostile review 6, SV2)
		base := overStale(t, func(l *node.LimitsConfig) {
			l.IdleTimeout, l.ConnMaxAge = ptypes.Duration(200*time.Millisecond), ptypes.Duration(time.Hour)
		})
		resp, _, br := get(t, base, api.PathHealthz, "")
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("the first answer: %d, Connection: close %v, want 200 kept alive", resp.StatusCode, resp.Close)
		}
		if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("a keep-alive connection left idle past limits.idleTimeout (200ms): read %d bytes, %v; want the node's close (EOF)", n, err)
		}
	})
}

// reconcile.nodeTTL reaches the derivation (wire.go's fleetOptions): a peer whose record
// is older than the TTL (a minute) leaves every upstream list, except a list where it
// is the last upstream (fail static), and is reported skipped for its TTL. The rule
// itself is render/fleet's (TestNodeTTLDropsStaleUpstreamsButFailsStatic); agreement
// between live nodes is the simulator's.
func TestFleetStaleNodeLeavesUpstreamsExceptTheLast(t *testing.T) {
	t.Parallel()
	// Liveness reads the modification times of nodes/ (a heartbeat bumps no serial):
	// on the virtual clock, the time of the step that wrote the record. vps-c writes
	// its instances and its record once, then stops.
	var mtimes sync.Map
	var nodes []*testnode.Stepped
	storeDir := t.TempDir()
	for i, name := range []string{"vps-a", "vps-c"} {
		cfg := fleetConfig(t, name, fmt.Sprintf("127.0.0.%d", i+2), time.Second, 15*time.Second, time.Minute)
		cfg.Store.Dir.Path = storeDir
		vc := &vclockStore{Store: openDir(t, storeDir), mtimes: &mtimes}
		nodes = append(nodes, testnode.NewStepped(t, cfg, vc))
		vc.n = nodes[i]
	}
	a, c := nodes[0], nodes[1]
	a.Tick()
	c.Tick()
	a.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a","vps-c"]}`)
	a.Must(201, "PUT", "/v1/apps/solo", testAdminToken, `{"account":"acme","placement":["vps-c"]}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testAdminToken, `{"port":24001,"ready":true}`)
	c.Must(200, "PUT", "/v1/node/instances/shop", testAdminToken, `{"port":24002,"ready":true}`)
	c.Must(200, "PUT", "/v1/node/instances/solo", testAdminToken, `{"port":24003,"ready":true}`)
	c.Tick()
	a.Tick()

	upstreams := func() map[string][]string {
		var doc map[string]any
		if err := json.Unmarshal(a.Routes(), &doc); err != nil {
			t.Fatal(err)
		}
		return testnode.UpstreamNodes(doc)
	}
	before := map[string][]string{"shop.apps.example.com": {"vps-a", "vps-c"}, "solo.apps.example.com": {"vps-c"}, "api": {"vps-a", "vps-c"}}
	want := map[string][]string{
		"shop.apps.example.com": {"vps-a"}, // vps-c dropped
		"solo.apps.example.com": {"vps-c"}, // its last upstream: kept (fail static)
		"api":                   {"vps-a"}, // the API chain drops it too
	}
	if got := upstreams(); !maps.EqualFunc(got, before, slices.Equal) {
		t.Fatalf("seeded fleet routes %v, want %v", got, before)
	}
	every := int(time.Duration(a.Cfg.Reconcile.Heartbeat) / time.Duration(a.Cfg.Reconcile.Interval))
	for i := range int(time.Duration(a.Cfg.Reconcile.NodeTTL)/time.Duration(a.Cfg.Reconcile.Interval)) + 2*every {
		if i%every == 0 {
			a.Beat()
		}
		a.MustPass()
	}
	if got := upstreams(); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("upstreams %v a TTL and more after vps-c's record, want %v", got, want)
	}
	if st := a.Status(); !slices.ContainsFunc(st.Skipped, func(s api.Skipped) bool {
		return s.Object == "nodes/vps-c.json" && strings.Contains(s.Reason, "TTL")
	}) {
		t.Errorf("status: stale vps-c not reported in skipped: %+v", st.Skipped)
	}
}

// vclockStore gives the entries its List returns the modification time their last
// write had on the writing node's virtual clock (n.Now; the real one until n is set).
type vclockStore struct {
	store.Store
	n      *testnode.Stepped
	mtimes *sync.Map // key → time.Time
}

func (v *vclockStore) Put(ctx context.Context, key string, value []byte, cond store.Condition) (string, error) {
	etag, err := v.Store.Put(ctx, key, value, cond)
	if err == nil && v.n != nil {
		v.mtimes.Store(key, v.n.Now)
	}
	return etag, err
}

func (v *vclockStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	es, err := v.Store.List(ctx, prefix)
	for i, e := range es {
		if mt, ok := v.mtimes.Load(e.Key); ok {
			es[i].ModTime = mt.(time.Time)
		}
	}
	return es, err
}

// A write that changes nothing, asked with ?wait=applied, waits for what the store holds
// now, not for nothing: while an ingress that reported holds an older serial, the answer
// is 202 naming it, never "applied" (§15; hostile review 5 F3: the branch had no test).
func TestANoOpWriteWaitsForTheStoresSerial(t *testing.T) {
	t.Parallel()
	n := testnode.NewStepped(t, testConfig(t, "vps-a", t.TempDir()), nil)
	n.Tick()
	edge := &pluginPolls{name: "edge-1"}
	edge.poll(n) // takes the document
	edge.poll(n) // and reports it
	const app = `{"account":"acme","placement":["vps-a"]}`
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, app)
	n.MustPass() // published; edge-1 has not polled since
	rec := n.Do("PUT", "/v1/apps/shop?wait=applied&timeout=1s", testAdminToken, app)
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), "edge-1") {
		t.Fatalf("a no-op write while edge-1 is behind: %d %s, want 202 naming edge-1", rec.Code, rec.Body)
	}
	edge.poll(n) // takes the write
	edge.poll(n) // and reports it
	if rec := n.Do("PUT", "/v1/apps/shop?wait=applied&timeout=5s", testAdminToken, app); rec.Code != http.StatusOK {
		t.Fatalf("a no-op write once edge-1 holds it: %d %s, want 200 applied", rec.Code, rec.Body)
	}
}
