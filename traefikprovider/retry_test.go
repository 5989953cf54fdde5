package traefikprovider

import (
	"encoding/json"
	"testing"

	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/routing"
)

// TestRetryMiddlewareIsPassedThroughUntouched: the node's render carries the retry
// middleware (http.middlewares and each application router's middlewares list); the
// plugin hands Traefik exactly the bytes the node served, so both survive, and decode
// with encoding/json (what Traefik does with a plugin's json.RawMessage) into the
// fields Traefik v3.6 reads (pkg/config/dynamic Router.Middlewares, Middleware.Retry
// attempts and initialInterval).
func TestRetryMiddlewareIsPassedThroughUntouched(t *testing.T) {
	doc := &routing.Document{V: routing.Version, Routes: []routing.Route{{
		Host: "shop.apps.example.com", Application: "shop", HealthPath: "/healthz",
		Upstreams: []routing.Upstream{{Node: "vps-a", Address: "10.83.0.1:24100", APIPort: 7400}},
	}}}
	out, err := render.Traefik(doc, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := string(out)
	forEachRuntime(t, func(t *testing.T, start starter) {
		node := newFakeNode(t, body)
		h := start(t, testConfig(node.URL()))
		got := h.next(t, wait)
		if got != body {
			t.Fatalf("emitted %s\nwant the node's body %s", got, body)
		}
		var cfg struct {
			HTTP struct {
				Routers map[string]struct {
					Middlewares []string `json:"middlewares"`
				} `json:"routers"`
				Middlewares map[string]struct {
					Retry *struct {
						Attempts        int    `json:"attempts"`
						InitialInterval string `json:"initialInterval"`
					} `json:"retry"`
				} `json:"middlewares"`
			} `json:"http"`
		}
		if err := json.Unmarshal([]byte(got), &cfg); err != nil {
			t.Fatal(err)
		}
		r := cfg.HTTP.Routers["host-shop_apps_example_com"]
		if len(r.Middlewares) != 1 || r.Middlewares[0] != render.RetryMiddleware {
			t.Errorf("router middlewares %v, want [%s]", r.Middlewares, render.RetryMiddleware)
		}
		m := cfg.HTTP.Middlewares[render.RetryMiddleware].Retry
		if m == nil || m.Attempts != render.DefaultRetryAttempts || m.InitialInterval != render.DefaultRetryInitialInterval {
			t.Errorf("retry middleware %+v, want attempts %d, initialInterval %s", m, render.DefaultRetryAttempts, render.DefaultRetryInitialInterval)
		}
	})
}
