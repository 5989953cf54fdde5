package proc

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is its own child: with childEnv set it runs the named behaviour
// instead of the tests.
const childEnv = "PROC_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "listen":
		// Logs, listens on the address in PROC_TEST_ADDR, logs again, exits on SIGTERM.
		fmt.Println("starting")
		l, err := net.Listen("tcp", os.Getenv("PROC_TEST_ADDR"))
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(3)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		fmt.Println("listening on", l.Addr())
		<-sigs
		fmt.Println("got SIGTERM")
		os.Exit(0)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		select {}
	case "parent":
		// Starts a stubborn grandchild through this package and waits to be killed.
		g := &Proc{Name: "grandchild", Bin: os.Args[0], Args: []string{"-test.run=^$"},
			Env: append(os.Environ(), childEnv+"=stubborn"), Log: os.Getenv("PROC_TEST_LOG")}
		if err := g.Start(); err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		fmt.Println("grandchild pid", g.PID())
		select {}
	case "fail":
		fmt.Fprintln(os.Stderr, "something went wrong")
		os.Exit(7)
	}
}

func child(t *testing.T, behaviour string, env ...string) *Proc {
	t.Helper()
	p := New(t, behaviour, os.Args[0], "-test.run=^$")
	p.Env = append(os.Environ(), append([]string{childEnv + "=" + behaviour}, env...)...)
	return p
}

// must fails t on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStartWaitAndStopBySIGTERM(t *testing.T) {
	port := MustFreePort(t, "127.0.0.1")
	addr := HostPort("127.0.0.1", port)
	p := child(t, "listen", "PROC_TEST_ADDR="+addr)
	p.MustStart(t)
	must(t, p.WaitLog(10*time.Second, 0, "listening on"))
	must(t, p.WaitPort(10*time.Second, addr))
	if p.PID() == 0 || p.Exited() {
		t.Fatalf("pid %d, exited %v: want a running child", p.PID(), p.Exited())
	}
	if err := p.Start(); err == nil {
		t.Error("a second Start of a running child succeeded")
	}
	if killed := p.Stop(10 * time.Second); killed {
		t.Error("the child needed SIGKILL, want it to exit on SIGTERM")
	}
	if !p.Exited() || p.PID() != 0 {
		t.Errorf("after Stop: exited %v, pid %d", p.Exited(), p.PID())
	}
	if !strings.Contains(p.Output(), "got SIGTERM") {
		t.Errorf("log %q lacks the child's SIGTERM line", p.Output())
	}

	// Started again: the log is appended to, and WaitLog from LogSize() ignores the
	// first run's lines.
	from := p.LogSize()
	p.MustStart(t)
	must(t, p.WaitLog(10*time.Second, from, "listening on"))
	if n := strings.Count(p.Output(), "listening on"); n != 2 {
		t.Errorf("the log holds %d 'listening on' lines, want 2 (one per run)", n)
	}
	p.Kill()
	if err := Dial(addr); err == nil {
		t.Error("the port still accepts after Kill")
	}
	if err := WaitBindable(10*time.Second, addr); err != nil {
		t.Error(err)
	}
}

func TestStopKillsAChildThatIgnoresSIGTERM(t *testing.T) {
	p := child(t, "stubborn")
	p.MustStart(t)
	must(t, p.WaitLog(10*time.Second, 0, "ignoring SIGTERM"))
	t0 := time.Now()
	if killed := p.Stop(200 * time.Millisecond); !killed {
		t.Error("Stop reports no SIGKILL for a child that ignores SIGTERM")
	}
	if d := time.Since(t0); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("Stop took %s, want the 200ms grace and then the kill", d)
	}
}

func TestWaitsEndWhenTheChildExits(t *testing.T) {
	p := child(t, "fail")
	p.MustStart(t)
	t0 := time.Now()
	err := p.WaitLog(time.Minute, 0, "never printed")
	if !IsExited(err) {
		t.Fatalf("err %v, want the child's exit", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("the wait took %s: it should end when the child exits, not at its deadline", d)
	}
	for _, want := range []string{"exit status 7", "something went wrong"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err %q lacks %q", err, want)
		}
	}
	// A line the child wrote before exiting is still found.
	if err := p.WaitLog(time.Second, 0, "went wrong"); err != nil {
		t.Errorf("a line logged before the exit: %v", err)
	}
	// An exited child may be started again.
	if err := p.Start(); err != nil {
		t.Errorf("restarting an exited child: %v", err)
	}
}

func TestPollReturnsTheLastErrorAtTheDeadline(t *testing.T) {
	n := 0
	err := Poll(50*time.Millisecond, time.Millisecond, func() error { n++; return fmt.Errorf("try %d", n) })
	if err == nil || !strings.HasPrefix(err.Error(), "try ") || n < 2 {
		t.Errorf("err %v after %d tries", err, n)
	}
	if err := Poll(time.Second, time.Millisecond, func() error { return nil }); err != nil {
		t.Error(err)
	}
}

func TestTail(t *testing.T) {
	if got := Tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("Tail = %q", got)
	}
	if got := Tail("a", 5); got != "a" {
		t.Errorf("Tail = %q", got)
	}
}
