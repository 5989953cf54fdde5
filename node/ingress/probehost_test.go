package ingress_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// Hostile round six: the callback service's URL is the poll's Host. Whatever Host a
// poller sends, the answer is a 400 naming Host (or the Host guard's 421 for a name the
// node does not go by), or a body that is valid JSON whose callback service is that one
// URL and whose routers are the plain body's plus the probe's two, the rule unchanged:
// no quote, backtick, slash, @ or escape in a Host reaches the body. In process, no
// net/http server parses the Host first: the API alone refuses what it must.
func TestAppliedProbeHostCannotInjectIntoTheBody(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, "node.example") // a name the node goes by: the poll reaches the parser
	var pc struct {
		HTTP struct {
			Routers map[string]json.RawMessage `json:"routers"`
		} `json:"http"`
	}
	if err := json.Unmarshal(n.Must(http.StatusOK, http.MethodGet, "/v1/ingress/traefik", ipIngress, ""), &pc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		url  string // "" : refused
	}{
		{"node.example:7400", "http://node.example:7400"},
		{"[::1]:7400", "http://[::1]:7400"},
		{"NODE.example", "http://NODE.example"},
		{"node.example:", "http://node.example:"},
		{"node.example:0", ""},
		{"node.example:65536", ""},
		{"node.example:7400:1", ""},
		{"a_b.example", ""},
		{"a%2Fb.example", ""},
		{"u@node.example", ""},
		{"node.example/x", ""},
		{"node.example`", ""},
		{`node.example"`, ""},
		{`node.example\`, ""},
		{"node.example,evil", ""},
		{"node.example;x", ""},
		{"node.example'", ""},
		{"node.example)", ""},
		{"[::1%25lo]:7400", ""},
		{":7400", ""},
		{"node.example\r\nX-Evil: 1", ""},
	} {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/ingress/traefik", nil)
		req.Host = tc.host
		req.Header.Set("Authorization", "Bearer "+ipIngress)
		req.Header.Set(api.HeaderIngress, "edge-h")
		req.Header.Set(api.HeaderAppliedProbe, testnode.ProbeURL)
		rec := n.Serve(req)
		if tc.url == "" {
			// 421: a Host the node does not go by is refused before any handler (httpapi's
			// TestARebindingHostIsRefused); 400: the poll's parser refuses it.
			if rec.Code != http.StatusBadRequest && rec.Code != http.StatusMisdirectedRequest {
				t.Errorf("Host %q: %d %.300s, want 400 or 421", tc.host, rec.Code, rec.Body)
			}
			continue
		}
		if rec.Code != http.StatusOK {
			t.Errorf("Host %q: %d %.300s, want 200", tc.host, rec.Code, rec.Body)
			continue
		}
		body := rec.Body.Bytes()
		var cfg struct {
			HTTP struct {
				Routers  map[string]json.RawMessage `json:"routers"`
				Services map[string]struct {
					LoadBalancer struct {
						Servers []struct{ URL string } `json:"servers"`
					} `json:"loadBalancer"`
				} `json:"services"`
			} `json:"http"`
		}
		if err := json.Unmarshal(body, &cfg); err != nil {
			t.Errorf("Host %q: the body is not JSON: %v", tc.host, err)
			continue
		}
		if got := cfg.HTTP.Services["applied-callback"].LoadBalancer.Servers; len(got) != 1 || got[0].URL != tc.url {
			t.Errorf("Host %q: callback servers %+v, want %s", tc.host, got, tc.url)
		}
		if len(cfg.HTTP.Routers) != len(pc.HTTP.Routers)+2 {
			t.Errorf("Host %q: %d routers, want the plain %d and the probe's 2", tc.host, len(cfg.HTTP.Routers), len(pc.HTTP.Routers))
		}
		if m := testnode.CallbackRule.FindStringSubmatch(testnode.RuleOf(body)); m == nil || !strings.HasPrefix(m[1], api.PathIngressApplied+"edge-h/") {
			t.Errorf("Host %q: callback rule %q", tc.host, testnode.RuleOf(body))
		}
	}
}
