package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
)

// task is one measurement of the report or one case of it (task.Run): it collects
// failures, ends at the first fatal one, and runs its cleanups (processes stopped by
// their PID, temporary directories removed) in reverse order when it ends.
//
// Its methods carry testing.T's names so that the measurements read as they did when
// they were tests, and so that it is a proc.TB and an s3test.TB, the small interfaces
// the helpers shared with the e2e and store tests take.
type task struct {
	name   string
	parent *task

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

// stopTask is the panic value of a fatal failure: it unwinds the task's function to
// task.run, which runs the cleanups.
type stopTask struct{}

func newTask(name string) *task { return &task{name: name} }

func (t *task) Name() string { return t.name }
func (t *task) Helper()      {}

func (t *task) Log(args ...any)                 { t.print(fmt.Sprintln(args...)) }
func (t *task) Logf(format string, args ...any) { t.print(fmt.Sprintf(format, args...)) }

// Error records a failure; the task goes on.
func (t *task) Error(args ...any) { t.Fail(); t.print("FAIL: " + fmt.Sprintln(args...)) }
func (t *task) Errorf(format string, args ...any) {
	t.Fail()
	t.print("FAIL: " + fmt.Sprintf(format, args...))
}

// Fatal records a failure and ends the task.
func (t *task) Fatal(args ...any)                 { t.Error(args...); t.FailNow() }
func (t *task) Fatalf(format string, args ...any) { t.Errorf(format, args...); t.FailNow() }

// Skip is a failure: a measurement the run asked for that cannot be taken must not
// leave a report that reads as complete.
func (t *task) Skip(args ...any)                 { t.Fatal(append([]any{"cannot measure:"}, args...)...) }
func (t *task) Skipf(format string, args ...any) { t.Fatalf("cannot measure: "+format, args...) }
func (t *task) SkipNow()                         { t.Fatal("cannot measure") }

func (t *task) Fail() {
	for p := t; p != nil; p = p.parent {
		p.mu.Lock()
		p.failed = true
		p.mu.Unlock()
	}
}

func (t *task) FailNow() { panic(stopTask{}) }

func (t *task) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *task) print(msg string) {
	msg = strings.TrimRight(msg, "\n")
	fmt.Fprintf(os.Stderr, "%s: %s\n", t.name, strings.ReplaceAll(msg, "\n", "\n    "))
}

// Cleanup registers f to run when the task ends, after those registered later.
func (t *task) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// tempRoot holds every task's temporary directories ("": the system's), so that an
// interrupt removes them all (stopOnSignal).
var tempRoot string

// TempDir returns a new directory removed when the task ends.
func (t *task) TempDir() string {
	dir, err := os.MkdirTemp(tempRoot, "scafo-bench-")
	if err != nil {
		t.Fatalf("creating a temporary directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Setenv sets an environment variable of this process until the task ends.
func (t *task) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		t.Fatalf("setting %s: %v", key, err)
	}
	t.Cleanup(func() {
		if had {
			os.Setenv(key, old)
		} else {
			os.Unsetenv(key)
		}
	})
}

// Run runs f as a case of t, named name, and reports whether it passed. A case that
// fails marks t failed; t goes on to its next case, as the report wants every case it
// can get.
func (t *task) Run(name string, f func(t *task)) bool {
	c := &task{name: t.name + "/" + name, parent: t}
	if interrupted.Load() {
		c.Errorf("not started: interrupted")
		return false
	}
	c.run(f)
	return !c.Failed()
}

// run calls f, then the cleanups. A panic other than a fatal failure is a bug: it is
// printed with its stack, the cleanups run, and it goes on up.
func (t *task) run(f func(t *task)) {
	defer func() {
		r := recover()
		if _, fatal := r.(stopTask); r != nil && !fatal {
			t.Fail()
			t.print(fmt.Sprintf("panic: %v\n%s", r, debug.Stack()))
		}
		t.runCleanups()
		if _, fatal := r.(stopTask); r != nil && !fatal {
			panic(r)
		}
	}()
	f(t)
}

func (t *task) runCleanups() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		f()
	}
}
