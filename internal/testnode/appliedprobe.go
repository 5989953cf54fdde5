package testnode

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/scafo/ingress/render"
)

// ProbeURL is the entry point the tests' HTTP-provider Traefiks declare in their applied
// probe (api.HeaderAppliedProbe).
const ProbeURL = "http://127.0.0.1:18080"

// CallbackRule is the rule of the applied probe's callback router; its group is the
// callback path.
var CallbackRule = regexp.MustCompile("^Host\\(`scafo-applied\\.invalid`\\) && Path\\(`([^`]+)`\\)$")

// RuleOf is the callback router's rule in body ("" without one).
func RuleOf(body []byte) string {
	var cfg struct {
		HTTP struct {
			Routers map[string]struct {
				Rule string `json:"rule"`
			} `json:"routers"`
		} `json:"http"`
	}
	json.Unmarshal(body, &cfg)
	return cfg.HTTP.Routers["applied-callback"].Rule
}

// CallbackOf is the callback path of a body ("" without the probe), checked against
// the check service's health-check path.
func CallbackOf(t testing.TB, body []byte) string {
	t.Helper()
	var cfg struct {
		HTTP struct {
			Routers map[string]struct {
				Rule    string `json:"rule"`
				Service string `json:"service"`
			} `json:"routers"`
			Services map[string]struct {
				LoadBalancer struct {
					Servers     []struct{ URL string } `json:"servers"`
					HealthCheck *struct {
						Path     string `json:"path"`
						Hostname string `json:"hostname"`
					} `json:"healthCheck"`
				} `json:"loadBalancer"`
			} `json:"services"`
		} `json:"http"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		t.Fatal(err)
	}
	r, ok := cfg.HTTP.Routers["applied-callback"]
	if !ok {
		return ""
	}
	m := CallbackRule.FindStringSubmatch(r.Rule)
	if m == nil {
		t.Fatalf("callback rule %q", r.Rule)
	}
	check := cfg.HTTP.Services["applied-check"].LoadBalancer
	if check.HealthCheck == nil || check.HealthCheck.Path != m[1] || check.HealthCheck.Hostname != render.AppliedHost ||
		len(check.Servers) != 1 || check.Servers[0].URL != ProbeURL {
		t.Fatalf("check service %+v does not check the callback path %s at %s", check, m[1], ProbeURL)
	}
	return m[1]
}
