package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/internal/apitest"
	"github.com/scafo/ingress/node/store"
)

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

// An instance write with ?wait=applied (docs/design.md §13) answers 200 only once this
// node's record announces it and every live ingress reports its serial
// (TestWaitAppliedWaitsForEveryLiveIngress has that rule over a fleet's reports): a move
// or a release an ingress has not reported is 202 naming it, and a write the record
// never carries (a store that refuses it) is 202 saying why. In process, the record's
// heartbeat a step run when the write kicks it.
func TestAnInstanceWriteThatIsNeverAnnouncedIsNotApplied(t *testing.T) {
	t.Parallel()
	st := &recordPutFails{}
	n := newInProcessWith(t, apitest.Options{Record: true, Wrap: func(s store.Store) store.Store { st.Store = s; return st }})
	n.Must(http.StatusCreated, http.MethodPut, "/v1/apps/shop", ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
	rec := n.Rec(http.MethodPut, "/v1/node/instances/shop?wait=applied&timeout=10s", ipAdmin, `{"port":25000,"ready":true}`)
	var ab api.Applied
	if json.Unmarshal(rec.Body.Bytes(), &ab); rec.Code != http.StatusOK || !ab.Applied || ab.Serial == 0 {
		t.Fatalf("instance write on a healthy store: %d %s, want 200 applied", rec.Code, rec.Body)
	}
	// A plugin that holds that write and no later one: a move, then a release, announced
	// by the record, are not applied while it does not report them (202 naming it).
	n.Must(http.StatusOK, http.MethodGet, "/v1/ingress/traefik", ipIngress, "",
		api.HeaderIngress, "edge-1", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, strconv.FormatUint(ab.Serial, 10))
	for _, w := range []struct{ method, body string }{{http.MethodPut, `{"port":25001,"ready":true}`}, {http.MethodDelete, ""}} {
		rec = n.Rec(w.method, "/v1/node/instances/shop?wait=applied&timeout=100ms", ipAdmin, w.body)
		if ab = (api.Applied{}); json.Unmarshal(rec.Body.Bytes(), &ab) != nil || rec.Code != http.StatusAccepted || len(ab.Behind) != 1 || ab.Behind[0].Name != "edge-1" {
			t.Errorf("%s %s with edge-1 behind: %d %s, want 202 naming edge-1", w.method, w.body, rec.Code, rec.Body)
		}
	}
	n.Must(http.StatusOK, http.MethodPut, "/v1/node/instances/shop", ipAdmin, `{"port":25000,"ready":true}`)
	st.fail.Store(true)
	rec = n.Rec(http.MethodPut, "/v1/node/instances/shop?wait=applied&timeout=100ms", ipAdmin, `{"port":25000,"ready":false}`)
	if body := rec.Body.String(); rec.Code != http.StatusAccepted || !strings.Contains(body, "not announced") ||
		!strings.Contains(body, "refused by the test") || !strings.Contains(body, `"applied":false`) {
		t.Errorf("unannounced instance write: %d %s, want 202 saying the record could not be written", rec.Code, body)
	}
}
