package e2e

import (
	"bytes"
	"os"
	"testing"

	"github.com/scafo/ingress/internal/proc"
)

// Child processes (nodes, Traefiks) run through internal/proc, shared with e2e/bench
// and node/store/s3/s3test: output in a log file, Pdeathsig, waits by event, stop by PID.

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
