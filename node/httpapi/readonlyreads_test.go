package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/httpapi"
)

// TestTheReadOnlyTokensStoreReadsAreBudgeted: the read-only token's reads of the routes
// that read the store (a list of applications is one store read per application) spend
// one budget per node, whichever of its tokens (current, previous) asks: past it, 429
// with Retry-After and a body naming the budget, counted as read_rate. /v1/status and
// the routing document (no store read) are not counted, nor the admin's reads.
// Before, a leaked read-only token could list the store at any rate (hostile review 2).
func TestTheReadOnlyTokensStoreReadsAreBudgeted(t *testing.T) {
	p := newInProcess(t, nil)
	p.Must(http.StatusCreated, http.MethodPut, "/v1/apps/shop", ipAdmin, `{"account":"acme"}`)

	start := time.Now()
	paths := []string{"/v1/apps", "/v1/audit?limit=5", "/v1/apps/shop", "/v1/node/instances"}
	tokens := []string{ipReadOnly, ipReadOnlyPrevious}
	ok, refused := 0, (*strings.Builder)(nil)
	var last *http.Response
	for i := 0; i < 3*httpapi.ReadOnlyReadBurst && refused == nil; i++ {
		// Reads that are not budgeted, between: they must never be refused.
		p.Must(http.StatusOK, http.MethodGet, "/v1/status", ipReadOnly, "")
		p.Must(http.StatusOK, http.MethodGet, "/v1/apps", ipAdmin, "")
		rec := p.Rec(http.MethodGet, paths[i%len(paths)], tokens[i%2], "")
		switch rec.Code {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			refused = &strings.Builder{}
			refused.WriteString(rec.Body.String())
			last = rec.Result()
		default:
			t.Fatalf("GET %s with the read-only token: %d %s", paths[i%len(paths)], rec.Code, rec.Body)
		}
	}
	if refused == nil {
		t.Fatalf("%d reads with the read-only token answered 200: no budget", ok)
	}
	// The burst, and what the rate refilled while the test ran (one a second).
	if refill := int(time.Since(start).Seconds()*httpapi.ReadOnlyReadRate) + 1; ok < httpapi.ReadOnlyReadBurst || ok > httpapi.ReadOnlyReadBurst+refill {
		t.Errorf("%d reads answered before the first 429, want the burst %d (+%d refilled)", ok, httpapi.ReadOnlyReadBurst, refill)
	}
	var body struct{ Error, Detail string }
	if err := json.Unmarshal([]byte(refused.String()), &body); err != nil || body.Error != "too many reads" || !strings.Contains(body.Detail, "read-only token") {
		t.Errorf("429 body %q (%v): want it to name the read-only token's budget", refused, err)
	}
	if s, err := strconv.Atoi(last.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want whole seconds", last.Header.Get("Retry-After"))
	}
	if v, ok := metricValue(t, p, refusedSeries("read_rate")); !ok || v == 0 {
		t.Errorf("read_rate refusals in /metrics: %v (exported %v)", v, ok)
	}
}
