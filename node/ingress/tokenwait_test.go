package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetwrite"
)

// An application token may wait on its own writes: with no ingress the write answers
// "applied" once this node publishes it (with an ingress behind, 202 naming it:
// TestAnInstanceWriteThatIsNeverAnnouncedIsNotApplied's). Its refused writes are refused
// as without wait (403), never waited on.
func TestWaitAppliedOnAnApplicationTokensOwnWrite(t *testing.T) {
	t.Parallel()
	n := newInProcess(t)
	for i, app := range []string{"tito-classic", "tito-go"} {
		n.Must(http.StatusCreated, http.MethodPut, "/v1/apps/"+app, ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
		n.Must(http.StatusOK, http.MethodPut, "/v1/node/instances/"+app, ipAdmin, fmt.Sprintf(`{"port":%d,"ready":true}`, 25000+i))
	}
	n.Must(http.StatusCreated, http.MethodPut, "/v1/apps/tito-classic/domains/ti.to", ipAdmin, "")
	it, err := n.Writer.IssueToken(context.Background(), fleetwrite.Actor{Admin: true}, "acme", "tito-classic", []string{"publish"})
	if err != nil {
		t.Fatal(err)
	}
	const paths = "/v1/apps/tito-classic/domains/ti.to/paths"

	rec := n.Rec(http.MethodPut, paths+"?wait=applied&timeout=10s", it.Token, `{"paths":{"paulca":"tito-go.apps.example.com"}}`)
	var ab api.Applied
	json.Unmarshal(rec.Body.Bytes(), &ab)
	if rec.Code != http.StatusOK || !ab.Applied || !ab.NoIngress || !strings.Contains(string(ab.Result), `"paulca"`) {
		t.Fatalf("its own write with wait, no ingress: %d %s, want 200 applied with the path map", rec.Code, rec.Body)
	}

	rec = n.Rec(http.MethodPut, "/v1/apps/tito-go/domains/ti.to/paths?wait=applied", it.Token, `{"paths":{}}`)
	if rec.Code != http.StatusForbidden || strings.Contains(rec.Body.String(), "applied") {
		t.Errorf("another app's door with wait: %d %s, want the plain 403", rec.Code, rec.Body)
	}
	if held, _ := n.Book.Waiters(); held != 0 {
		t.Errorf("%d waiter slots held after the writes answered, want none", held)
	}
}
