package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
)

// A node stopped (SIGTERM) with connections waiting in its API socket's accept queue
// (the node was frozen while they connected and wrote their requests, so the stop races
// their accepts) answers every one of them, resets none: Run gates and drains its socket
// and waits for their requests before Shutdown.
func TestShutdownAnswersTheRequestsQueuedOnItsSocket(t *testing.T) {
	bin := buildBinary(t)
	work := t.TempDir()
	addr := freePort(t)
	logPath := filepath.Join(work, "node.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	output := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	cmd := exec.Command(bin)
	cmd.Dir = work
	cmd.Env = append(envWithoutScafo(), "SCAFO_LISTEN="+addr, "SCAFO_STATEDIR="+filepath.Join(work, "scafo-state"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
	}()
	if err := proc.Poll(30*time.Second, proc.Tick, func() error { return proc.HTTPOK(nil, "http://"+addr+"/v1/readyz") }); err != nil {
		t.Fatalf("readyz never 200 (last err %v): %s", err, output())
	}

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	proc.WaitStopped(t, cmd.Process.Pid)
	const n = 32
	var answers []*bufio.Reader
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second) // the kernel queues it
		if err != nil {
			t.Fatalf("connecting %d: %v", i, err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(c, "GET /v1/readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		answers = append(answers, bufio.NewReader(c))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for i, r := range answers {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Errorf("request %d, queued at the stop: %v, want an answer", i, err)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v: %s", err, output())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit within 30 s of SIGTERM: %s", output())
	}
	if t.Failed() {
		t.Logf("the node's output: %s", output())
	}
}
