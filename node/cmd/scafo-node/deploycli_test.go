package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/client"
)

// listening is a TCP listener on 127.0.0.1 (the test node's node.address) for the test's
// life: a port that serves, to the move's TCP check.
func listening(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// deadPort is a port of 127.0.0.1 nothing listens on (one just closed).
func deadPort(t *testing.T) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(freePort(t))
	n, _ := strconv.Atoi(p)
	return n
}

// adminCLI is the binary and a test node, and run, which calls the one on the other
// with the admin's token.
func adminCLI(t *testing.T) (bin string, n *testNode, run func(args ...string) (string, string, int)) {
	bin, n = buildBinary(t), startTestNode(t)
	return bin, n, func(args ...string) (string, string, int) {
		t.Helper()
		return runSplit(t, bin, append(args, "--url="+n.url, "--token="+n.admin)...)
	}
}

// currentPort is the port app's instance is on, as `instances allocate --json` says.
func currentPort(t *testing.T, bin string, n *testNode, app string) int {
	t.Helper()
	out, _, code := runSplit(t, bin, "instances", "allocate", app, "--json", "--url="+n.url, "--token="+n.admin)
	var i struct{ Port int }
	if code != 0 || json.Unmarshal([]byte(out), &i) != nil {
		t.Fatalf("instances allocate %s: exit %d %s", app, code, out)
	}
	return i.Port
}

// TestAMoveToAPortThatDoesNotServeIsRefusedAndAudited: `instances move` to a port where
// nothing listens was written and then served 503s (issue 45: 2 000 of 3 300 requests
// failed); the node now refuses it before writing (exit 2, naming the port and what
// failed), --force moves anyway, a move to a port that serves goes through, and every
// move that took effect is in the audit log with its ports (`audit`).
func TestAMoveToAPortThatDoesNotServeIsRefusedAndAudited(t *testing.T) {
	bin, n, run := adminCLI(t)
	if _, stderr, code := run("apps", "put", "shop", "--account=acme", "--placement=vps-a"); code != 0 {
		t.Fatalf("apps put: exit %d %s", code, stderr)
	}
	from := currentPort(t, bin, n, "shop")
	dead := deadPort(t)
	_, stderr, code := run("instances", "move", "shop", "--port="+strconv.Itoa(dead))
	if code != client.ExitRefused || !strings.Contains(stderr, "port not serving") ||
		!strings.Contains(stderr, "nothing listens on 127.0.0.1:"+strconv.Itoa(dead)) || !strings.Contains(stderr, "409") {
		t.Fatalf("move to dead port %d: exit %d, stderr %q; want exit 2, 409 port not serving, naming it", dead, code, stderr)
	}
	if got := currentPort(t, bin, n, "shop"); got != from {
		t.Fatalf("a refused move wrote: the instance is on %d, was %d", got, from)
	}
	if stdout, stderr, code := run("instances", "move", "shop", "--port="+strconv.Itoa(dead), "--force"); code != 0 ||
		!strings.Contains(stdout, "port "+strconv.Itoa(dead)) {
		t.Fatalf("forced move: exit %d %s %s", code, stdout, stderr)
	}
	live := listening(t)
	if stdout, stderr, code := run("instances", "move", "shop", "--port="+strconv.Itoa(live)); code != 0 ||
		!strings.Contains(stdout, "port "+strconv.Itoa(live)) {
		t.Fatalf("move to a port that serves: exit %d %s %s", code, stdout, stderr)
	}
	audit, stderr, code := run("audit", "--app=shop", "--action=instance.move")
	if code != 0 {
		t.Fatalf("audit: exit %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(audit), "\n")
	want := []string{
		"admin  vps-a  instance.move  acme     shop  port " + strconv.Itoa(dead) + " → " + strconv.Itoa(live),
		"admin  vps-a  instance.move  acme     shop  port " + strconv.Itoa(from) + " → " + strconv.Itoa(dead) + " (forced)",
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME ") || !strings.HasSuffix(lines[1], want[0]) || !strings.HasSuffix(lines[2], want[1]) {
		t.Errorf("audit --app=shop --action=instance.move:\n%s\nwant the two moves, newest first:\n%s", audit, strings.Join(want, "\n"))
	}
}

// TestAWaitTellsTheTruth: with no ingress polling the fleet, `--wait` said "held by all
// 0 live ingresses" and exited 0; now it says "no ingress polls this fleet" and exits 3
// (written, not live), unless --allowNoIngress. A write refused by the node exits 2, an
// unreachable node 4: a script tells "not written" from "written, not live".
func TestAWaitTellsTheTruth(t *testing.T) {
	bin, _, run := adminCLI(t)
	stdout, stderr, code := run("apps", "put", "blog", "--account=acme", "--placement=vps-a", "--wait=5s")
	if code != client.ExitNotLive || !strings.Contains(stderr, "apps put: written, not live: no ingress polls this fleet") ||
		!strings.Contains(stdout, "name       blog") {
		t.Errorf("apps put --wait with no ingress: exit %d, stdout %q, stderr %q; want exit 3 saying no ingress polls this fleet", code, stdout, stderr)
	}
	if _, stderr, code := run("apps", "get", "blog"); code != 0 {
		t.Errorf("the write that was not live is not in: exit %d %s", code, stderr)
	}
	if _, stderr, code := run("apps", "put", "blog", "--account=acme", "--placement=vps-a", "--wait=5s", "--allowNoIngress"); code != 0 ||
		!strings.Contains(stderr, "no ingress polls this fleet") {
		t.Errorf("--allowNoIngress: exit %d, stderr %q; want 0, still saying no ingress polls", code, stderr)
	}
	if _, stderr, code := run("apps", "put", "Bad_App", "--account=acme", "--wait=5s"); code != client.ExitRefused {
		t.Errorf("a refused write: exit %d (%s), want %d", code, stderr, client.ExitRefused)
	}
	if _, stderr, code := runSplit(t, bin, "routes", "--url="+freePort(t), "--token=x"); code != client.ExitUnreachable ||
		!strings.Contains(stderr, "cannot reach the node") {
		t.Errorf("an unreachable node: exit %d (%s), want %d", code, stderr, client.ExitUnreachable)
	}
}

// TestAMoveNotLiveInTimeIsRolledBack: a deploy either ends with the new release served
// by every live ingress or with the instance back where it was. An ingress (a plugin)
// that never applies the move keeps `instances move --wait` from going live: the CLI
// moves the instance back to its old port (a second write, audited) and exits 5 saying
// "rolled back to port N"; with --noRollback it leaves it and exits 3 ("written, not
// live on: …").
func TestAMoveNotLiveInTimeIsRolledBack(t *testing.T) {
	bin, n, run := adminCLI(t)
	if _, stderr, code := run("apps", "put", "shop", "--account=acme", "--placement=vps-a"); code != 0 {
		t.Fatalf("apps put: exit %d %s", code, stderr)
	}
	old, next := listening(t), listening(t)
	if _, stderr, code := run("instances", "move", "shop", "--port="+strconv.Itoa(old)); code != 0 {
		t.Fatalf("first move: exit %d %s", code, stderr)
	}
	// edge-p reports the serial served now, and never a later one.
	req, _ := http.NewRequest(http.MethodGet, n.url+"/v1/ingress/traefik", nil)
	req.Header.Set("Authorization", "Bearer "+testnode.IngressToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req.Header.Set("X-Scafo-Ingress", "edge-p")
	req.Header.Set("X-Scafo-Ingress-Kind", "plugin")
	req.Header.Set("X-Scafo-Applied-Serial", resp.Header.Get("X-Scafo-Serial"))
	req.Header.Set("X-Scafo-Applied-Revision", resp.Header.Get("X-Scafo-Revision"))
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("edge-p's poll: %v %v", err, resp)
	}
	resp.Body.Close()

	_, stderr, code := run("instances", "move", "shop", "--port="+strconv.Itoa(next), "--wait=2s")
	if code != client.ExitRolledBack || !strings.Contains(stderr, "written, not live on: edge-p (plugin on vps-a)") ||
		!strings.Contains(stderr, "rolled back to port "+strconv.Itoa(old)) {
		t.Fatalf("move --wait with edge-p behind: exit %d, stderr %q; want exit 5, rolled back to port %d", code, stderr, old)
	}
	if got := currentPort(t, bin, n, "shop"); got != old {
		t.Fatalf("after the rollback the instance is on %d, want %d", got, old)
	}
	audit, _, _ := run("audit", "--app=shop", "--action=instance.move", "--limit=2")
	if !strings.Contains(audit, "port "+strconv.Itoa(next)+" → "+strconv.Itoa(old)+" (forced)") ||
		!strings.Contains(audit, "port "+strconv.Itoa(old)+" → "+strconv.Itoa(next)+"\n") {
		t.Errorf("the move and its rollback are not both audited:\n%s", audit)
	}
	_, stderr, code = run("instances", "move", "shop", "--port="+strconv.Itoa(next), "--wait=2s", "--noRollback")
	if code != client.ExitNotLive || !strings.Contains(stderr, "written, not live on: edge-p") {
		t.Fatalf("--noRollback: exit %d, stderr %q; want exit 3", code, stderr)
	}
	if got := currentPort(t, bin, n, "shop"); got != next {
		t.Fatalf("with --noRollback the instance is on %d, want %d", got, next)
	}
}
