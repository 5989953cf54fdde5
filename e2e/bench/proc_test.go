package bench

import (
	"fmt"
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

// proc is one child process (a node, nginx, Traefik) with its output in a log file. It
// is stopped by its own PID, never by name.
type proc struct {
	name string
	bin  string
	args []string
	log  string
	// deathSignal is sent to the process if the test binary dies (default SIGKILL).
	// nginx gets SIGTERM: its master then stops its workers, which SIGKILL would orphan.
	deathSignal syscall.Signal

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	start time.Time
}

func newProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, bin: bin, args: args, log: t.TempDir() + "/" + name + ".log"}
	t.Cleanup(func() {
		p.stop(5 * time.Second)
		if t.Failed() {
			t.Logf("---- %s log (tail) ----\n%s", p.name, p.tail(40))
		}
	})
	return p
}

// run launches the process; it dies with the test binary (Pdeathsig).
func (p *proc) run(t *testing.T) {
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
	cmd.Env = childEnviron()
	cmd.Stdout, cmd.Stderr = f, f
	sig := p.deathSignal
	if sig == 0 {
		sig = syscall.SIGKILL
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: sig}
	p.start = time.Now()
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

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stop sends SIGTERM to the process's PID, waits up to grace, then SIGKILLs that PID.
func (p *proc) stop(grace time.Duration) {
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
		_ = cmd.Process.Kill()
		<-done
	}
}

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

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// rssKB reads VmRSS and VmHWM (peak) of the running process from /proc, in KiB.
func (p *proc) rssKB() (rss, peak int64) {
	pid := p.pid()
	if pid == 0 {
		return 0, 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			peak = n
		}
	}
	return rss, peak
}

// freePort returns a TCP port free on 127.0.0.1 right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond every 10ms until it returns nil or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %v", timeout, what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(fmt.Errorf("writing %s: %w", path, err))
	}
}

// cpuTime is the process's user+system CPU time so far, from /proc/<pid>/stat.
func (p *proc) cpuTime() time.Duration {
	pid := p.pid()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are fields 14, 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks
}

// childEnviron is this process's environment without SCAFO_* variables: scafo-node
// reads every SCAFO_* variable as configuration (and refuses unknown ones), and the
// bench's own knobs are no business of the processes it measures.
func childEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SCAFO_") {
			env = append(env, kv)
		}
	}
	return env
}
