package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/scafo/ingress/internal/proc"
)

// Child processes (nodes, nginx, Traefik, the serve child) run through internal/proc,
// shared with e2e and node/store/s3/s3test: output in a log file, Pdeathsig, waits by
// event, stop by PID (never by name).

// newProc prepares (does not start) a child with childEnviron. When the task ends it
// gets SIGTERM and, 5s later, SIGKILL (by its PID); its log's tail is printed if the
// task failed. Until then an interrupt of the program stops it (stopOnSignal).
func newProc(t *task, name, bin string, args ...string) *proc.Proc {
	if interrupted.Load() {
		t.Fatalf("%s not started: interrupted", name)
	}
	p := proc.New(t, name, bin, args...)
	p.Env = childEnviron()
	p.Grace = 5 * time.Second
	live.Lock()
	live.procs[p] = true
	live.Unlock()
	t.Cleanup(func() {
		live.Lock()
		delete(live.procs, p)
		live.Unlock()
	})
	return p
}

// rssKB reads VmRSS and VmHWM (peak) of the running process from /proc, in KiB.
func rssKB(p *proc.Proc) (rss, peak int64) {
	pid := p.PID()
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
func freePort(t *task) int { return proc.MustFreePort(t, "127.0.0.1") }

// waitFor polls cond until it returns nil, or fails the task at the deadline.
var waitFor = proc.WaitFor

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func mustWrite(t *task, path string, b []byte) {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(fmt.Errorf("writing %s: %w", path, err))
	}
}

// cpuTime is the process's user+system CPU time so far, from /proc/<pid>/stat.
func cpuTime(p *proc.Proc) time.Duration {
	pid := p.PID()
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
