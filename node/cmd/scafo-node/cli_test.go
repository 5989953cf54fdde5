package main

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/internal/testnode"
)

// TestStoreAdoptVerb: `scafo-node store adopt` leaves the request in the state dir
// (where the node picks it up), names what the node remembers, and fails on a state
// dir that does not exist.
func TestStoreAdoptVerb(t *testing.T) {
	bin := buildBinary(t)
	state := t.TempDir()
	out, err := runCLI(bin, "store", "adopt", "--stateDir="+state)
	if err != nil || !strings.Contains(string(out), "store adopt requested in "+state) {
		t.Fatalf("store adopt: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(state, "store-adopt")); err != nil {
		t.Fatalf("no request in the state dir: %v", err)
	}
	if out, err := runCLI(bin, "store", "adopt", "--stateDir="+filepath.Join(state, "missing")); err == nil {
		t.Fatalf("store adopt on a missing state dir succeeded:\n%s", out)
	}
	// SCAFO_STATEDIR, the node's own variable, names the state dir too.
	other := t.TempDir()
	cmd := exec.Command(bin, "store", "adopt")
	cmd.Env = append(envWithoutScafo(), "SCAFO_STATEDIR="+other)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), other) {
		t.Fatalf("store adopt with SCAFO_STATEDIR: %v\n%s", err, out)
	}
}

// TestCLIMarksWhatIsNotInEffect: `routes` marks the hosts the fail-closed 503 router
// serves; `domains paths` prints the map as published and marks, with the reason, each
// entry the routing document does not carry (issue 16, item 3). The CLI finds the admin
// token in the state dir.
func TestCLIMarksWhatIsNotInEffect(t *testing.T) {
	bin := buildBinary(t)
	n := startTestNode(t)
	cli := func(args ...string) string {
		t.Helper()
		out, err := runCLI(bin, append(args, "--url="+n.url, "--stateDir="+n.stateDir)...)
		if err != nil {
			t.Fatalf("scafo-node %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	cli("apps", "put", "shop", "--account=acme", "--placement=vps-a")
	cli("apps", "put", "blog", "--account=acme", "--placement=vps-a") // never ready
	cli("apps", "put", "other", "--account=rival", "--placement=vps-a")
	cli("domains", "claim", "shop", "shop.example.org")
	n.instanceReady(t, "shop")
	// The map as the application publishes it (the admin may publish too).
	req, _ := http.NewRequest(http.MethodPut, n.url+"/v1/apps/shop/domains/shop.example.org/paths", strings.NewReader(
		`{"paths":{"a":"shop.apps.example.com","b":"blog.apps.example.com","c":"other.apps.example.com","n":"nowhere.example","s":"shop.example.org"}}`))
	req.Header.Set("Authorization", "Bearer "+n.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("publish: %v %v", err, resp)
	}
	resp.Body.Close()

	var routes string
	_ = proc.Poll(10*time.Second, 50*time.Millisecond, func() error {
		if routes = cli("routes"); !strings.Contains(routes, "  /a → shop.apps.example.com") {
			return errors.New("no /a route yet")
		}
		return nil
	})
	for _, want := range []string{
		"\nblog.apps.example.com   blog         503 (fail closed: no ready instance)\n",
		"\nshop.example.org        shop         vps-a=127.0.0.1:25001\n  /a → shop.apps.example.com\napps.example.com ",
	} {
		if !strings.Contains(routes, want) {
			t.Errorf("routes: no %q in\n%s", want, routes)
		}
	}
	paths := cli("domains", "paths", "shop.example.org")
	for _, want := range []string{
		"shop.example.org (shop, account acme)\n",
		"  /a → shop.apps.example.com\n",
		"  /b → blog.apps.example.com   not in effect: the target's application has no ready instance\n",
		"  /c → other.apps.example.com  not in effect: the target belongs to another account\n",
		"  /n → nowhere.example         not in effect: the target is not a host of any application\n",
		"  /s → shop.example.org        not in effect: the target is this host itself\n",
	} {
		if !strings.Contains(paths, want) {
			t.Errorf("domains paths: no %q in\n%s", want, paths)
		}
	}
	j := cli("domains", "paths", "shop.example.org", "--json")
	if !strings.Contains(j, `"notInEffect"`) || !strings.Contains(j, `"b": "the target's application has no ready instance"`) {
		t.Errorf("domains paths --json:\n%s", j)
	}
}

// TestCLIIngresses: `ingresses` lists every ingress with what it holds, in words that
// say whether it applied it (the plugin) or was served it (the HTTP provider).
func TestCLIIngresses(t *testing.T) {
	bin := buildBinary(t)
	n := startTestNode(t)
	poll := func(hdr ...string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, n.url+"/v1/ingress/traefik", nil)
		req.Header.Set("Authorization", "Bearer "+testnode.IngressToken)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("poll: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	if out, err := runCLI(bin, "apps", "put", "shop", "--account=acme", "--placement=vps-a", "--url="+n.url, "--token="+n.admin); err != nil {
		t.Fatalf("apps put: %v\n%s", err, out)
	}
	// The served serial and revision, once the application is in. The node's own record
	// may be written (a bump that moves no route) after the application: in a .ci/run here
	// the ingresses reported serial 1 while the node knew 2 ("behind"). So the
	// ingresses report what is served now, and the listing is read again until both are
	// current, or the deadline.
	var serial, rev string
	var out []byte
	var missing []string
	if proc.Poll(10*time.Second, 50*time.Millisecond, func() error {
		req, _ := http.NewRequest(http.MethodGet, n.url+"/v1/ingress/traefik", nil)
		req.Header.Set("Authorization", "Bearer "+testnode.IngressToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		serial, rev = resp.Header.Get("X-Scafo-Serial"), resp.Header.Get("X-Scafo-Revision")
		resp.Body.Close()
		if serial == "" || serial == "0" {
			return errors.New("no serial served yet")
		}
		poll("X-Scafo-Ingress", "edge-p", "X-Scafo-Ingress-Kind", "plugin", "X-Scafo-Applied-Serial", serial, "X-Scafo-Applied-Revision", rev)
		poll("X-Scafo-Ingress", "edge-h")
		poll("X-Scafo-Ingress", "edge-h")
		if out, err = runCLI(bin, "ingresses", "--url="+n.url, "--token="+n.admin); err != nil {
			t.Fatalf("ingresses: %v\n%s", err, out)
		}
		missing = missing[:0]
		for _, want := range []string{
			"NAME    KIND    NODE   HOLDS",
			"edge-h  http    vps-a  served " + serial + "   " + rev + "  0       current",
			"edge-p  plugin  vps-a  applied " + serial + "  " + rev + "  0       current",
		} {
			if !strings.Contains(string(out), want) {
				missing = append(missing, want)
			}
		}
		if len(missing) > 0 {
			return errors.New("the listing is not current yet")
		}
		return nil
	}) != nil && (serial == "" || serial == "0") {
		t.Fatalf("no serial served: %q", serial)
	}
	for _, want := range missing {
		t.Errorf("ingresses: no %q in\n%s", want, out)
	}

	// A write that waits: edge-p (a plugin) stops polling at an old serial, so the
	// write is not live everywhere within --wait, and the command fails naming it;
	// edge-h (served) is counted once it polls again.
	out, err := runCLI(bin, "apps", "put", "blog", "--account=acme", "--placement=vps-a", "--wait=1s", "--url="+n.url, "--token="+n.admin)
	if err == nil || !strings.Contains(string(out), "edge-p (plugin on vps-a)") || !strings.Contains(string(out), "name       blog") {
		t.Errorf("apps put --wait with edge-p behind: %v\n%s", err, out)
	}
}
