package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
)

// startOwn starts echo listening itself on -listen (no socket passed) and returns it
// with the address it serves, read from its start line.
func startOwn(t *testing.T, args string) (*echoProc, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LISTEN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "ECHO_MAIN=1", "ECHO_ARGS="+args)
	p := run(t, cmd)
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGCONT) }) // before run's kill: a test may have frozen it
	serving, addr := regexp.MustCompile(`serving on (\S+)`), ""
	proc.WaitFor(t, "echo to say where it serves", 30*time.Second, func() error {
		if m := serving.FindStringSubmatch(p.out.String()); m != nil {
			addr = m[1]
			return nil
		}
		select {
		case <-p.exited:
			t.Fatalf("echo exited before serving: %v, output %q", p.err, p.out.String())
		default:
		}
		return fmt.Errorf("output %q", p.out.String())
	})
	return p, addr
}

// A plain in-place restart's stop, on a socket echo listened itself: connections that
// wait in its accept queue when SIGTERM comes (echo was frozen while they connected and
// wrote their requests, and stops with no lame duck, so the stop races the accepts) are
// all answered, none reset: echo gates and drains its socket before closing it.
func TestStopsItsOwnSocketThroughTheGate(t *testing.T) {
	p, addr := startOwn(t, "-name own -listen 127.0.0.1:0 -lame-duck 0s")
	if got := p.answer(t, send(t, addr, "/first")); got != "own /first\n" {
		t.Fatalf("answered %q, want %q", got, "own /first\n")
	}
	pid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	proc.WaitStopped(t, pid)
	const n = 32
	var conns []*bufio.Reader
	for i := range n {
		c := send(t, addr, fmt.Sprintf("/queued/%d", i)) // the kernel queues it
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		conns = append(conns, bufio.NewReader(c))
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for i, r := range conns {
		if _, body, err := readAnswer(r); err != nil || body != fmt.Sprintf("own /queued/%d\n", i) {
			t.Errorf("request %d, queued at the stop: %q, %v, want it answered (echo's output: %q)", i, body, err, p.out.String())
		}
	}
	p.waitExitZero(t, "echo")
}
