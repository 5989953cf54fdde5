package httpapi_test

// Hostile review (round four) of the metrics (/metrics is anonymous): no label value
// is chosen by a client, so no request makes the series grow, and no credential or
// token id is ever in a label.

import (
	"fmt"
	"strings"
	"testing"
)

// metricSeries is the set of scafo_ series in a /metrics body.
func metricSeries(body string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "scafo_") {
			name, _, _ := strings.Cut(l, " ")
			out[name] = true
		}
	}
	return out
}

func TestNoClientChoosesAMetricLabel(t *testing.T) {
	n, _ := countingTokens(t)
	id, tok := n.IssueToken("evil", "evil", `"instance", "publish"`)
	// Every kind of request once, so that the series a request creates exist before.
	warm := func(i int) {
		n.Do("GET", fmt.Sprintf("/v1/ingress/x%d", i), ipIngress, "")
		n.Do("GET", "/v1/ingress/traefik?group=g"+fmt.Sprint(i), ipIngress, "")
		n.Do("GET", "/v1/ingress/routes", ipIngress, "", "X-Scafo-Ingress", fmt.Sprintf("ing-%d", i))
		n.Do("GET", fmt.Sprintf("/v1/storage/keys/k%d?list", i), ipIngress, "")
		n.Do("GET", fmt.Sprintf("/v1/storage/keys/k%d?stat", i), ipIngress, "")
		n.Do("GET", fmt.Sprintf("/v1/storage/keys/k%d", i), ipIngress, "")
		n.Do("PUT", fmt.Sprintf("/v1/storage/keys/k%d", i), ipIngress, "v")
		n.Do("DELETE", fmt.Sprintf("/v1/storage/keys/k%d", i), ipIngress, "")
		n.Do("PATCH", fmt.Sprintf("/v1/storage/keys/k%d", i), ipIngress, "")
		n.Do("GET", macPathsURL, "scafo_"+randHex(16)+"_"+randHex(64), "")
		n.Do("GET", macPathsURL, fmt.Sprintf("made-up-%d", i), "")
		n.Do("PUT", "/v1/node/instances/evil", tok, fmt.Sprintf(`{"ready":%v}`, i%2 == 0))
		n.Do("GET", fmt.Sprintf("/v1/apps/evil%d", i), tok, "")
	}
	warm(0)
	_, b := n.Get("/metrics", "")
	before := metricSeries(string(b))
	for i := 1; i <= 50; i++ {
		warm(i)
	}
	_, b = n.Get("/metrics", "")
	after := metricSeries(string(b))
	for s := range after {
		if !before[s] {
			t.Errorf("a new series after 50 rounds of client-chosen names: %s", s)
		}
	}
	for _, secret := range []string{ipIngress, ipAdmin, tok, id, "made-up-", "ing-", "evil1"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("/metrics holds %q", secret)
		}
	}
	t.Logf("%d scafo_ series before, %d after", len(before), len(after))
}
