package render

import (
	"encoding/json"
	"strings"
	"testing"
)

// Hostile round six: whatever a poller sends as X-Scafo-Applied-Probe or Host,
// ValidateBaseURL either refuses it or returns a URL it accepts again unchanged, and
// the probe body built with it is valid JSON with the probe's objects: a value that
// passed the handler's check can never fail the render (a 500) nor break the body.
func FuzzValidateBaseURLFeedsAValidProbe(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:80", "https://[::1]:443", "http://a.b:", "HTTP://X.Y", "http://[::1%25lo]:1",
		"http://a.b:80/", "http://[fe80::1]", "http://a`b", "http://a\"b", "http://[a]:1", "http://0:1", "http://-:1"} {
		f.Add(s)
	}
	body := []byte(`{"http":{"routers":{"r":{"rule":"Host(` + "`a`" + `)","service":"s"}},"services":{"s":{}}}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ValidateBaseURL(raw)
		if err != nil {
			return
		}
		if again, err := ValidateBaseURL(u); err != nil || again != u {
			t.Fatalf("%q -> %q -> %q, %v", raw, u, again, err)
		}
		out, err := WithAppliedProbe(body, AppliedProbe{Ingress: "edge", Revision: "ab", MAC: "cd", EntryPoint: u, Node: u})
		if err != nil {
			t.Fatalf("%q -> %q: %v", raw, u, err)
		}
		var v map[string]map[string]map[string]json.RawMessage
		if err := json.Unmarshal(out, &v); err != nil || len(v["http"]["routers"]) != 3 || len(v["http"]["services"]) != 3 {
			t.Fatalf("%q: body %s (%v)", raw, out, err)
		}
		if strings.ContainsAny(u, "`\"\\ @/?#%") && strings.Count(u, "/") != 2 {
			t.Fatalf("%q -> %q", raw, u)
		}
	})
}
