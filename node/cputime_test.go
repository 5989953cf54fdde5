//go:build unix

package node_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this test process has used (user and system, every thread): a
// measure of work that does not grow with the machine's load, unlike a wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
