package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
)

// The test binary is also the echo command: run with ECHO_MAIN=1 it is main, with the
// arguments in ECHO_ARGS (the test flags stay out of its way).
func TestMain(m *testing.M) {
	if os.Getenv("ECHO_MAIN") == "1" {
		os.Args = append([]string{"echo"}, strings.Fields(os.Getenv("ECHO_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// echoProc is one echo process started the way systemd starts a socket-activated service:
// the socket as descriptor 3, LISTEN_FDS=1 and LISTEN_PID its own pid (sh sets it to $$,
// then execs the binary, which keeps the pid).
type echoProc struct {
	cmd    *exec.Cmd
	out    *proc.Buffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

func startActivated(t *testing.T, sock *os.File, args string) *echoProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$; export LISTEN_PID; exec "$0"`, self)
	cmd.Env = append(os.Environ(), "ECHO_MAIN=1", "ECHO_ARGS="+args, "LISTEN_FDS=1")
	cmd.ExtraFiles = []*os.File{sock} // descriptor 3
	return run(t, cmd)
}

// run starts cmd, an echo process, keeping its output and awaiting its exit; at the end
// of the test it is killed if still running.
func run(t *testing.T, cmd *exec.Cmd) *echoProc {
	t.Helper()
	p := &echoProc{cmd: cmd, out: &proc.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// waitExitZero waits, up to 30 s, for who (the process) to exit after its SIGTERM, and
// wants it to exit 0.
func (p *echoProc) waitExitZero(t *testing.T, who string) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running 30 s after SIGTERM: %q", who, p.out.String())
	}
	if p.err != nil {
		t.Fatalf("%s on SIGTERM: %v, want exit 0 (output %q)", who, p.err, p.out.String())
	}
}

// answer reads the answer to the request written on c, failing the test if the process
// exits first.
func (p *echoProc) answer(t *testing.T, c net.Conn) string {
	t.Helper()
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, body, err := readAnswer(bufio.NewReader(c))
		got <- result{body, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("reading the answer: %v (echo's output: %q)", r.err, p.out.String())
		}
		return r.body
	case <-p.exited:
		t.Fatalf("echo exited before answering: %v, output %q", p.err, p.out.String())
	}
	return ""
}

// send connects to addr and writes a GET of path on a connection that closes after it.
// The connect succeeds whether or not a process serves the socket: the kernel completes
// the handshake into the listening socket's backlog.
func send(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("connecting to %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: echo\r\nConnection: close\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return c
}

// heldSocket is a listening socket on 127.0.0.1 held the way systemd's socket unit
// holds one, and the descriptor to pass to a release; both close with the test.
func heldSocket(t *testing.T) (*os.File, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	sock, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	return sock, ln.Addr().String()
}

// An in-place restart on a socket the service manager holds: the first release serves
// the socket it was passed (it cannot listen on -listen, an address no one can bind),
// stops gracefully on SIGTERM and exits 0; a request sent while no release runs queues
// in the socket's backlog and the next release answers it.
func TestServesTheSocketSystemdPassed(t *testing.T) {
	sock, addr := heldSocket(t)
	const unbindable = "-listen 192.0.2.1:1 -lame-duck 0s" // TEST-NET-1: not an address of this machine

	r1 := startActivated(t, sock, "-name r1 "+unbindable)
	if got := r1.answer(t, send(t, addr, "/first")); got != "r1 /first\n" {
		t.Fatalf("first release answered %q, want %q", got, "r1 /first\n")
	}
	if err := r1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r1.waitExitZero(t, "the first release")

	queued := send(t, addr, "/queued") // no release runs: the backlog holds it
	r2 := startActivated(t, sock, "-name r2 "+unbindable)
	if got := r2.answer(t, queued); got != "r2 /queued\n" {
		t.Fatalf("a request sent between the releases: answered %q, want the next release's %q", got, "r2 /queued\n")
	}
}

// Sockets meant for another process (LISTEN_PID not ours: inherited from a parent that
// was activated) are not taken: echo listens on -listen. More than one socket is refused.
func TestListenerTakesOnlyItsOwnSocket(t *testing.T) {
	t.Setenv("LISTEN_FDS", "1")
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getppid()))
	ln, passed, err := listener("127.0.0.1:0")
	if err != nil || passed {
		t.Fatalf("LISTEN_PID of another process: %v (passed %v), want a new listener on -listen", err, passed)
	}
	if a := ln.Addr().(*net.TCPAddr); !a.IP.IsLoopback() || a.Port == 0 {
		t.Errorf("listening on %s, want a new port on 127.0.0.1", a)
	}
	ln.Close()
	if os.Getenv("LISTEN_FDS") != "1" {
		t.Errorf("LISTEN_FDS unset although the sockets were not ours")
	}

	t.Setenv("LISTEN_FDS", "2")
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	if ln, _, err := listener("127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "LISTEN_FDS=2") {
		if ln != nil {
			ln.Close()
		}
		t.Errorf("LISTEN_FDS=2: %v, want an error naming LISTEN_FDS=2", err)
	}
	if os.Getenv("LISTEN_PID") != "" {
		t.Errorf("LISTEN_PID left set after taking the sockets: a child would take them too")
	}
}

// get sends a GET of path on c (a keep-alive connection) and reads the answer.
func get(t *testing.T, c net.Conn, br *bufio.Reader, path string) (*http.Response, string, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: echo\r\n\r\n", path); err != nil {
		return nil, "", err
	}
	return readAnswer(br)
}

// readAnswer reads one response from r and its body.
func readAnswer(r *bufio.Reader) (*http.Response, string, error) {
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// keepAlive opens a connection to addr, echo -name lame's, and has one answer on it,
// kept alive: echo then holds it idle.
func keepAlive(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	if resp, body, err := get(t, c, r, "/before"); err != nil || body != "lame /before\n" || resp.Close {
		t.Fatalf("before SIGTERM: %v %q (close %v), want a keep-alive answer", err, body, resp != nil && resp.Close)
	}
	return c, r
}

// awaitLameDuck returns once a fresh connection to addr is answered with Connection:
// close: the lame duck has begun.
func awaitLameDuck(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		resp, _, err := get(t, c, bufio.NewReader(c), "/probe")
		c.Close()
		if err != nil {
			t.Fatalf("a fresh connection after SIGTERM: %v, want an answer (lame duck)", err)
		}
		if resp.Close {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no answer with Connection: close within 30 s of SIGTERM")
		}
	}
}

// On SIGTERM the lame duck keeps serving, and an idle keep-alive connection is not closed
// under a proxy that may be writing a request on it: its next request is answered, with
// Connection: close. A second SIGTERM ends the lame duck early: echo stops and exits 0
// (its lame duck is an hour here, so no check below races its end on a loaded machine).
func TestLameDuckAnswersIdleConnectionsWithClose(t *testing.T) {
	sock, addr := heldSocket(t)
	p := startActivated(t, sock, "-name lame -listen 192.0.2.1:1 -lame-duck 1h")
	idle, idleR := keepAlive(t, addr)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitLameDuck(t, addr)
	resp, body, err := get(t, idle, idleR, "/after")
	if err != nil {
		t.Fatalf("the idle keep-alive connection after SIGTERM: %v, want it answered (closed only after its next answer)", err)
	}
	if body != "lame /after\n" || !resp.Close {
		t.Fatalf("the idle connection's answer in the lame duck: %q, close %v, want %q with Connection: close", body, resp.Close, "lame /after\n")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitExitZero(t, "echo, after a second SIGTERM in an hour's lame duck,")
}

// One SIGTERM: echo is a lame duck for the whole -lame-duck, then stops by itself and
// exits 0, although a keep-alive connection stays idle and never sends again (the stop
// waits a second for it, not for ever). The lame duck is longer than that second, so an
// echo without one exits too early. Both bounds are measured from before the signal: a
// slow test only lengthens what it measures, and the upper bound leaves a loaded machine
// seconds of room.
func TestLameDuckEndsByItself(t *testing.T) {
	const lameDuck = 2 * time.Second
	sock, addr := heldSocket(t)
	p := startActivated(t, sock, "-name lame -listen 192.0.2.1:1 -lame-duck "+lameDuck.String())
	keepAlive(t, addr)
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitLameDuck(t, addr)
	p.waitExitZero(t, "echo, after one SIGTERM,")
	if took := time.Since(t0); took < lameDuck || took > lameDuck+9*time.Second {
		t.Errorf("echo exited %s after SIGTERM, want its lame duck (%s) and a second for the idle connection", took, lameDuck)
	}
}
