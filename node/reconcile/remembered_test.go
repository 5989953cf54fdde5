package reconcile_test

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// storeForeign is status.store.foreign and its reason.
func storeForeign(t *testing.T, n *testnode.Node) (bool, string) {
	t.Helper()
	s, _ := testnode.StatusMap(t, n)["store"].(map[string]any)
	f, _ := s["foreign"].(bool)
	r, _ := s["foreignReason"].(string)
	return f, r
}

// servedBeforeRestart runs a node on cfg until it routes shop, stops it, and returns
// what it served and the store's serial object at that point.
func servedBeforeRestart(t *testing.T, cfg *node.Config) (routes, traefik, serial []byte) {
	t.Helper()
	n := testnode.Start(t, cfg)
	testnode.SeedFleet(t, n.St, "shop")
	n.WaitReady()
	// The document settled: shop routed and both nodes' records read (a document
	// remembered before vps-b's record was read is one of serial 1, which the restored
	// copy below also has: it would not be foreign).
	nodetest.WaitFor(t, 5*time.Second, "shop routed and both nodes in the api section", func() bool {
		d := testnode.RoutesDoc(t, n)
		api, _ := d["api"].(map[string]any)
		ups, _ := api["upstreams"].([]any)
		return len(testnode.HostsOf(d)) == 1 && len(ups) == 2
	})
	_, routes = n.Get("/v1/ingress/routes", testnode.IngressToken)
	_, traefik = n.Get("/v1/ingress/traefik", testnode.IngressToken)
	o, err := n.St.Get(context.Background(), store.SerialKey)
	if err != nil {
		t.Fatal(err)
	}
	n.Stop()
	return routes, traefik, o.Value
}

// TestRestartOnAForeignStoreServesTheRememberedDocument (issue 12, item 11): a node
// restarted on its state dir against a store that is not the one it served (an
// unmounted disk: empty; a wrong bucket: another epoch; a restored copy: a serial
// behind the one it served) keeps serving the document it served (200, same bytes), says the store is
// foreign in /v1/status, answers writes 503 and writes nothing into that store, its own
// heartbeat included.
func TestRestartOnAForeignStoreServesTheRememberedDocument(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, storeDir string, oldSerial []byte)
	}{
		{"empty store", func(t *testing.T, storeDir string, _ []byte) {
			if err := os.RemoveAll(storeDir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(storeDir, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"serial and objects deleted", func(t *testing.T, storeDir string, _ []byte) {
			for _, p := range []string{"serial", "apps", "nodes", "domains"} {
				if err := os.RemoveAll(filepath.Join(storeDir, p)); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"another fleet's store", func(t *testing.T, storeDir string, _ []byte) {
			if err := os.RemoveAll(storeDir); err != nil {
				t.Fatal(err)
			}
			st, err := dir.New(storeDir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			nodetest.Put(t, st, fleet.AppKey("other"), fleet.App{Name: "other", Account: "them", Placement: []string{"vps-z"}})
			nodetest.Put(t, st, fleet.NodeKey("vps-z"), fleet.NodeRecord{Name: "vps-z", Address: "10.9.0.1", APIPort: 7400,
				Instances: map[string]fleet.Instance{"other": {Port: 24000, Ready: true}}, Seen: time.Now().UTC()})
		}},
		{"restored older copy", func(t *testing.T, storeDir string, oldSerial []byte) {
			_, epoch, err := store.ParseSerialEpoch(oldSerial)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(storeDir, "apps")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(storeDir, "serial"), store.FormatSerial(1, epoch), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case its own state dir, store and node; it waits on passes
			storeDir := filepath.Join(t.TempDir(), "store")
			cfg := testnode.Config(t, "vps-a", storeDir)
			routes, traefik, serial := servedBeforeRestart(t, cfg)

			tc.swap(t, storeDir, serial)
			if st, err := dir.New(storeDir); err == nil { // its lock file exists from now on
				st.Close()
			}
			swapped := testnode.StoreBytes(t, storeDir)

			n := testnode.Start(t, cfg) // the same state dir
			nodetest.WaitFor(t, 5*time.Second, "routes 200", func() bool {
				resp, _ := n.Get("/v1/ingress/routes", testnode.IngressToken)
				return resp.StatusCode == 200
			})
			for range 5 { // several passes
				if _, b := n.Get("/v1/ingress/routes", testnode.IngressToken); !bytes.Equal(b, routes) {
					t.Fatalf("restarted on a foreign store, the node serves\n%s\nnot what it served\n%s\n%s", b, routes, n.Logs.String())
				}
				if _, b := n.Get("/v1/ingress/traefik", testnode.IngressToken); !bytes.Equal(b, traefik) {
					t.Fatalf("restarted on a foreign store, the Traefik rendering moved:\n%s", b)
				}
				n.WaitPasses(2)
			}
			nodetest.WaitFor(t, 5*time.Second, "status: store foreign", func() bool {
				f, _ := storeForeign(t, n)
				return f
			})
			if _, r := storeForeign(t, n); r == "" || !strings.Contains(statusString(t, n), "store adopt") {
				t.Errorf("status names no reason or no way out:\n%s", statusString(t, n))
			}
			if resp, b := n.Do("PUT", "/v1/apps/blog", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`); resp.StatusCode != 503 ||
				!strings.Contains(string(b), "store adopt") {
				t.Fatalf("a write to a foreign store: %d %s, want 503 naming the adopt action", resp.StatusCode, b)
			}
			// Ingress reports are not written there either: a flush of the book (the
			// node's step, run here at once, each past the last's write gap) after each
			// poll writes nothing.
			flush := n.Srv.Steps().FlushIngresses
			for i := range 3 {
				n.Get("/v1/ingress/traefik", testnode.IngressToken, api.HeaderIngress, "edge-1", api.HeaderIngressKind, api.KindPlugin)
				flush(t.Context(), time.Now().Add(time.Duration(i+1)*2*ingress.MinWriteGap))
			}
			if after := testnode.StoreBytes(t, storeDir); !maps.Equal(swapped, after) {
				t.Fatalf("the node wrote into the foreign store:\nbefore %v\nafter  %v", keysOf(swapped), keysOf(after))
			}
		})
	}
}

func statusString(t *testing.T, n *testnode.Node) string {
	t.Helper()
	_, b := n.Get("/v1/status", testnode.AdminToken)
	return string(b)
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, filepath.Base(filepath.Dir(k))+"/"+filepath.Base(k))
	}
	return out
}

// blogRouted reports whether the document holds both writes the tests below make, the
// application and its instance: a copy taken on the application alone (routed, no
// upstream yet) is not the document the node settles on, and comparing a restart
// against it fails whenever the instance's publish comes late (CI, under -race).
func blogRouted(t *testing.T, n *testnode.Node) bool {
	return strings.Join(testnode.HostsOf(testnode.RoutesDoc(t, n)), ",") == "blog.apps.example.com" &&
		strings.Join(testnode.UpstreamsOf(t, n, "blog.apps.example.com"), ",") == "127.0.0.1:25000"
}

// TestFirstStartOnAnEmptyStoreRemembersNothing (issue 12, item 11 (c)): an empty state
// dir on an empty store starts as before: nothing foreign, writes accepted, and the
// restart on the store it wrote is not foreign either.
func TestFirstStartOnAnEmptyStoreRemembersNothing(t *testing.T) {
	t.Parallel()
	storeDir := filepath.Join(t.TempDir(), "store")
	cfg := testnode.Config(t, "vps-a", storeDir)
	n := testnode.Start(t, cfg)
	n.WaitReady()
	if f, r := storeForeign(t, n); f {
		t.Fatalf("a first start on an empty store is foreign: %s", r)
	}
	n.Must(201, "PUT", "/v1/apps/blog", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(200, "PUT", "/v1/node/instances/blog", testnode.AdminToken, `{"port":25000,"ready":true}`)
	nodetest.WaitFor(t, 5*time.Second, "blog routed to its instance", func() bool { return blogRouted(t, n) })
	_, routes := n.Get("/v1/ingress/routes", testnode.IngressToken)
	n.Stop()

	m := testnode.Start(t, cfg)
	m.WaitReady()
	nodetest.WaitFor(t, 5*time.Second, "the same document", func() bool {
		_, b := m.Get("/v1/ingress/routes", testnode.IngressToken)
		return bytes.Equal(b, routes)
	})
	if f, r := storeForeign(t, m); f {
		t.Fatalf("a restart on the store it served is foreign: %s", r)
	}
	m.Must(201, "PUT", "/v1/apps/docs", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
}

// TestStoreAdoptAcceptsTheStoreAsItIs (issue 12, item 11 (b)): the operator's adopt
// request (`scafo-node store adopt`) makes a node serving its remembered document over
// a foreign store accept that store as it is: it serves what the store holds, writes
// go through, and a restart after that remembers the adopted store. A request made
// while the node is stopped is acted on at start.
func TestStoreAdoptAcceptsTheStoreAsItIs(t *testing.T) {
	t.Parallel()
	for _, running := range []bool{true, false} {
		name := map[bool]string{true: "running node", false: "stopped node"}[running]
		t.Run(name, func(t *testing.T) {
			storeDir := filepath.Join(t.TempDir(), "store")
			cfg := testnode.Config(t, "vps-a", storeDir)
			routes, _, _ := servedBeforeRestart(t, cfg)
			if err := os.RemoveAll(storeDir); err != nil { // an empty disk, deliberately
				t.Fatal(err)
			}
			if !running {
				if err := node.RequestStoreAdopt(cfg.StateDir); err != nil {
					t.Fatal(err)
				}
			}
			n := testnode.Start(t, cfg)
			if running {
				nodetest.WaitFor(t, 5*time.Second, "the remembered document, the store foreign", func() bool {
					resp, _ := n.Get("/v1/ingress/routes", testnode.IngressToken)
					f, _ := storeForeign(t, n)
					return resp.StatusCode == 200 && f
				})
				if _, b := n.Get("/v1/ingress/routes", testnode.IngressToken); !bytes.Equal(b, routes) {
					t.Fatalf("before adopting: %s", b)
				}
				if err := node.RequestStoreAdopt(cfg.StateDir); err != nil {
					t.Fatal(err)
				}
			}
			// What the (empty) store holds: no application route; this node's own record
			// (written once the store is accepted) in the API apex.
			nodetest.WaitFor(t, 5*time.Second, "the store adopted", func() bool {
				resp, _ := n.Get("/v1/ingress/routes", testnode.IngressToken)
				f, _ := storeForeign(t, n)
				return resp.StatusCode == 200 && !f && len(testnode.HostsOf(testnode.RoutesDoc(t, n))) == 0
			})
			n.WaitReady()
			if _, err := os.Stat(filepath.Join(cfg.StateDir, reconcile.AdoptFile)); err == nil {
				t.Fatal("the adopt request was not consumed")
			}
			n.Must(201, "PUT", "/v1/apps/blog", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
			n.Must(200, "PUT", "/v1/node/instances/blog", testnode.AdminToken, `{"port":25000,"ready":true}`)
			nodetest.WaitFor(t, 5*time.Second, "blog routed to its instance", func() bool { return blogRouted(t, n) })
			_, adopted := n.Get("/v1/ingress/routes", testnode.IngressToken)
			n.Stop()

			// The adopted store is now the one this node remembers.
			m := testnode.Start(t, cfg)
			nodetest.WaitFor(t, 5*time.Second, "the adopted store's document", func() bool {
				resp, b := m.Get("/v1/ingress/routes", testnode.IngressToken)
				return resp.StatusCode == 200 && bytes.Equal(b, adopted)
			})
			if f, r := storeForeign(t, m); f {
				t.Fatalf("a restart after adopting is foreign: %s", r)
			}
		})
	}
}
