package node_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// TestMalformedObjectSkippedNotWithdrawn: a malformed application or node record
// is skipped, reported in /v1/status and the log; the store stays reachable and every
// other route stays.
func TestMalformedObjectSkippedNotWithdrawn(t *testing.T) {
	t.Parallel()
	n := testnode.NewStepped(t, testConfig(t, "vps-a", t.TempDir()), nil)
	seedFleet(t, n.St, "shop", "blog")
	n.Tick()
	if h := n.Hosts(); h != "blog.apps.example.com,shop.apps.example.com" {
		t.Fatalf("hosts %s, want blog and shop", h)
	}

	// A malformed object is skipped and reported; everything else stays. It counts as
	// absent (not as its last good version), so a node restarted now derives the same
	// document as one that saw the good version.
	putRaw(t, n.St, "apps/broken.json", []byte(`{"name": "broken", "placement": [`))
	putRaw(t, n.St, "apps/blog.json", []byte(`{"name": 42}`))
	n.MustPass()
	if b := n.Get("/v1/status", testAdminToken).Body.String(); !strings.Contains(b, "apps/broken.json") || !strings.Contains(b, "apps/blog.json") {
		t.Fatalf("status does not report both malformed objects: %s", b)
	}
	if h := n.Hosts(); h != "shop.apps.example.com" {
		t.Fatalf("hosts %s, want blog skipped, shop kept", h)
	}
	if !strings.Contains(n.Logs.String(), "apps/broken.json") {
		t.Error("malformed object not logged")
	}
	// So is a malformed node record, or one dated beyond the TTL ahead (a clock ahead,
	// or planted: not live, not routed; what node/self's start check does of it is
	// self's); the store stays reachable and the document does not move.
	before := n.Routes()
	putRaw(t, n.St, "nodes/vps-x.json", []byte("\x00\xff not json"))
	putRaw(t, n.St, "nodes/vps-y.json", []byte(`{"name":"vps-z","address":"10.83.0.9","apiPort":7400}`))
	putObject(t, n.St, "nodes/ghost.json", fleet.NodeRecord{Name: "ghost", Address: "10.83.0.44", APIPort: 7400, Seen: n.Now.Add(8760 * time.Hour)})
	n.MustPass()
	st := n.Status()
	for k, reason := range map[string]string{"nodes/vps-x.json": "", "nodes/vps-y.json": "", "nodes/ghost.json": "ahead of this node's clock"} {
		if !slices.ContainsFunc(st.Skipped, func(s api.Skipped) bool { return s.Object == k && strings.Contains(s.Reason, reason) }) {
			t.Errorf("%s not reported in status (%q): %+v", k, reason, st.Skipped)
		}
		if !strings.Contains(n.Logs.String(), k) {
			t.Errorf("%s not logged", k)
		}
	}
	if !st.Store.Reachable {
		t.Errorf("a malformed node record made the store unreachable: %+v", st.Store)
	}
	assertServing(t, n, before, "after malformed node records")
	// A second node starting on the same store serves the same bytes (once each has
	// read the other's record).
	m := testnode.NewStepped(t, testConfig(t, "vps-c", n.Cfg.Store.Dir.Path), nil)
	m.Tick()
	n.MustPass()
	a, b := n.Get("/v1/ingress/traefik", testIngressToken).Body.Bytes(), m.Get("/v1/ingress/traefik", testIngressToken).Body.Bytes()
	if !bytes.Equal(a, b) {
		t.Fatalf("two nodes on one store serve different documents:\n%s\n%s", a, b)
	}
}

// nodeWritesFail refuses writes of node records and reads of the serial while on.
type nodeWritesFail struct {
	store.Store
	on atomic.Bool
}

func (s *nodeWritesFail) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	if s.on.Load() && key == fleet.KeySerial {
		return store.Object{}, false, fmt.Errorf("get %s: connection refused: %w", key, store.ErrUnavailable)
	}
	return s.Store.GetIfChanged(ctx, key, etag)
}

func (s *nodeWritesFail) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	if s.on.Load() && strings.HasPrefix(key, fleet.PrefixNodes) {
		return "", fmt.Errorf("put %s: access denied: %w", key, store.ErrUnavailable)
	}
	return s.Store.Put(ctx, key, v, c)
}

// TestTheRecordsReportsReachStatusAndMetrics: what node/self finds (another writer of
// this node's record, another live node on its address: its guards_test.go) is in
// /v1/status and the metrics; a heartbeat that cannot write the record makes the store
// unreachable in the status, since it failed when it fails before a pass does.
func TestTheRecordsReportsReachStatusAndMetrics(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	st := &nodeWritesFail{Store: openDir(t, cfg.Store.Dir.Path)}
	n := testnode.NewStepped(t, cfg, st)
	n.Tick()
	elsewhere := &fleet.Boot{Node: "elsewhere", ID: "b00b"}
	putObject(t, n.St, "nodes/vps-b.json", fleet.NodeRecord{Name: "vps-b", Address: cfg.Node.Address, APIPort: 7401, Seen: n.Now.UTC(), Boot: elsewhere})
	n.MustPass()
	putObject(t, n.St, "nodes/vps-a.json", fleet.NodeRecord{Name: "vps-a", Address: "10.9.9.9", APIPort: 7400, Seen: n.Now.UTC(), Boot: elsewhere})
	n.Beat()
	s := n.Status()
	if s.DuplicateName == nil || s.DuplicateName.Address != "10.9.9.9:7400" {
		t.Errorf("status duplicateName %+v, want 10.9.9.9:7400", s.DuplicateName)
	}
	if s.AddressWarning == nil || !slices.Equal(s.AddressWarning.SharedWith, []string{"vps-b"}) {
		t.Errorf("status addressWarning %+v, want shared with vps-b", s.AddressWarning)
	}
	metrics := string(n.Must(http.StatusOK, http.MethodGet, "/metrics", "", ""))
	for _, want := range []string{"scafo_node_name_conflict 1\n", "scafo_node_address_conflict 1\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The heartbeat fails first, then the pass: unreachable since the earlier failure.
	st.on.Store(true)
	n.Beat()
	beatFailed := n.Now
	if err := n.Pass(); err == nil {
		t.Fatal("a pass succeeded while the serial cannot be read")
	}
	if s := n.Status().Store; s.Reachable || !strings.Contains(s.HeartbeatError, "access denied") ||
		s.UnreachableSince == nil || !s.UnreachableSince.Equal(beatFailed) {
		t.Errorf("store status %+v: want unreachable since the heartbeat's failure (%s), naming it", s, beatFailed.UTC())
	}
}
