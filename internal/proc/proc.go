// Package proc runs the child processes of the repository's tests (Traefik, scafo-node,
// nginx, MinIO, a re-executed test binary) the one way all of them need:
//
//   - stdout and stderr appended to a log file (kept across restarts, its tail printed
//     when a test fails);
//   - started so that the kernel kills the child when the test binary dies without
//     cleaning up (Pdeathsig on Linux: a timeout panic, a SIGKILL);
//   - waited for by event, with a deadline, never by a fixed sleep: a log line
//     (WaitLog), a port that accepts (WaitPort), any probe (WaitUntil); a wait ends at
//     once, with the log's tail, when the child exits instead;
//   - stopped by its own PID, never by name: SIGTERM, then SIGKILL after a grace (Stop),
//     or SIGKILL at once (Kill).
//
// It is a normal package (not a _test.go file) so that e2e, e2e/bench and
// node/store/s3/s3test can share it; only tests import it.
package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process. Set the exported fields, then Start; a stopped Proc can be
// started again with the same settings.
type Proc struct {
	Name string   // for messages
	Bin  string   // the executable
	Args []string // its arguments
	// Env is the child's whole environment; nil means this process's (os.Environ()).
	Env []string
	Dir string // working directory; "" is this process's
	// ExtraFiles are handed to the child as descriptors 3, 4, … (sockets a test holds
	// across the child's restarts, as systemd does for a socket unit).
	ExtraFiles []*os.File
	// Log is the file stdout and stderr are appended to, across restarts. Required.
	Log string
	// DeathSignal is what the kernel sends the child when the test binary dies (Linux
	// only; default SIGKILL). A process that forks workers (nginx) wants SIGTERM: its
	// master then stops the workers, which SIGKILL would orphan.
	DeathSignal syscall.Signal
	// Grace is how long the cleanup registered by New waits after SIGTERM before it
	// sends SIGKILL; 0 means SIGKILL at once.
	Grace time.Duration

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current run has exited (and been reaped)
	started time.Time
}

// TB is what the helpers of this package use of a test: *testing.T and *testing.B
// are one, and so is a program's own harness (e2e/bench's task), which cannot be a
// testing.TB.
type TB interface {
	Helper()
	Cleanup(func())
	TempDir() string
	Failed() bool
	Logf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// TailLines is how many lines of a child's log New's cleanup prints for a failed test.
const TailLines = 80

// New returns a Proc logging to <t.TempDir()>/<name>.log, stopped when t ends (see
// Grace); if t failed, the tail of its log is printed.
func New(t TB, name, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Bin: bin, Args: args, Log: filepath.Join(t.TempDir(), name+".log")}
	t.Cleanup(func() {
		p.Stop(p.Grace)
		if t.Failed() {
			t.Logf("---- %s log (tail) ----\n%s", p.Name, p.Tail(TailLines))
		}
	})
	return p
}

// Start launches the child. It fails if this Proc is already running.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done: // exited on its own: it may be started again
		default:
			return fmt.Errorf("%s: already running (pid %d)", p.Name, p.cmd.Process.Pid)
		}
	}
	if p.Log == "" {
		return fmt.Errorf("%s: no log file set", p.Name)
	}
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%s: opening its log: %w", p.Name, err)
	}
	// The child writes to the file itself (no copying goroutine), so Wait does not
	// depend on grandchildren that inherit the descriptor.
	defer f.Close()
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = p.Env
	cmd.Dir = p.Dir
	cmd.ExtraFiles = p.ExtraFiles
	cmd.Stdout, cmd.Stderr = f, f
	sig := p.DeathSignal
	if sig == 0 {
		sig = syscall.SIGKILL
	}
	if err := start(cmd, sig); err != nil {
		return fmt.Errorf("%s: starting %s: %w", p.Name, p.Bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done, p.started = cmd, done, time.Now()
	return nil
}

// MustStart is Start failing t.
func (p *Proc) MustStart(t TB) {
	t.Helper()
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
}

// take detaches the current run, so that exactly one caller stops it.
func (p *Proc) take() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	return cmd, done
}

// Stop sends SIGTERM to the child's PID and waits up to grace for it to exit, then
// sends SIGKILL and waits. It reports whether SIGKILL was needed. grace 0 is Kill. A
// Proc that is not running is left alone.
func (p *Proc) Stop(grace time.Duration) (killed bool) {
	cmd, done := p.take()
	if cmd == nil {
		return false
	}
	if grace > 0 {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-done:
			return false
		case <-timer.C:
		}
	}
	_ = cmd.Process.Kill()
	<-done
	return grace > 0
}

// Kill sends SIGKILL to the child's PID (a crash, a pulled cable) and waits for it.
func (p *Proc) Kill() { p.Stop(0) }

// Done is closed when the current (or last) run has exited; nil before the first Start.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// current is the current run: its command (nil once stopped), its done channel (nil
// before the first Start), and whether it is still running.
func (p *Proc) current() (cmd *exec.Cmd, done chan struct{}, running bool) {
	p.mu.Lock()
	cmd, done = p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return cmd, done, false
	}
	select {
	case <-done:
		return cmd, done, false
	default:
		return cmd, done, true
	}
}

// Exited reports whether the child is not running: never started, stopped, or exited
// on its own.
func (p *Proc) Exited() bool {
	_, _, running := p.current()
	return !running
}

// PID is the running child's process id, 0 when it is not running.
func (p *Proc) PID() int {
	cmd, _, running := p.current()
	if !running {
		return 0
	}
	return cmd.Process.Pid
}

// Started is when the current (or last) run was started.
func (p *Proc) Started() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// exitState describes how the last run ended.
func (p *Proc) exitState() string {
	cmd, done, _ := p.current()
	switch {
	case done == nil:
		return "never started"
	case cmd == nil:
		return "stopped"
	}
	<-done // ProcessState is set once done is closed
	return cmd.ProcessState.String()
}

// Output is the whole log.
func (p *Proc) Output() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// LogSize is the log's length now: pass it to WaitLog to wait for a line written after
// this moment.
func (p *Proc) LogSize() int64 {
	st, err := os.Stat(p.Log)
	if err != nil {
		return 0
	}
	return st.Size()
}

// Tail is the last n lines of the log.
func (p *Proc) Tail(n int) string { return Tail(p.Output(), n) }

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errExited is wrapped by a wait that ended because the child exited.
var errExited = errors.New("exited")

// IsExited reports whether err is a wait ending because the child exited.
func IsExited(err error) bool { return errors.Is(err, errExited) }

// WaitUntil calls cond every Tick until it returns nil, the child exits (an error
// wrapping the exit status and the log's tail; see IsExited), or timeout passes (cond's
// last error).
func (p *Proc) WaitUntil(timeout time.Duration, cond func() error) error {
	done := p.Done()
	if done == nil {
		return fmt.Errorf("%s: never started", p.Name)
	}
	exited := func() error {
		return fmt.Errorf("%s %w (%s); log tail:\n%s", p.Name, errExited, p.exitState(), p.Tail(30))
	}
	return pollUntil(timeout, Tick, done, exited, cond)
}

// WaitLog waits until a line containing substr appears in the log after byte offset
// from (0: anywhere; LogSize(): from now on), on the terms of WaitUntil.
func (p *Proc) WaitLog(timeout time.Duration, from int64, substr string) error {
	r := &lineScanner{path: p.Log, pos: from}
	return p.WaitUntil(timeout, func() error {
		found, err := r.find(substr)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%s: no line with %q in its log yet", p.Name, substr)
		}
		return nil
	})
}

// WaitPort waits until addr (host:port) accepts TCP connections, on the terms of
// WaitUntil.
func (p *Proc) WaitPort(timeout time.Duration, addr string) error {
	return p.WaitUntil(timeout, func() error { return Dial(addr) })
}

// lineScanner reads a growing file from pos, whole lines only, so that a wait reads
// every byte once.
type lineScanner struct {
	path    string
	pos     int64
	partial string
}

func (r *lineScanner) find(substr string) (bool, error) {
	f, err := os.Open(r.path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if _, err := f.Seek(r.pos, io.SeekStart); err != nil {
		return false, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return false, err
	}
	r.pos += int64(len(b))
	text := r.partial + string(b)
	last := strings.LastIndexByte(text, '\n')
	r.partial = text[last+1:]
	return strings.Contains(text[:last+1], substr), nil
}
