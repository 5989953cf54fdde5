package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/api"
)

// foreignStore is a StoreIdentity that says the store is not the one this node served.
type foreignStore struct{}

func (foreignStore) Foreign() bool         { return true }
func (foreignStore) ForeignReason() string { return "its epoch is not this node's" }

// TestTheGuardsAnswerBeforeAnyHandler: over the API's handler, with no subsystem
// behind it, each guard answers a request it refuses with its status and a JSON error,
// and counts a refused credential under its reason: no token or a bad one (401, with
// WWW-Authenticate), the admin token on /v1/storage (403), an application-shaped token
// that is no token (401, without a store read: there is no store), any write on a
// foreign store (503 naming the adopt command).
func TestTheGuardsAnswerBeforeAnyHandler(t *testing.T) {
	const ingressTok, adminTok = "ingress-token-0123456789", "admin-token-0123456789"
	a, err := New(Config{NodeName: "vps-a", IngressToken: ingressTok, AdminToken: adminTok, WriteTimeout: time.Second, RejectLog: time.Minute},
		testLog(), prometheus.NewRegistry(), Deps{Identity: foreignStore{}})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler()
	for _, c := range []struct {
		what, method, path, token string
		code                      int
		errWant, detail           string
		refused                   bool // counted under RefusedToken
	}{
		{"a poll without a token", "GET", api.PathIngress + api.FormatRoutes, "", 401, "unauthorized", "missing bearer token", true},
		{"a poll with a bad token", "GET", api.PathIngress + api.FormatRoutes, "nope", 401, "unauthorized", "invalid token", true},
		{"status with an application token", "GET", api.PathStatus, "scafo_0123456789abcdef_" + strings.Repeat("ab", 32), 401, "unauthorized", "invalid token", true},
		{"the admin token on the storage API", "GET", api.PathStorage + "/keys/x", adminTok, 403, "forbidden", "ingress token only", true},
		{"a write on a foreign store", "PUT", api.PathApps + "/shop", adminTok, 503, "store unavailable", "scafo-node store adopt", false},
		{"a storage write on a foreign store", "PUT", api.PathStorage + "/keys/x", ingressTok, 503, "store unavailable", "scafo-node store adopt", false},
		{"an unknown path", "GET", "/v1/nothing", "", 404, "not found", "/v1/nothing", false},
	} {
		before := refusedTokens(t, h)
		r := httptest.NewRequest(c.method, "http://127.0.0.1"+c.path, strings.NewReader("{}"))
		if c.token != "" {
			r.Header.Set("Authorization", "Bearer "+c.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var body api.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != c.code || body.Error != c.errWant || !strings.Contains(body.Detail, c.detail) {
			t.Errorf("%s: %d %s, want %d %q with %q", c.what, rec.Code, rec.Body, c.code, c.errWant, c.detail)
		}
		if c.code == 401 && rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: a 401 without WWW-Authenticate", c.what)
		}
		counted := refusedTokens(t, h) - before
		if want := map[bool]float64{true: 1, false: 0}[c.refused]; counted != want {
			t.Errorf("%s: counted %v refusals for the token, want %v", c.what, counted, want)
		}
	}
}

// refusedTokens reads the token refusals from the API's own /metrics.
func refusedTokens(t *testing.T, h http.Handler) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1"+api.PathMetrics, nil))
	m := regexp.MustCompile(`(?m)^scafo_requests_refused_total\{reason="token"\} (\S+)$`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("/metrics has no token refusals (every reason is exported from the start):\n%s", rec.Body)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
