package proc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

var (
	starterOnce sync.Once
	starter     chan func()
)

// start starts cmd so that the kernel sends it sig when the test binary dies without
// cleaning up. Pdeathsig fires when the thread that forked exits, not the process, and
// the Go runtime does end threads (one whose goroutine exits while locked to it): so
// every start happens on one goroutine locked to its thread for the life of the process.
func start(cmd *exec.Cmd, sig syscall.Signal) error {
	starterOnce.Do(func() {
		starter = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range starter {
				f()
			}
		}()
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: sig}
	done := make(chan error)
	starter <- func() { done <- cmd.Start() }
	return <-done
}
