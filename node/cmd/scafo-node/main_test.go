package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
