package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/listengate"
)

// heldSocket is what systemd does for scafo-node.socket: a listening socket this test
// process holds and hands to the node as descriptor 3 (LISTEN_FDS=1, LISTEN_PID the
// node's: a shell sets it to its own pid, then execs the node in its place).
type heldSocket struct {
	ln   net.Listener
	file *os.File
	port int
}

func holdSocket(t *testing.T) *heldSocket {
	t.Helper()
	ln, err := listengate.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &heldSocket{ln: ln, file: f, port: ln.Addr().(*net.TCPAddr).Port}
}

// startOnHeld starts the node on h with env (SCAFO_* settings) and, when notify is
// set, NOTIFY_SOCKET; its output goes to the returned buffer's file.
func startOnHeld(t *testing.T, h *heldSocket, notify string, env ...string) (*exec.Cmd, func() string, <-chan error) {
	t.Helper()
	bin := buildBinary(t)
	work := t.TempDir()
	logPath := filepath.Join(work, "node.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0"`, bin)
	cmd.Dir = work
	cmd.Env = append(envWithoutScafo(), "LISTEN_FDS=1", "LISTEN_FDNAMES=scafo-node.socket",
		"SCAFO_STATEDIR="+filepath.Join(work, "state"))
	if notify != "" {
		cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+notify)
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.ExtraFiles = []*os.File{h.file}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, func() string { b, _ := os.ReadFile(logPath); return string(b) }, exited
}

func exitCode(t *testing.T, err error, output func() string) int {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the node ended with %v, want an exit status: %s", err, output())
	}
	return ee.ExitCode()
}

// TestTheNodeServesTheSocketTheServiceManagerHolds: started with a socket handed over
// (scafo-node.socket), the node serves it, tells the manager READY=1 once serving, and
// at its stop leaves the socket as it found it: still listening in the manager's hands,
// not gated, what arrives after queued for the next run. The port is never free.
func TestTheNodeServesTheSocketTheServiceManagerHolds(t *testing.T) {
	h := holdSocket(t)
	notify := filepath.Join(t.TempDir(), "notify")
	nl, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notify, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	cmd, output, exited := startOnHeld(t, h, notify, "SCAFO_LISTEN=:"+strconv.Itoa(h.port))
	nl.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 256)
	n, err := nl.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("the manager read %q, %v; want READY=1: %s", buf[:n], err, output())
	}
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(h.port) + "/v1/healthz")
	if err != nil {
		t.Fatalf("the held socket, once READY=1: %v: %s", err, output())
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz on the held socket: %s", resp.Status)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the node's stop: %v: %s", err, output())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the node did not stop: %s", output())
	}
	if !strings.Contains(output(), "the service manager holds it for the next run") && !strings.Contains(output(), "scafo-node stopped") {
		t.Fatalf("no stop in the log: %s", output())
	}
	// The node is gone; the port is not free, and not gated: a connection completes its
	// handshake at once and waits in the queue for the next run (here, this test).
	c, err := net.DialTimeout("tcp", h.ln.Addr().String(), 500*time.Millisecond)
	if err != nil {
		t.Fatalf("after the node's stop, the held port: %v (gated, or closed)", err)
	}
	defer c.Close()
	if _, err := net.Listen("tcp", h.ln.Addr().String()); err == nil {
		t.Fatal("after the node's stop, another listener bound the held port")
	}
	sc, err := h.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	sc.Close()
}

// TestANodeRefusedForItsConfigurationAnswersWhatQueued: a bad setting exits 78 (the
// unit's RestartPreventExitStatus=) naming the setting, and a connection queued on the
// held socket meanwhile is answered 503, not left there (systemd would start the node
// again for it, in a loop, until the socket's trigger limit closed the port). A socket on
// another port than listen's is refused, naming both.
func TestANodeRefusedForItsConfigurationAnswersWhatQueued(t *testing.T) {
	h := holdSocket(t)
	queued, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer queued.Close()
	if _, err := io.WriteString(queued, "GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	_, output, exited := startOnHeld(t, h, "", "SCAFO_LISTEN=:"+strconv.Itoa(h.port), "SCAFO_PROBE_INTERVAL=5ms")
	select {
	case err := <-exited:
		if code := exitCode(t, err, output); code != exitConfig {
			t.Fatalf("exit status %d, want %d: %s", code, exitConfig, output())
		}
		// It answered for refuseWindow before exiting: a client connecting in a loop
		// starts it at most once a window (a lower bound: no load makes it early).
		if took := time.Since(started); took < refuseWindow {
			t.Errorf("the refused node exited after %s, before refuseWindow (%s)", took, refuseWindow)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the node did not exit: %s", output())
	}
	if !strings.Contains(output(), "probe.interval") || !strings.Contains(output(), "SCAFO_PROBE_INTERVAL") {
		t.Errorf("the refusal does not name the setting and its source: %s", output())
	}
	queued.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(queued), nil)
	if err != nil {
		t.Fatalf("the queued connection: %v (left in the queue)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the queued connection was answered %s, want 503", resp.Status)
	}

	// listen's port is not the socket's.
	_, output, exited = startOnHeld(t, h, "", "SCAFO_LISTEN=:1")
	select {
	case err := <-exited:
		if code := exitCode(t, err, output); code != exitConfig {
			t.Fatalf("exit status %d, want %d: %s", code, exitConfig, output())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the node did not exit: %s", output())
	}
	if out := output(); !strings.Contains(out, `listen ":1"`) || !strings.Contains(out, "scafo-node.socket") {
		t.Errorf("a socket on another port than listen's: %s", out)
	}
}

// TestConfigCheckSaysWhetherTheNodeWouldStart: `scafo-node config check` exits 0 on a
// good file and 78 on a bad one, naming the setting and where it came from (the file's
// key, a variable, a flag), starting nothing.
func TestConfigCheckSaysWhetherTheNodeWouldStart(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("listen: \":7400\"\n"), 0o644)
	os.WriteFile(bad, []byte("probe:\n  interval: 5ms\n"), 0o644)
	state := "SCAFO_STATEDIR=" + filepath.Join(dir, "never")
	run := func(env []string, args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(append(envWithoutScafo(), state), env...)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	for _, tc := range []struct {
		env        []string
		args       []string
		code       int
		want, also string
	}{
		{nil, []string{"config", "check", good}, 0, "configuration OK: " + good, ""},
		{nil, []string{"config", "check", "--configFile=" + good}, 0, "configuration OK: " + good, ""},
		{nil, []string{"config", "check", bad}, exitConfig, "probe.interval", "in " + bad},
		{[]string{"SCAFO_PROBE_INTERVAL=5ms"}, []string{"config", "check", good}, exitConfig, "probe.interval", "SCAFO_PROBE_INTERVAL"},
		{nil, []string{"config", "check", good, "--probe.interval=5ms"}, exitConfig, "probe.interval", "--probe.interval"},
		{nil, []string{"config", "check", filepath.Join(dir, "missing.yaml")}, exitConfig, "missing.yaml", ""},
	} {
		out, code := run(tc.env, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) || !strings.Contains(out, tc.also) {
			t.Errorf("%v %v: exit %d, %q; want exit %d with %q and %q", tc.env, tc.args, code, out, tc.code, tc.want, tc.also)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never")); !os.IsNotExist(err) {
		t.Errorf("config check touched the state dir: %v", err)
	}
}

// TestATokenForTwoRolesFoundAtTheStartExits78 (hostile review 1, finding 4): a token
// two roles accept, found only in the token files at the start (not by the loader), is
// the configuration too: exit 78, which the unit does not restart every 2 s.
func TestATokenForTwoRolesFoundAtTheStartExits78(t *testing.T) {
	bin := buildBinary(t)
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	const tok = "0123456789abcdef0123456789abcdef"
	if err := os.WriteFile(filepath.Join(state, "admin-token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(envWithoutScafo(), "SCAFO_STATEDIR="+state, "SCAFO_LISTEN=127.0.0.1:0", "SCAFO_INGRESS_TOKEN="+tok)
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err, func() string { return string(out) }); code != exitConfig || !strings.Contains(string(out), "hold the same token") {
		t.Fatalf("exit %d: %s; want %d naming the two settings", code, out, exitConfig)
	}
}
