package e2e

import (
	"bytes"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
)

// The suite's harness beside node_test.go (nodes, fleets, the API) and traefik_test.go
// (Traefik, its configuration and API): child processes, waits, ports and the loops a test
// runs beside what it watches. Child processes (nodes, Traefiks) run through
// internal/proc, shared with e2e/bench and node/store/s3/s3test: output in a log file,
// Pdeathsig, waits by event, stop by PID.

// newProc prepares (does not start) a child with env added to this process's
// environment. It is SIGKILLed when the test ends, and its log's tail printed if the
// test failed.
func newProc(t *testing.T, name, bin string, args, env []string) *proc.Proc {
	t.Helper()
	p := proc.New(t, name, bin, args...)
	p.Env = append(os.Environ(), env...)
	return p
}

// The suite's names for the shared waits and ports.
var (
	// waitFor polls cond until it returns nil, or fails the test at the deadline.
	waitFor = proc.WaitFor
	// poll is waitFor returning the last error instead of failing.
	poll = proc.Poll
	// freePort returns a port free on ip right now.
	freePort = proc.MustFreePort
	hostPort = proc.HostPort
)

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

// repeat calls fn at once and then every interval, one call at a time, until stop is
// called (also at the test's cleanup, when t is given); stop waits for the call under way.
func repeat(t *testing.T, interval time.Duration, fn func()) (stop func()) {
	stopc, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			fn()
			select {
			case <-stopc:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(stopc) }); <-done }
	if t != nil {
		t.Cleanup(stop)
	}
	return stop
}

// workers runs fn(w, i) in n goroutines (w the worker, i its call), each call after the
// last, until stop is called (also at the test's cleanup); stop waits for the calls under
// way.
func workers(t *testing.T, n int, fn func(w, i int)) (stop func()) {
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stopped.Load(); i++ {
				fn(w, i)
			}
		}()
	}
	stop = func() { stopped.Store(true); wg.Wait() }
	t.Cleanup(stop)
	return stop
}
