package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOperatorRoutesBesideTheFleetsShareOneTraefik: the shipped file provider
// (providers.file on a directory, watch on) beside the node's HTTP provider, on one real
// Traefik, as docs/traefik.md ("Your own routes beside the fleet's") says:
//
//   - an operator's router for a host the fleet does not route serves it, and the
//     fleet's routers serve theirs;
//   - an operator's router that names a fleet host with its priority unset (Traefik's
//     default, the rule's length) never takes a request from the fleet: the fleet's
//     routers carry 10000-50000;
//   - one with priority 100000 (the documented operator band) takes exactly what its rule
//     matches, added while Traefik runs (watch), and the rest of the host stays the
//     fleet's;
//   - a middleware the operator defines in that directory and the node's configuration
//     declares (traefik.middlewares), listed on a fleet application, runs on the
//     fleet's router of that application and on no other router;
//   - the access log is one JSON object per request on standard output.
func TestOperatorRoutesBesideTheFleetsShareOneTraefik(t *testing.T) {
	f := startFleet(t, 1, nodeOptions{args: []string{"--traefik.middlewares=stamp@file"}})
	n1 := f.nodes[0]
	f.deploy(t, "shop", "acme", []*node{n1}, "/healthz")
	own := startEcho(t, "own", "127.0.0.1", 0)

	// The operator's existing file, as written for a Traefik of their own: no entry
	// points named (every entry point), no provider suffixes (one file provider).
	dir := t.TempDir()
	writeDynamic(t, dir, "own.yml", fmt.Sprintf(`http:
  routers:
    own:
      rule: Host(%[1]sown.example.org%[1]s)
      service: own
    own-beside:
      rule: Host(%[1]sshop.apps.localhost%[1]s) && PathPrefix(%[1]s/own%[1]s)
      service: own
  middlewares:
    stamp:
      headers:
        customResponseHeaders:
          X-Operator: stamped
  services:
    own:
      loadBalancer:
        servers:
          - url: http://%[2]s
`, "`", own.addr()))

	tr := startTraefik(t, "traefik", traefikOptions{node: n1, operator: operatorSide{dynamicDir: dir, accessLog: true}})
	tr.waitServedBy(t, "shop.apps.localhost", "/", "shop@n1", routeTimeout)
	tr.waitServedBy(t, "own.example.org", "/x", "own", routeTimeout)

	// Priority unset: the fleet's host router (40000) outranks the operator's longer rule.
	tr.expectServedBy(t, "shop.apps.localhost", "/own", "shop@n1")
	tr.expectServedBy(t, "shop.apps.localhost", "/own/x", "shop@n1")
	rd, err := tr.rawData()
	if err != nil {
		t.Fatal(err)
	}
	// A router with no entry points is on every entry point; on the shipped ones (which
	// carry http settings, a "model") Traefik names each copy <entry point>-<router>.
	beside, ok := rd.Routers["web-own-beside@file"]
	if !ok || beside.Status != "enabled" || beside.Priority != len(beside.Rule) {
		t.Fatalf("web-own-beside@file: %+v (present %v); want enabled, at Traefik's default priority (the rule's length)", beside, ok)
	}

	// Priority 100000, added while Traefik runs: it takes /own on the fleet's host, and
	// only that.
	writeDynamic(t, dir, "over.yml", "http:\n  routers:\n    own-over:\n      rule: Host(`shop.apps.localhost`) && PathPrefix(`/own`)\n      service: own@file\n      priority: 100000\n")
	tr.waitServedBy(t, "shop.apps.localhost", "/own/x", "own", routeTimeout)
	tr.expectServedBy(t, "shop.apps.localhost", "/own", "own")
	tr.expectServedBy(t, "shop.apps.localhost", "/", "shop@n1")
	tr.expectServedBy(t, "shop.apps.localhost", "/cart/own", "shop@n1")
	// PathPrefix is a string prefix: /owner is the operator's too (docs/traefik.md: write
	// Path(`/own`) || PathPrefix(`/own/`) for a segment, as the fleet's rules do).
	tr.expectServedBy(t, "shop.apps.localhost", "/owner", "own")
	tr.expectServedBy(t, "own.example.org", "/", "own")

	// The operator's middleware on the fleet's application: its router lists stamp@file,
	// and its answers carry the header; the operator's own routers do not list it.
	if st, b := n1.do(t, http.MethodPut, "/v1/apps/shop", map[string]any{
		"name": "shop", "account": "acme", "placement": []string{"n1"},
		"health": map[string]string{"path": "/healthz"}, "middlewares": []string{"stamp@file"},
	}, testAdminToken); st != http.StatusOK {
		t.Fatalf("PUT /v1/apps/shop with middlewares: %d %s", st, b)
	}
	waitFor(t, "shop's answers to carry the operator's header", routeTimeout, func() error {
		h, from, err := tr.headerFrom("shop.apps.localhost", "/", "X-Operator")
		if err != nil {
			return err
		}
		if h != "stamped" || from != "shop@n1" {
			return fmt.Errorf("X-Operator %q from %s", h, from)
		}
		return nil
	})
	if h, from, err := tr.headerFrom("own.example.org", "/", "X-Operator"); err != nil || h != "" || from != "own" {
		t.Errorf("own.example.org: X-Operator %q from %s (%v); want no header, from own", h, from, err)
	}
	if h, from, err := tr.headerFrom("shop.apps.localhost", "/own", "X-Operator"); err != nil || h != "" || from != "own" {
		t.Errorf("shop.apps.localhost/own (the operator's router): X-Operator %q from %s (%v); want no header, from own", h, from, err)
	}

	// Both providers' routers are enabled, with no error.
	if rd, err = tr.rawData(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-own@file", "web-own-beside@file", "web-own-over@file"} {
		if r, ok := rd.Routers[name]; !ok || r.Status != "enabled" || len(r.Err) > 0 {
			t.Errorf("router %s: %+v (present %v)", name, r, ok)
		}
	}
	tr.requireProviderClean(t, "http")
	// The fleet's router of shop lists the operator's middleware, then the fleet's retry.
	if r := rd.Routers["host-shop_apps_localhost@http"]; !slices.Equal(r.Middlewares, []string{"stamp@file", "scafo-retry@http"}) {
		t.Errorf("host-shop_apps_localhost@http middlewares %v, want [stamp@file scafo-retry@http] (Traefik qualifies the render's own)", r.Middlewares)
	}

	// The access log: JSON lines on standard output, one per request, naming the host.
	hosts := map[string]int{}
	for _, line := range strings.Split(tr.proc.Output(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var entry struct {
			RequestHost      string
			RouterName       string
			DownstreamStatus int
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("access log line is not JSON: %v: %.200q", err, line)
			continue
		}
		hosts[entry.RequestHost+" "+entry.RouterName]++
	}
	for _, want := range []string{"own.example.org web-own@file", "shop.apps.localhost web-own-over@file", "shop.apps.localhost host-shop_apps_localhost@http"} {
		if hosts[want] == 0 {
			t.Errorf("no access log line for %s; lines by host and router: %v", want, hosts)
		}
	}
}

// headerFrom sends GET path for host through the web entry point and returns the
// response's header name and who answered.
func (tr *traefik) headerFrom(host, path, name string) (value, from string, err error) {
	r, err := tr.get(host, path)
	return r.header.Get(name), r.from(), err
}

// writeDynamic writes one operator file into the file provider's directory through a
// rename, as an editor or a configuration tool does.
func writeDynamic(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}
