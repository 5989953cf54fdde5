package scafo

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// BenchmarkProxy compares, in one Caddy in one run, a request through the scafo routing
// modules (matcher + dynamic upstreams, lb_policy first) with the same request through a
// plain reverse_proxy with a static upstream: the difference is the routing module's
// per-request cost.
func BenchmarkProxy(b *testing.B) {
	root := b.TempDir()
	n := startNode(b, "vps-a", root)
	up := startUpstream(b, "shop")
	fs := fleetStore{b, n.st}
	fs.app("shop", "acme", "vps-b")
	fs.peer("vps-b", map[string]fleet.Instance{"shop": up.instance()})
	doc := n.waitDocument("shop, ready", func(d *routing.Document) bool {
		r := routeOf(d, "shop.apps.example.com")
		return r != nil && len(r.Upstreams) == 1
	})

	scafoPort, staticPort := freePort(b), freePort(b)
	b.Setenv("SCAFO_INGRESS_TOKEN", testIngressToken)
	b.Setenv("XDG_DATA_HOME", b.TempDir())
	b.Setenv("XDG_CONFIG_HOME", b.TempDir())
	rp := func(extra map[string]any) map[string]any {
		h := map[string]any{"handler": "reverse_proxy"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"storage": map[string]any{"module": "file_system", "root": b.TempDir()},
		"apps": map[string]any{
			"scafo": map[string]any{"endpoints": []string{n.url}},
			"http": map[string]any{"servers": map[string]any{
				"scafo": map[string]any{"listen": []string{"127.0.0.1:" + strconv.Itoa(scafoPort)}, "automatic_https": map[string]any{"disable": true},
					"routes": []any{map[string]any{"match": []any{map[string]any{"scafo": map[string]any{}}}, "handle": []any{rp(map[string]any{
						"dynamic_upstreams": map[string]any{"source": "scafo"},
						"load_balancing":    map[string]any{"selection_policy": map[string]any{"policy": "first"}, "retries": 3},
						"health_checks":     map[string]any{"passive": map[string]any{"fail_duration": "10s"}},
					})}}}},
				"static": map[string]any{"listen": []string{"127.0.0.1:" + strconv.Itoa(staticPort)}, "automatic_https": map[string]any{"disable": true},
					"routes": []any{map[string]any{"handle": []any{rp(map[string]any{
						"upstreams": []any{map[string]any{"dial": "127.0.0.1:" + strconv.Itoa(up.port)}},
					})}}}},
			}},
		},
	}
	js, _ := json.Marshal(cfg)
	if err := caddy.Load(js, true); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { caddy.Stop() })
	v, err := caddy.ActiveContext().App("scafo")
	if err != nil {
		b.Fatal(err)
	}
	p := v.(*App).Poller()
	deadline := time.After(30 * time.Second)
	for {
		ch := p.Changed()
		if tab := p.Table(); tab != nil && tab.Doc.Revision == doc.Revision {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			b.Fatal("Caddy never got the document")
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, c := range []struct {
		name string
		port int
	}{{"scafo", scafoPort}, {"static", staticPort}} {
		b.Run(c.name, func(b *testing.B) {
			url := "http://127.0.0.1:" + strconv.Itoa(c.port) + "/x"
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodGet, url, nil)
					req.Host = "shop.apps.example.com"
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}

// BenchmarkLookup is the table lookup alone (a path-mapped host, a normalised spelling).
func BenchmarkLookup(b *testing.B) {
	tab := testTable(b)
	b.ReportAllocs()
	for b.Loop() {
		if tab.Lookup("ti.to", "/bob/../paulca/x").Target != "go.tito.io" {
			b.Fatal("wrong target")
		}
	}
}
