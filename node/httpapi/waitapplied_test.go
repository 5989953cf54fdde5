package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/api"
)

// TestWaitAppliedRefusesBadParametersWithoutWriting: a malformed wait or timeout, a
// timeout without wait=applied, wait on a read, or a query that does not parse is a 400
// naming the parameter, and nothing is written (no application, no instance allocated,
// the store unchanged).
func TestWaitAppliedRefusesBadParametersWithoutWriting(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	before := storeState(t, n)
	for _, c := range []struct {
		method, query, want string
	}{
		{http.MethodPut, "wait=live", "invalid wait"},
		{http.MethodPut, "wait=applied&wait=applied", "invalid wait"},
		{http.MethodPut, "wait=applied&timeout=61s", "invalid timeout"},
		{http.MethodPut, "wait=applied&timeout=0s", "invalid timeout"},
		{http.MethodPut, "wait=applied&timeout=-1s", "invalid timeout"},
		{http.MethodPut, "wait=applied&timeout=ten", "invalid timeout"},
		{http.MethodPut, "timeout=5s", "invalid timeout"},
		{http.MethodGet, "wait=applied", "invalid wait"},
		// net/url's Query() drops a pair it cannot parse: the write was made, not waited for.
		{http.MethodPut, "wait=applied;timeout=1s", "invalid query"},
	} {
		resp, body := n.Do(c.method, "/v1/apps/shop?"+c.query, ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
		var e struct{ Error, Detail string }
		json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error != c.want || e.Detail == "" {
			t.Errorf("%s ?%s: %d %s, want 400 %q with a detail", c.method, c.query, resp.StatusCode, body, c.want)
		}
	}
	resp, body := n.Do(http.MethodPost, "/v1/node/instances/shop?wait=live", ipAdmin, "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid wait") {
		t.Errorf("instance write with a bad wait: %d %s, want 400", resp.StatusCode, body)
	}
	var listed struct{ Instances []json.RawMessage }
	if err := json.Unmarshal(n.Must(http.StatusOK, http.MethodGet, api.PathNodeInstances, ipAdmin, ""), &listed); err != nil {
		t.Fatal(err)
	}
	if insts := listed.Instances; len(insts) != 0 {
		t.Errorf("instances %v: a refused instance write allocated", insts)
	}
	if after := storeState(t, n); after != before {
		t.Errorf("the store changed: a refused request wrote (before %s, after %s)", before, after)
	}
}
