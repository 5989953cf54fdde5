//go:build !linux

package s3test

import "os/exec"

func startCmd(cmd *exec.Cmd) error { return cmd.Start() }
