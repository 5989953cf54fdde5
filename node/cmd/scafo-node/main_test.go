package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildBinary builds scafo-node once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "scafo-node-test"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "scafo-node")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestQuickStartWithNoConfiguration is the README's quick start: no flags, no file;
// state lands in ./scafo-state, tokens are minted there, and the routing endpoints
// answer with the minted ingress token. (The listen address comes from SCAFO_LISTEN
// only so the test does not collide with a node already on :7400.)
func TestQuickStartWithNoConfiguration(t *testing.T) {
	bin := buildBinary(t)
	work := t.TempDir()
	addr := freePort(t)
	cmd := exec.Command(bin)
	cmd.Dir = work
	cmd.Env = append(envWithoutScafo(), "SCAFO_LISTEN="+addr)
	if os.Geteuid() == 0 {
		// As root the default state dir is /var/lib/scafo; keep the test out of it.
		cmd.Env = append(cmd.Env, "SCAFO_STATEDIR="+filepath.Join(work, "scafo-state"))
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	proc.WaitFor(t, "readyz 200", 20*time.Second, func() error { return proc.HTTPOK(nil, base+"/v1/readyz") })
	tok, err := os.ReadFile(filepath.Join(work, "scafo-state", "ingress-token"))
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(work, "scafo-state", "ingress-token"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("ingress-token mode %v", fi.Mode().Perm())
	}
	// The embedded default: one node, no applications; the API apex of apps.localhost
	// routes to this node once its first heartbeat record is read (the first pass may
	// publish before it: readiness means "a complete pass", not "my record is in").
	var body []byte
	var status int
	if proc.Poll(time.Until(deadline), 50*time.Millisecond, func() error {
		req, _ := http.NewRequest("GET", base+"/v1/ingress/traefik", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if status = resp.StatusCode; status != 200 || !strings.Contains(string(body), "Host(`apps.localhost`)") {
			return errors.New("no apps.localhost route yet")
		}
		return nil
	}) != nil {
		t.Fatalf("traefik config: %d %s", status, body)
	}

	// The CLI finds the node and the admin token in the state dir.
	out, err := exec.Command(bin, "routes", "--url="+base, "--stateDir="+filepath.Join(work, "scafo-state")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "apps.localhost") {
		t.Fatalf("scafo-node routes: %v\n%s", err, out)
	}

	// SIGTERM: graceful, exit 0.
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit within 15s of SIGTERM")
	}
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the shipped unit (pointed at a
// freshly built binary, since verify checks that ExecStart exists).
func TestSystemdUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not found")
		}
		t.Skip("systemd-analyze not installed")
	}
	bin := buildBinary(t)
	unit, err := os.ReadFile("../../../deploy/node/scafo-node.service")
	if err != nil {
		t.Fatal(err)
	}
	socket, err := os.ReadFile("../../../deploy/node/scafo-node.socket")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "scafo-node.service")
	os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/bin/scafo-node", bin)), 0o644)
	sockPath := filepath.Join(dir, "scafo-node.socket")
	os.WriteFile(sockPath, socket, 0o644)
	out, err := exec.Command(sa, "verify", path, sockPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
