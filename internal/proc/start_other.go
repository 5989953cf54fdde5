//go:build !linux

package proc

import (
	"os/exec"
	"syscall"
)

// start starts cmd; without Pdeathsig a child outlives a test binary that dies without
// cleaning up.
func start(cmd *exec.Cmd, _ syscall.Signal) error { return cmd.Start() }
