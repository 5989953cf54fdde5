package e2e

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one child process (a node or a Traefik) with its output captured to a file.
// It can be stopped and started again with the same arguments.
type proc struct {
	name string
	bin  string
	args []string
	env  []string // added to os.Environ()
	log  string   // stdout+stderr, appended across restarts
	dir  string   // working directory ("" is the test's)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func newProc(t *testing.T, name, bin string, args, env []string) *proc {
	t.Helper()
	p := &proc{name: name, bin: bin, args: args, env: env, log: t.TempDir() + "/" + name + ".log"}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("---- %s log (tail) ----\n%s", p.name, tail(p.output(), 80))
		}
	})
	return p
}

// start launches the process. It dies with the test binary (Pdeathsig).
func (p *proc) start(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		t.Fatalf("%s: already running", p.name)
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("%s: opening log: %v", p.name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("%s: starting %s: %v", p.name, p.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// stop sends SIGTERM and waits for the exit (SIGKILL after grace).
func (p *proc) stop(t *testing.T, grace time.Duration) {
	t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		t.Errorf("%s (pid %d) did not exit %s after SIGTERM; killing it", p.name, cmd.Process.Pid, grace)
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill sends SIGKILL to this process (by its pid) and waits.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// exited reports whether the process has exited on its own.
func (p *proc) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePort returns a port free on ip right now (the listener is closed again; the race
// with other processes is accepted in a test).
func freePort(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("finding a free port on %s: %v", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond every tick until it returns nil or the deadline passes; then it
// fails with the last error.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := poll(timeout, 20*time.Millisecond, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

func poll(timeout, tick time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			if last == nil {
				last = errors.New("deadline passed")
			}
			return last
		}
		time.Sleep(tick)
	}
}

func hostPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

// countLines returns how many lines of s contain every one of subs.
func countLines(s string, subs ...string) int {
	n := 0
	for _, line := range bytes.Split([]byte(s), []byte("\n")) {
		all := true
		for _, sub := range subs {
			if !bytes.Contains(line, []byte(sub)) {
				all = false
				break
			}
		}
		if all && len(subs) > 0 {
			n++
		}
	}
	return n
}
