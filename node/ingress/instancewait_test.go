package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/internal/apitest"
	"github.com/scafo/ingress/node/store"
)

// A deploy moves an instance with ?wait=applied (docs/design.md §13): the answer is 200 only once
// every live ingress holds a configuration that dials the new port, and the old process
// can then stop. An ingress that cannot apply makes it 202 naming that ingress; a release
// waits the same way until no ingress dials the instance.
//
// A whole-node test (two nodes, two fake plugins), one of the package's two: the move
// crosses this node's record, the other node's reconcile pass and both ingresses'
// reports. Each leg is unit-tested on its own (TestAnInstanceWriteThatIsNeverAnnouncedIsNotApplied,
// await_test.go's TestWaitAppliedWaitsForEveryLiveIngress). On the directory store:
// storetest proves the backends' conditional writes equal.
func TestAnInstanceMoveAnswersAppliedOnceEveryIngressDialsTheNewPort(t *testing.T) {
	t.Parallel()
	p := t.TempDir()
	testAnInstanceMoveAnswersApplied(t, testnode.ReportBackend{Name: "dir", Open: func(t *testing.T) store.Store { return testnode.OpenDir(t, p) }})
}

func testAnInstanceMoveAnswersApplied(t *testing.T, be testnode.ReportBackend) {
	a := testnode.StartReportsNode(t, be, "vps-a")
	b := testnode.StartReportsNode(t, be, "vps-b")
	p1 := testnode.StartFakePlugin(t, a, "edge-1")
	p2 := testnode.StartFakePlugin(t, b, "edge-2")
	oldPort, newPort := testnode.ListenOn(t), testnode.ListenOn(t)
	a.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	a.Must(200, "PUT", "/v1/node/instances/shop", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, oldPort))
	dials := func(body []byte, port int) bool {
		return strings.Contains(string(body), fmt.Sprintf("127.0.0.1:%d", port))
	}
	nodetest.WaitFor(t, 10*time.Second, "both ingresses dial the old port", func() bool {
		return dials(p1.Holds(), oldPort) && dials(p2.Holds(), oldPort)
	})

	resp, body := a.Do(http.MethodPut, "/v1/node/instances/shop?wait=applied&timeout=20s", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, newPort))
	answered := time.Now()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("instance move with wait=applied: %d %s, want 200", resp.StatusCode, body)
	}
	var ab api.Applied
	if err := json.Unmarshal(body, &ab); err != nil {
		t.Fatal(err)
	}
	if !ab.Applied || ab.Ingresses != 2 || ab.Serial == 0 || !strings.Contains(string(ab.Result), fmt.Sprintf(`"port":%d`, newPort)) {
		t.Fatalf("answer %s: want applied by 2 ingresses, with the instance as its result", body)
	}
	// Applied means applied: both ingresses held a configuration with the new port, not
	// the old one, when the write answered (and had reported the serial before it).
	for _, p := range []*testnode.FakePlugin{p1, p2} {
		if held := p.Holds(); !dials(held, newPort) || dials(held, oldPort) {
			t.Errorf("%s at the answer: dials new port %v, old port %v; want the new one alone", p.Name, dials(held, newPort), dials(held, oldPort))
		}
		if got := p.ReportedBy(answered); got < ab.Serial {
			t.Errorf("%s had reported serial %d when the move answered, want >= %d", p.Name, got, ab.Serial)
		}
	}

	// The same write again changes nothing and is applied at once.
	resp, body = a.Do(http.MethodPut, "/v1/node/instances/shop?wait=applied&timeout=5s", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, newPort))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"applied":true`) {
		t.Errorf("repeated move: %d %s, want 200 applied", resp.StatusCode, body)
	}

	// An ingress that stops applying: the move back answers 202 naming it.
	p2.Frozen.Store(true)
	resp, body = a.Do(http.MethodPut, "/v1/node/instances/shop?wait=applied&timeout=1500ms", testnode.AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, oldPort))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("move with a stuck ingress: %d %s, want 202", resp.StatusCode, body)
	}
	ab = api.Applied{}
	json.Unmarshal(body, &ab)
	if ab.Applied || len(ab.Behind) != 1 || ab.Behind[0].Name != "edge-2" || !strings.Contains(ab.Detail, "edge-2") {
		t.Errorf("202 body %s: want edge-2 named behind", body)
	}
	p2.Frozen.Store(false)

	// A release waits until no ingress dials the instance.
	resp, body = a.Do(http.MethodDelete, "/v1/node/instances/shop?wait=applied&timeout=20s", testnode.AdminToken, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"applied":true`) {
		t.Fatalf("release with wait=applied: %d %s, want 200 applied", resp.StatusCode, body)
	}
	for _, p := range []*testnode.FakePlugin{p1, p2} {
		if held := p.Holds(); dials(held, oldPort) || dials(held, newPort) {
			t.Errorf("%s still dials the released instance when the release answered", p.Name)
		}
	}
}

// recordPutFails refuses this node's record writes while fail is set (a store that
// takes reads but not that write).
type recordPutFails struct {
	store.Store
	fail atomic.Bool
}

func (f *recordPutFails) Put(ctx context.Context, key string, v []byte, cond store.Condition) (string, error) {
	if f.fail.Load() && strings.HasPrefix(key, "nodes/") {
		return "", fmt.Errorf("refused by the test: %w", store.ErrUnavailable)
	}
	return f.Store.Put(ctx, key, v, cond)
}

// An instance write waits for this node's own record, which a store that refuses it
// never carries: the wait answers 202 at its timeout and says why, never 200. In
// process, the record's heartbeat a step run when the write kicks it.
func TestAnInstanceWriteThatIsNeverAnnouncedIsNotApplied(t *testing.T) {
	t.Parallel()
	st := &recordPutFails{}
	n := newInProcessWith(t, apitest.Options{Record: true, Wrap: func(s store.Store) store.Store { st.Store = s; return st }})
	n.must(http.StatusCreated, http.MethodPut, "/v1/apps/shop", ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
	rec := n.do(http.MethodPut, "/v1/node/instances/shop?wait=applied&timeout=10s", ipAdmin, `{"port":25000,"ready":true}`)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"applied":true`) {
		t.Fatalf("instance write on a healthy store: %d %s, want 200 applied", rec.Code, rec.Body)
	}
	st.fail.Store(true)
	rec = n.do(http.MethodPut, "/v1/node/instances/shop?wait=applied&timeout=100ms", ipAdmin, `{"port":25000,"ready":false}`)
	if body := rec.Body.String(); rec.Code != http.StatusAccepted || !strings.Contains(body, "not announced") ||
		!strings.Contains(body, "refused by the test") || !strings.Contains(body, `"applied":false`) {
		t.Errorf("unannounced instance write: %d %s, want 202 saying the record could not be written", rec.Code, body)
	}
}
