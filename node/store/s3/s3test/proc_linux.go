package s3test

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

// startCmd starts cmd so that the kernel kills it if the test binary dies without
// running Main's cleanup (a timeout panic, a SIGKILL). Pdeathsig fires when the thread
// that forked exits, so every start happens on one goroutine locked to its thread for
// the life of the process.
func startCmd(cmd *exec.Cmd) error {
	starterOnce.Do(func() {
		starter = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range starter {
				f()
			}
		}()
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan error)
	starter <- func() { done <- cmd.Start() }
	return <-done
}
