package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Issue 26: Caddy as the second ingress, as a process. deploy/caddy (a Go module of its
// own) is built once per run, and run on its shipped Caddyfile as an operator runs it
// (the environment names the ports and the node), beside a Traefik on the shipped
// HTTP-provider configuration reading the same node. The same requests go through both:
// every one Traefik routes to an application, Caddy routes to the same application,
// and neither ever sends a flipped prefix to the host's own application. Then a flip
// through the node reaches both.

var caddyBuild struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// caddyBinary is CADDY_BIN, or the Caddy .ci/caddy.sh prints: built from deploy/caddy
// when nothing in the user cache has the key of this tree's inputs, reused otherwise.
func caddyBinary(t *testing.T) string {
	t.Helper()
	caddyBuild.once.Do(func() {
		if b := os.Getenv("CADDY_BIN"); b != "" {
			caddyBuild.bin = b
			return
		}
		cmd := exec.Command(filepath.Join(bins.root, ".ci", "caddy.sh"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		caddyBuild.bin, caddyBuild.err, caddyBuild.out = strings.TrimSpace(string(out)), err, []byte(stderr.String())
	})
	if caddyBuild.err != nil {
		t.Fatalf("building deploy/caddy (.ci/caddy.sh): %v\n%s", caddyBuild.err, caddyBuild.out)
	}
	return caddyBuild.bin
}

// startCaddy runs Caddy on deploy/caddy/Caddyfile as shipped (no admin API), reading n, and waits until
// it routes host to want. It is a *traefik for the requests' sake (get, expectServedBy):
// only its web port is used.
func startCaddy(t *testing.T, name string, n *node, host, path, want string) *traefik {
	t.Helper()
	requireBinaries(t)
	bin := caddyBinary(t)
	for attempt := 1; ; attempt++ {
		web, tls := freePort(t, "127.0.0.1"), freePort(t, "127.0.0.1")
		dir := t.TempDir()
		c := newIngress(t, name, traefikPorts{web: web, websecure: tls}, bin, []string{"run", "--config", filepath.Join(bins.root, "deploy", "caddy", "Caddyfile"), "--adapter", "caddyfile"}, dir, []string{
			"SCAFO_INGRESS_TOKEN=" + testIngressToken,
			"SCAFO_ENDPOINTS=" + nodeBase(n),
			"CADDY_HTTP_PORT=" + strconv.Itoa(web),
			"CADDY_HTTPS_PORT=" + strconv.Itoa(tls),
			"ACME_CA=https://127.0.0.1:1/directory", // never reached: no TLS handshake here
			"XDG_DATA_HOME=" + filepath.Join(dir, "data"),
			"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
			"HOME=" + dir,
		})
		p := c.proc
		p.MustStart(t)
		err := p.WaitUntil(routeTimeout, func() error { return c.servedBy(host, path, want) })
		if err == nil {
			return c
		}
		if attempt < 4 && p.Exited() {
			t.Logf("%s exited (a probed port taken?); retrying on fresh ports", name)
			continue
		}
		t.Fatalf("%s: waiting for %s%s to reach %s: %v\n%s", name, host, path, want, err, p.Output())
	}
}

func TestCaddyRoutesTheDocumentLikeTraefik(t *testing.T) {
	f := startFleet(t, 1, nodeOptions{args: ownPorts()})
	n1 := f.nodes[0]
	f.deploy(t, "site", "acme", []*node{n1}, "/healthz")
	f.deploy(t, "blog", "acme", []*node{n1}, "/healthz")
	const host, target = "both.example.org", "blog.apps.localhost"
	n1.claim(t, "site", host)
	n1.putPaths(t, "site", host, map[string]string{"b": target, "keep": target})
	tr := startTraefik(t, "traefik", traefikOptions{node: n1})
	tr.waitServedBy(t, host, "/b/x", "blog@n1", routeTimeout)
	cd := startCaddy(t, "caddy", n1, host, "/b/x", "blog@n1")

	paths := []string{
		"/b", "/b/", "/b/x", "/b/x/y?q=1", "/b?q=1", "/keep", "/keep/z",
		"/bat", "/b.", "/b-x", "/", "/c", "/c/b", "/B", "/keepx",
		"//b", "//b/x", "/./b", "/x/../b", "/b/../c", "/%62", "/%62/x", "/b%2Fx", "/%2e%2e/b",
		"/b;x", "/b%3Bx", "/b%00", "/b%5Cx", "/b%25", "/healthz",
	}
	// Where the two may differ, and why. Traefik resolves dot segments before routing
	// (sanitizePath), so it only ever sees the normalised first segment; Caddy selects
	// on the raw first segment too (a hit there stands unless the normalised one hits
	// another target: deploy/caddy/README.md). Neither sends a flipped prefix to site.
	differs := map[string]string{"/b/../c": "blog@n1"}
	routed := 0
	for _, p := range paths {
		rt, errT := tr.get(host, p)
		rc, errC := cd.get(host, p)
		if errT != nil || errC != nil {
			t.Errorf("%s: Traefik %v, Caddy %v", p, errT, errC)
			continue
		}
		// Neither ever sends a flipped prefix's path to the host's own application.
		for who, r := range map[string]response{"Traefik": rt, "Caddy": rc} {
			if r.echo != nil && r.echo.Name == "site@n1" && (r.echo.RawPath == "/b" || len(r.echo.RawPath) > 2 && r.echo.RawPath[:3] == "/b/") {
				t.Errorf("%s: %s sent the flipped prefix to site (upstream saw %q)", p, who, r.echo.RawPath)
			}
		}
		if rt.echo != nil {
			routed++
			if want, ok := differs[p]; ok {
				if rc.from() != want {
					t.Errorf("%s: Caddy routed it to %s, want %s (the documented difference)", p, rc.from(), want)
				}
			} else if rc.from() != rt.from() {
				t.Errorf("%s: Traefik routed it to %s, Caddy to %s", p, rt.from(), rc.from())
			}
		} else if rc.echo != nil {
			// Traefik refused it (its path safety): Caddy may route it only to the
			// application Traefik's routing rules would pick for the decoded path,
			// which is never a flipped prefix on site (checked above).
			t.Logf("%s: Traefik %d, Caddy routed it to %s (upstream saw %q)", p, rt.status, rc.from(), rc.echo.RawPath)
		}
	}
	if routed < 15 {
		t.Fatalf("only %d of %d paths routed by Traefik: the comparison proves little", routed, len(paths))
	}
	// A host the document does not name: neither routes it.
	for who, ing := range map[string]*traefik{"Traefik": tr, "Caddy": cd} {
		if r, err := ing.get("nobody.example.org", "/"); err != nil || r.echo != nil || r.status != http.StatusNotFound {
			t.Errorf("%s: an unknown host answered %v %v, want 404", who, r.from(), err)
		}
	}

	// A flip through the node reaches both.
	n1.putPaths(t, "site", host, map[string]string{"keep": target})
	tr.waitServedBy(t, host, "/b/x", "site@n1", routeTimeout)
	cd.waitServedBy(t, host, "/b/x", "site@n1", routeTimeout)
	tr.expectServedBy(t, host, "/keep", "blog@n1")
	cd.expectServedBy(t, host, "/keep", "blog@n1")
}
